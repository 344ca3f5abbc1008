// Drives the official Java client (rocketmq-client-java, unmodified) through one conformance
// scenario against an Ariane access point and prints one JSON object per line (the events the
// Python tests parse). Compiled by fetch.sh against the jars it fetched; nothing here is Ariane's.
//
// Usage: java -cp <jars>:<classes> Driver SCENARIO --endpoints H:P --topic T [--group G]
//        [--count N] [--mode sync|async] [--groups G] [--tags A,B] [--expr E]
//        [--expr-type TAG|SQL92] [--expect N] [--linger-s S] [--deadline-s S] [--delay-ms D]
//        [--access-key AK --secret-key SK] [--tls true|false]
// Scenarios: send-consume, push-redelivery, transaction, recall (see tests/conformance/polyglot.py).
// With --access-key, every client signs with StaticSessionCredentialsProvider(AK, SK) (ACL 2.0).
// --tls true turns the client's enableSsl on (default here: plaintext); the client then trusts
// any server certificate (its InsecureTrustManagerFactory), so TLS is proved by the wire only.
// Exit codes: 0 done, 3 the deadline passed before `expect` messages arrived, 2 a client error
// (its `error` event names the client's exception class in `type`; a refusal of the access
// point, UnauthorizedException or ForbiddenException, also ends a receive loop with it).

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
  private final Map<String, String> opts = new HashMap<>();
  private final ClientConfiguration config;

  private Driver(String[] args) {
    for (int i = 1; i + 1 < args.length; i += 2) {
      opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
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

  public static void main(String[] args) {
    int code;
    try {
      code = new Driver(args).run(args[0]);
    } catch (Throwable e) {
      e.printStackTrace();
      Throwable cause = clientException(e);
      emit("error", "message", String.valueOf(cause), "type", cause.getClass().getSimpleName());
      code = 2;
    }
    System.out.flush();
    // The client's executor threads are not daemons; end the process with the scenario's code.
    Runtime.getRuntime().halt(code);
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

  private Message message(int i, String body) {
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
    return b.build();
  }

  private List<SendReceipt> produce(Producer given) throws Exception {
    Producer producer = given != null ? given : producer(null);
    List<SendReceipt> receipts = new ArrayList<>();
    int count = num("count", 1);
    boolean async = opt("mode", "sync").equals("async");
    List<CompletableFuture<SendReceipt>> pending = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Message m = message(i, "m-" + i);
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
          "async", async);
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
        batch = consumer.receive(16, Duration.ofSeconds(30));
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

  private static void emitView(String event, MessageView view, String result) {
    String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
    emit(event, "message_id", view.getMessageId().toString(), "body", body,
        "tag", view.getTag().orElse(""), "keys", new ArrayList<>(view.getKeys()),
        "group", view.getMessageGroup().orElse(""), "attempt", view.getDeliveryAttempt(),
        "n", view.getProperties().getOrDefault("n", ""), "at_ms", System.currentTimeMillis(),
        "due_ms", view.getDeliveryTimestamp().orElse(0L), "result", result);
  }

  private static synchronized void emit(String event, Object... kv) {
    StringBuilder s = new StringBuilder("{\"event\":").append(json(event));
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
