// Drives the official Java client (rocketmq-client-java, unmodified) through conformance
// scenarios against an Ariane access point and prints one JSON object per line (the events the
// Python tests parse). Compiled by fetch.sh against the jars it fetched, once per client version
// (5.0.8 and 5.2.0: this one source compiles against both; what only 5.2.0 has, the priority and
// lite-topic API, is reached by reflection and refused by 5.0.8); nothing here is Ariane's.
//
// Usage: java -cp <jars>:<classes> Driver SCENARIO --endpoints H:P --topic T [--group G]
//        [--count N] [--mode sync|async] [--groups G] [--tags A,B] [--expr E]
//        [--expr-type TAG|SQL92] [--expect N] [--linger-s S] [--deadline-s S] [--delay-ms D]
//        [--priority P | --priorities P0,P1,..] [--prefix B] [--batch N] [--lite-topic L]
//        [--access-key AK --secret-key SK] [--tls true|false]
//    or: java ... Driver batch --endpoints H:P [common options] < PLAN
// Scenarios: send-consume, push-redelivery, push-fail, transaction, recall, lite-push (see
// tests/conformance/polyglot.py). Message i's body is B-i (B: --prefix, default m) and its
// priority --priority, or P[i % len(P)] of --priorities; a SimpleConsumer receives --batch
// messages at most per call (default 16; 1 shows the order the broker hands them out in).
// push-fail (alone only, never in a batch) sends, then a PushConsumer fails every delivery
// until `count` failed, lingers --linger-s and ends the process without closing the consumer
// (see pushFail). `batch` runs several scenarios at once in this one JVM (a JVM
// start costs seconds): each PLAN line (stdin, tab-separated) is RUN SCENARIO --key value ...,
// run in its own thread with the command line's options under its own; every event of it carries
// `run`, and it ends with an `end` event (`run`, `code`: the exit code it would have had alone,
// `elapsed_ms`).
// With --access-key, every client signs with StaticSessionCredentialsProvider(AK, SK) (ACL 2.0).
// --tls true turns the client's enableSsl on (default here: plaintext); the client then trusts
// any server certificate (its InsecureTrustManagerFactory), so TLS is proved by the wire only.
// Exit codes: 0 done (batch: every run ended), 3 the deadline passed before `expect` messages
// arrived, 2 a client error (its `error` event names the client's exception class in `type`; a
// refusal of the access point, UnauthorizedException or ForbiddenException, also ends a receive
// loop with it; an API this client version lacks is an UnsupportedOperationException).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.MessageListener;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.exception.ForbiddenException;
import org.apache.rocketmq.client.java.exception.UnauthorizedException;

public final class Driver {
  private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
  private final Map<String, String> opts;
  private final ClientConfiguration config;
  /** The batch run this driver's events belong to; null when it runs alone. */
  private final String run;

  private Driver(Map<String, String> opts, String run) {
    this.opts = opts;
    this.run = run;
    ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
        .setEndpoints(opt("endpoints", "127.0.0.1:9876"))
        .enableSsl(Boolean.parseBoolean(opt("tls", "false")))
        .setRequestTimeout(Duration.ofSeconds(5));
    if (opts.containsKey("access-key")) {
      builder.setCredentialProvider(
          new StaticSessionCredentialsProvider(opt("access-key", ""), opt("secret-key", "")));
    }
    config = builder.build();
  }

