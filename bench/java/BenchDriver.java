// The benchmark driver around the official classic Java client (org.apache.rocketmq:rocketmq-client,
// the Remoting one, version pinned in pom.xml), unmodified: `python -m bench.compare --rows java`
// runs it against Ariane's name server and RocketMQ's. It prints one JSON event per line on
// stdout, as the official Python client's driver does (ariane/benchmark/official_client_driver.py):
//   {"event": "ready"}  the client started (and, for produce, the topic's route is known)
//   {"event": "done", "messages": n, "seconds": s, "errors": e, "latencies_us": [..]}
// then waits for its stdin to close before it shuts the client down. Every loop is bounded by
// --deadline-s; exit 0 done, 3 the deadline passed first, 2 a client error.
//
// Scenarios (all take --namesrv HOST:PORT --topic T --deadline-s S):
//   produce --count N --threads K --batch M --body-bytes B [--warmup W] [--wait-go]
//       one DefaultMQProducer shared by K threads; each thread sends its share of N messages with
//       synchronous send(), M messages per call (M > 1: send(Collection), one batch per call).
//       W messages are sent the same way before "ready" (untimed: the client JVM's JIT, the
//       channels). The clock runs from "go" (or "ready") to the last thread's end; latencies_us
//       holds one entry per call; a call that throws or answers other than SEND_OK is an error.
//   push --group G --count N --threads K
//       a DefaultMQPushConsumer (CLUSTERING, CONSUME_FROM_FIRST_OFFSET, K consumption threads);
//       the clock runs from the first listener call to the one that brings the count to N, and
//       "messages" is N - 1 (the messages that arrived inside that span), as the Python driver's.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public final class BenchDriver {
  // The client's whole-send budget and its call timeout; the 3 s defaults are too tight on the
  // shared 2-core machine while a JVM is cold.
  private static final int CALL_TIMEOUT_MS = 15_000;

  private static final class Args {
    final Map<String, String> values = new HashMap<>();

    Args(String[] argv) {
      for (int i = 1; i < argv.length; i++) {
        String key = argv[i].replaceFirst("^--", "");
        boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--");
        values.put(key, flag ? "true" : argv[++i]);
      }
    }

    String get(String name, String fallback) {
      return values.getOrDefault(name, fallback);
    }

    int integer(String name, int fallback) {
      return Integer.parseInt(get(name, String.valueOf(fallback)));
    }
  }

  /** What the threads of one run counted, merged at the end. */
  private static final class Tally {
    long messages;
    long errors;
    long[] latenciesUs = new long[1024];
    int calls;

    void call(long latencyUs, int sent, boolean ok) {
      if (calls == latenciesUs.length) latenciesUs = Arrays.copyOf(latenciesUs, calls * 2);
      latenciesUs[calls++] = latencyUs;
      if (ok) messages += sent;
      else errors++;
    }

    synchronized void merge(Tally other) {
      for (int i = 0; i < other.calls; i++) call(other.latenciesUs[i], 0, true);
      messages += other.messages;
      errors += other.errors;
    }
  }

  private static void done(long messages, double seconds, long errors, Tally latencies) {
    StringBuilder out = new StringBuilder(64 + 8 * (latencies == null ? 0 : latencies.calls));
    out.append("{\"event\":\"done\",\"messages\":").append(messages);
    out.append(",\"seconds\":").append(seconds);
    out.append(",\"errors\":").append(errors).append(",\"latencies_us\":[");
    for (int i = 0; latencies != null && i < latencies.calls; i++) {
      if (i > 0) out.append(',');
      out.append(latencies.latenciesUs[i]);
    }
    System.out.println(out.append("]}"));
    System.out.flush();
  }

  private static void ready() {
    System.out.println("{\"event\":\"ready\"}");
    System.out.flush();
  }

  private static void error(Exception e) {
    String text = String.valueOf(e).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ");
    System.out.println("{\"event\":\"error\",\"message\":\"" + text + "\"}");
    System.out.flush();
  }

  /** Blocks until the parent closes our stdin (or writes a line, for "go"). */
  private static void readLine() throws Exception {
    int c;
    do {
      c = System.in.read();
    } while (c != -1 && c != '\n');
  }

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(args.integer("deadline-s", 200));
    int code;
    try {
      switch (argv[0]) {
        case "produce": code = produce(args, deadline); break;
        case "push": code = push(args, deadline); break;
        default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
      }
    } catch (Exception e) {
      error(e);
      e.printStackTrace();
      code = 2;
    }
    System.exit(code);
  }

  private static List<Message> messages(String topic, byte[] body, int count) {
    List<Message> batch = new ArrayList<>(count);
    for (int i = 0; i < count; i++) batch.add(new Message(topic, "bench", body));
    return batch;
  }

  /** Sends {@code count} messages, {@code batch} per synchronous call, until the deadline. */
  private static Tally sendShare(
      DefaultMQProducer producer, String topic, byte[] body, int count, int batch, long deadline) {
    Tally tally = new Tally();
    for (int left = count; left > 0 && System.nanoTime() < deadline; left -= batch) {
      List<Message> call = messages(topic, body, Math.min(batch, left));
      long start = System.nanoTime();
      boolean ok;
      try {
        SendResult r = call.size() == 1 ? producer.send(call.get(0)) : producer.send(call);
        ok = r.getSendStatus() == SendStatus.SEND_OK;
      } catch (Exception e) {
        ok = false;
      }
      tally.call((System.nanoTime() - start) / 1000, call.size(), ok);
    }
    return tally;
  }

  /** Runs {@code threads} threads sharing {@code count} messages; returns the merged tally. */
  private static Tally sendOnThreads(
      DefaultMQProducer producer, Args args, int count, long deadline) throws Exception {
    int threads = args.integer("threads", 1);
    int batch = args.integer("batch", 1);
    String topic = args.get("topic", "");
    byte[] body = new byte[args.integer("body-bytes", 1024)];
    Arrays.fill(body, (byte) 'x');
    Tally total = new Tally();
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int share = count / threads + (t < count % threads ? 1 : 0);
      Thread worker = new Thread(() -> total.merge(sendShare(producer, topic, body, share, batch, deadline)));
      workers.add(worker);
      worker.start();
    }
    for (Thread worker : workers) worker.join();
    return total;
  }

  private static int produce(Args args, long deadline) throws Exception {
    DefaultMQProducer producer = new DefaultMQProducer("bench-producer");
    producer.setNamesrvAddr(args.get("namesrv", ""));
    producer.setInstanceName("bench-" + System.nanoTime());
    producer.setSendMsgTimeout(CALL_TIMEOUT_MS);
    producer.setMqClientApiTimeout(CALL_TIMEOUT_MS);
    producer.start();
    try {
      producer.fetchPublishMessageQueues(args.get("topic", ""));  // the route, before the clock
      int warmup = args.integer("warmup", 0);
      if (warmup > 0) sendOnThreads(producer, args, warmup, deadline);
      ready();
      if (args.values.containsKey("wait-go")) readLine();
      long start = System.nanoTime();
      Tally tally = sendOnThreads(producer, args, args.integer("count", 1), deadline);
      double seconds = (System.nanoTime() - start) / 1e9;
      done(tally.messages, seconds, tally.errors, tally);
      readLine();
      return System.nanoTime() < deadline ? 0 : 3;
    } finally {
      producer.shutdown();
    }
  }

  private static int push(Args args, long deadline) throws Exception {
    int count = args.integer("count", 1);
    int threads = args.integer("threads", 8);
    AtomicInteger received = new AtomicInteger();
    AtomicLong first = new AtomicLong();
    AtomicLong last = new AtomicLong();
    CountDownLatch finished = new CountDownLatch(1);
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group", "bench-push"));
    consumer.setNamesrvAddr(args.get("namesrv", ""));
    consumer.setInstanceName("bench-push-" + System.nanoTime());
    consumer.setMqClientApiTimeout(CALL_TIMEOUT_MS);
    consumer.setMessageModel(MessageModel.CLUSTERING);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.setConsumeThreadMin(threads);
    consumer.setConsumeThreadMax(threads);
    consumer.subscribe(args.get("topic", ""), "*");
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      long now = System.nanoTime();
      first.compareAndSet(0, now);
      int before = received.getAndAdd(msgs.size());
      if (before < count && before + msgs.size() >= count) {
        last.set(now);
        finished.countDown();
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    try {
      ready();
      boolean all = finished.await(Math.max(deadline - System.nanoTime(), 0), TimeUnit.NANOSECONDS);
      long end = all ? last.get() : System.nanoTime();
      int got = Math.min(received.get(), count);
      double seconds = got > 0 ? Math.max((end - first.get()) / 1e9, 1e-9) : 0.0;
      done(Math.max(got - 1, 0), seconds, 0, null);
      readLine();
      return all ? 0 : 3;
    } finally {
      consumer.shutdown();
    }
  }
}