  /** Options of `--key value` pairs from args[from]. */
  private static Map<String, String> options(String[] args, int from) {
    Map<String, String> opts = new HashMap<>();
    for (int i = from; i + 1 < args.length; i += 2) {
      opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
    return opts;
  }

  public static void main(String[] args) {
    int code;
    if (args[0].equals("batch")) {
      code = batch(options(args, 1));
    } else {
      Driver driver = null;
      try {
        driver = new Driver(options(args, 1), null);
        code = driver.run(args[0]);
      } catch (Throwable e) {
        code = failed(driver, e);
      }
    }
    System.out.flush();
    // The client's executor threads are not daemons; end the process with the scenario's code.
    Runtime.getRuntime().halt(code);
  }

  /** Reports e (stack on stderr, an `error` event) and returns the client-error exit code 2. */
  private static int failed(Driver driver, Throwable e) {
    e.printStackTrace();
    Throwable cause = clientException(e);
    Object[] kv = {"message", String.valueOf(cause), "type", cause.getClass().getSimpleName()};
    if (driver != null) {
      driver.emit("error", kv);
    } else {
      print(null, "error", kv);
    }
    return 2;
  }

  /** Runs every PLAN line of stdin in its own thread; 0 once all have ended. */
  private static int batch(Map<String, String> common) {
    List<String[]> plan = new ArrayList<>();
    try (BufferedReader in = new BufferedReader(
        new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (!line.isBlank()) {
          plan.add(line.split("\t"));
        }
      }
    } catch (Exception e) {
      return failed(null, e);
    }
    List<Thread> threads = new ArrayList<>();
    for (String[] fields : plan) {
      Map<String, String> opts = new HashMap<>(common);
      opts.putAll(options(fields, 2));
      long start = System.currentTimeMillis();
      Thread t = new Thread(() -> {
        Driver driver = null;
        int code;
        try {
          driver = new Driver(opts, fields[0]);
          code = driver.run(fields[1]);
        } catch (Throwable e) {
          code = failed(driver, e);
        }
        print(fields[0], "end", "code", code, "elapsed_ms", System.currentTimeMillis() - start);
      }, "run-" + fields[0]);
      t.start();
      threads.add(t);
    }
    for (Thread t : threads) {
      try {
        t.join();
      } catch (InterruptedException e) {
        return failed(null, e);
      }
    }
    return 0;
  }

  private int run(String scenario) throws Exception {
    switch (scenario) {
      case "send-consume":
        produce(null);
        return consume();
      case "transaction":
        return transaction();
      case "recall":
        return recall();
      case "push-redelivery":
        produce(null);
        return pushRedelivery();
      case "push-fail":
        if (run != null) {
          throw new IllegalArgumentException("push-fail ends its process: never in a batch");
        }
        produce(null);
        return pushFail();
      case "lite-push":
        return litePush();
      default:
        throw new IllegalArgumentException("unknown scenario " + scenario);
    }
  }

  /** The first ClientException in e's cause chain (the client wraps them), else e. */
  private static Throwable clientException(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ClientException) {
        return t;
      }
    }
    return e;
  }

  /** Whether e is the access point refusing the credentials (40100) or the request (40300). */
  private static boolean refusal(Throwable e) {
    Throwable cause = clientException(e);
    return cause instanceof UnauthorizedException || cause instanceof ForbiddenException;
  }

  private String opt(String key, String fallback) {
    return opts.getOrDefault(key, fallback);
  }

  private int num(String key, int fallback) {
    return Integer.parseInt(opt(key, String.valueOf(fallback)));
  }

  private Producer producer(org.apache.rocketmq.client.apis.producer.TransactionChecker checker)
      throws Exception {
    var builder = PROVIDER.newProducerBuilder()
        .setClientConfiguration(config)
        .setTopics(opt("topic", "t"));
    if (checker != null) {
      builder.setTransactionChecker(checker);
    }
    return builder.build();
  }

  private Message message(int i, String body) throws Exception {
    String[] tags = opt("tags", "TagA").split(",");
    MessageBuilder b = PROVIDER.newMessageBuilder()
        .setTopic(opt("topic", "t"))
        .setBody(body.getBytes(StandardCharsets.UTF_8))
        .setTag(tags[i % tags.length])
        .setKeys("k-" + i)
        .addProperty("n", String.valueOf(i));
    int groups = num("groups", 0);
    if (groups > 0) {
      b.setMessageGroup("g" + (i % groups));
    }
    int delayMs = num("delay-ms", 0);
    if (delayMs > 0) {
      b.setDeliveryTimestamp(System.currentTimeMillis() + delayMs);
    }
    Integer priority = priority(i);
    if (priority != null) {
      call(MessageBuilder.class, b, "setPriority", int.class, priority);
    }
    if (opts.containsKey("lite-topic")) {
      call(MessageBuilder.class, b, "setLiteTopic", String.class, opt("lite-topic", ""));
    }
    return b.build();
  }

  /** Message i's priority: P[i % len(P)] of --priorities, else --priority, else null. */
  private Integer priority(int i) {
    if (opts.containsKey("priorities")) {
      String[] levels = opt("priorities", "").split(",");
      return Integer.valueOf(levels[i % levels.length].trim());
    }
    return opts.containsKey("priority") ? num("priority", 0) : null;
  }

  private List<SendReceipt> produce(Producer given) throws Exception {
    Producer producer = given != null ? given : producer(null);
    List<SendReceipt> receipts = new ArrayList<>();
    int count = num("count", 1);
    boolean async = opt("mode", "sync").equals("async");
    List<CompletableFuture<SendReceipt>> pending = new ArrayList<>();
    String prefix = opt("prefix", "m");
    for (int i = 0; i < count; i++) {
      Message m = message(i, prefix + "-" + i);
      if (async) {
        pending.add(producer.sendAsync(m));
      } else {
        receipts.add(producer.send(m));
      }
    }
    for (CompletableFuture<SendReceipt> f : pending) {
      receipts.add(f.get());
    }
    for (int i = 0; i < receipts.size(); i++) {
      emit("sent", "i", i, "message_id", receipts.get(i).getMessageId().toString(),
          "async", async, "body", prefix + "-" + i, "priority", priority(i));
    }
    if (given == null) {
      producer.close();
    }
    return receipts;
  }

  private FilterExpression filter() {
    FilterExpressionType type = FilterExpressionType.valueOf(opt("expr-type", "TAG"));
    return new FilterExpression(opt("expr", "*"), type);
  }

  private int consume() throws Exception {
    int expect = num("expect", num("count", 1));
    long deadline = System.currentTimeMillis() + 1000L * num("deadline-s", 60);
    SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder()
        .setClientConfiguration(config)
        .setConsumerGroup(opt("group", "g"))
        .setAwaitDuration(Duration.ofSeconds(3))
        .setSubscriptionExpressions(Collections.singletonMap(opt("topic", "t"), filter()))
        .build();
    int received = 0;
    long lingerUntil = Long.MAX_VALUE;
    while (System.currentTimeMillis() < Math.min(deadline, lingerUntil)) {
      List<MessageView> batch;
      try {
        batch = consumer.receive(num("batch", 16), Duration.ofSeconds(30));
      } catch (Exception e) {
        if (refusal(e)) {
          throw e;
        }
        System.err.println("receive: " + e);
        continue;
      }
      for (MessageView view : batch) {
        emitView("received", view, null);
        consumer.ack(view);
        received++;
      }
      if (received >= expect && lingerUntil == Long.MAX_VALUE) {
        lingerUntil = System.currentTimeMillis() + 1000L * num("linger-s", 0);
      }
    }
    consumer.close();
    emit("done", "received", received);
    return received >= expect ? 0 : 3;
  }

  private int pushRedelivery() throws Exception {
    int expect = num("count", 1);
    AtomicInteger succeeded = new AtomicInteger();
    PushConsumer consumer = PROVIDER.newPushConsumerBuilder()
        .setClientConfiguration(config)
        .setConsumerGroup(opt("group", "g"))
        .setSubscriptionExpressions(Collections.singletonMap(opt("topic", "t"), filter()))
        .setMessageListener(view -> {
          boolean fail = view.getDeliveryAttempt() == 1;
          emitView("consumed", view, fail ? "FAILURE" : "SUCCESS");
          if (fail) {
            return ConsumeResult.FAILURE;
          }
          succeeded.incrementAndGet();
          return ConsumeResult.SUCCESS;
        })
        .build();
    long deadline = System.currentTimeMillis() + 1000L * num("deadline-s", 60);
    while (succeeded.get() < expect && System.currentTimeMillis() < deadline) {
      Thread.sleep(100); // polling a counter with a deadline
    }
    consumer.close();
    emit("done", "received", succeeded.get());
    return succeeded.get() >= expect ? 0 : 3;
  }

  /**
   * A PushConsumer whose listener fails every delivery, until `count` failed (or the deadline),
   * then `linger-s` more (extra deliveries show up as `consumed` events); returns without
   * closing the consumer, so main ends the process with it open (its connections drop, as a
   * killed consumer's). Closing it would not end a retry test: PushConsumer.close first waits
   * for its in-flight long-polling receives (up to the request timeout plus the server's
   * long-polling timeout, PushConsumerImpl.waitingReceiveRequestFinished) with its listener
   * still running, so a failed message due again meanwhile (the group's retry backoff) is
   * received and consumed by the closing consumer.
   */
  private int pushFail() throws Exception {
    int expect = num("count", 1);
    AtomicInteger failed = new AtomicInteger();
    PushConsumer consumer = PROVIDER.newPushConsumerBuilder()
        .setClientConfiguration(config)
        .setConsumerGroup(opt("group", "g"))
        .setSubscriptionExpressions(Collections.singletonMap(opt("topic", "t"), filter()))
        .setMessageListener(view -> {
          emitView("consumed", view, "FAILURE");
          failed.incrementAndGet();
          return ConsumeResult.FAILURE;
        })
        .build();
    long deadline = System.currentTimeMillis() + 1000L * num("deadline-s", 60);
    while (failed.get() < expect && System.currentTimeMillis() < deadline) {
      Thread.sleep(100); // polling a counter with a deadline
    }
    // Lingering, not waiting for something: later deliveries within it show up, and the nack
    // (ChangeInvisibleDuration, sent as the listener returns) goes out meanwhile; one still in
    // flight at the end is lost, and the message is then due once the server sees the consumer
    // gone (its clear time), with the same next attempt.
    Thread.sleep((long) (1000 * Double.parseDouble(opt("linger-s", "0"))));
    emit("done", "received", failed.get());
    return failed.get() >= expect ? 0 : 3;
  }

  private int transaction() throws Exception {
    Map<String, Integer> checks = new ConcurrentHashMap<>();
    Producer producer = producer(view -> {
      String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
      checks.merge(body, 1, Integer::sum);
      emit("checked", "message_id", view.getMessageId().toString(), "body", body);
      return body.equals("unknown") ? TransactionResolution.COMMIT : TransactionResolution.UNKNOWN;
    });
    String[] bodies = {"commit", "rollback", "unknown"};
    for (int i = 0; i < bodies.length; i++) {
      Transaction tx = producer.beginTransaction();
      SendReceipt r = producer.send(message(i, bodies[i]), tx);
      emit("sent", "i", i, "message_id", r.getMessageId().toString(), "body", bodies[i]);
      if (bodies[i].equals("commit")) {
        tx.commit();
      } else if (bodies[i].equals("rollback")) {
        tx.rollback();
      }
    }
    opts.put("expect", "2");
    int code = consume();
    producer.close();
    return code;
  }

  private int recall() throws Exception {
    Producer producer = producer(null);
    opts.put("count", "2");
    List<SendReceipt> sent = produce(producer);
    String handle = sent.get(0).getRecallHandle();
    producer.recallMessage(opt("topic", "t"), handle);
    emit("recalled", "message_id", sent.get(0).getMessageId().toString());
    opts.put("expect", "1");
    int code = consume();
    producer.close();
    return code;
  }

  /**
   * type.method(arg) on target by reflection: the API this source uses only where the client
   * version has it (5.2.0's priority and lite topics). Throws UnsupportedOperationException when
   * the version lacks the method, and what the method threw (a ClientException) as itself.
   */
  private static Object call(Class<?> type, Object target, String method, Class<?> argType,
      Object arg) throws Exception {
    java.lang.reflect.Method m;
    try {
      m = argType == null ? type.getMethod(method) : type.getMethod(method, argType);
    } catch (NoSuchMethodException e) {
      throw new UnsupportedOperationException(
          type.getSimpleName() + "." + method + " is not in this rocketmq-client-java version");
    }
    try {
      return argType == null ? m.invoke(target) : m.invoke(target, arg);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      throw cause instanceof Exception ? (Exception) cause : e;
    }
  }

  /** The interface `name` of the client's API package, or UnsupportedOperationException. */
  private static Class<?> api(String name) {
    try {
      return Class.forName("org.apache.rocketmq.client.apis." + name);
    } catch (ClassNotFoundException e) {
      throw new UnsupportedOperationException(
          name + " is not in this rocketmq-client-java version");
    }
  }

  /**
   * A LitePushConsumer (5.2.0) bound to --topic, subscribed to --lite-topic, then `count`
   * messages sent to that lite topic and consumed. Each step that the access point refuses ends
   * the run with its `error` event; `step` events say how far it got.
   */
  private int litePush() throws Exception {
    int expect = num("count", 1);
    AtomicInteger consumed = new AtomicInteger();
    MessageListener listener = view -> {
      emitView("consumed", view, "SUCCESS");
      consumed.incrementAndGet();
      return ConsumeResult.SUCCESS;
    };
    Class<?> builderType = api("consumer.LitePushConsumerBuilder");
    Object builder = call(ClientServiceProvider.class, PROVIDER, "newLitePushConsumerBuilder",
        null, null);
    call(builderType, builder, "setClientConfiguration", ClientConfiguration.class, config);
    call(builderType, builder, "setConsumerGroup", String.class, opt("group", "g"));
    call(builderType, builder, "bindTopic", String.class, opt("topic", "t"));
    call(builderType, builder, "setMessageListener", MessageListener.class, listener);
    Object consumer = call(builderType, builder, "build", null, null);
    emit("step", "step", "built");
    Class<?> consumerType = api("consumer.LitePushConsumer");
    call(consumerType, consumer, "subscribeLite", String.class, opt("lite-topic", "lt"));
    emit("step", "step", "subscribed");
    produce(null);
    long deadline = System.currentTimeMillis() + 1000L * num("deadline-s", 60);
    while (consumed.get() < expect && System.currentTimeMillis() < deadline) {
      Thread.sleep(100); // polling a counter with a deadline
    }
    ((java.io.Closeable) consumer).close();
    emit("done", "received", consumed.get());
    return consumed.get() >= expect ? 0 : 3;
  }

  private void emitView(String event, MessageView view, String result) {
    String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
    emit(event, "message_id", view.getMessageId().toString(), "body", body,
        "tag", view.getTag().orElse(""), "keys", new ArrayList<>(view.getKeys()),
        "group", view.getMessageGroup().orElse(""), "attempt", view.getDeliveryAttempt(),
        "n", view.getProperties().getOrDefault("n", ""), "at_ms", System.currentTimeMillis(),
        "due_ms", view.getDeliveryTimestamp().orElse(0L), "result", result,
        "priority", priorityOf(view));
  }

  /** 5.2.0's MessageView.getPriority() (the priority system property), null when the message
   * has none or the client version has no such method (5.0.8). */
  private static Integer priorityOf(MessageView view) {
    try {
      Object got = MessageView.class.getMethod("getPriority").invoke(view);
      return ((java.util.Optional<?>) got).map(p -> (Integer) p).orElse(null);
    } catch (NoSuchMethodException e) {
      return null;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }

  private void emit(String event, Object... kv) {
    print(run, event, kv);
  }

  /** One event line: {"event": event, "run": run (when not null), kv...}. */
  private static synchronized void print(String run, String event, Object... kv) {
    StringBuilder s = new StringBuilder("{\"event\":").append(json(event));
    if (run != null) {
      s.append(",\"run\":").append(json(run));
    }
    for (int i = 0; i + 1 < kv.length; i += 2) {
      if (kv[i + 1] != null) {
        s.append(',').append(json(kv[i])).append(':').append(json(kv[i + 1]));
      }
    }
    System.out.println(s.append('}'));
    System.out.flush();
  }

  private static String json(Object v) {
    if (v instanceof Number || v instanceof Boolean) {
      return v.toString();
    }
    if (v instanceof List) {
      List<String> parts = new ArrayList<>();
      for (Object o : (List<?>) v) {
        parts.add(json(o));
      }
      return "[" + String.join(",", parts) + "]";
    }
    StringBuilder s = new StringBuilder("\"");
    for (char c : String.valueOf(v).toCharArray()) {
      if (c == '"' || c == '\\') {
        s.append('\\').append(c);
      } else if (c < 0x20) {
        s.append(String.format("\\u%04x", (int) c));
      } else {
        s.append(c);
      }
    }
    return s.append('"').toString();
  }
}
