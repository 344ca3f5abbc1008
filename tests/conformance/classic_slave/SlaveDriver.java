// A small driver around the official classic Java client (org.apache.rocketmq:rocketmq-client 5.3.3,
// the Remoting one, unmodified; dependencies: ../classic_java/pom.xml) for the slave-read test. It
// prints one JSON event per line on stdout; every wait is bounded by --deadline-s.
// Exit codes: 0 done, 3 the deadline passed first, 2 a client error.
//
// Scenarios (all take --namesrv HOST:PORT):
//   send  --topic T --count N              N sync sends; one "sent" event each (status, ids)
//   push  --topic T --group G --count N    a CLUSTERING push consumer from the first offset; one
//                                          "received" event per message, then "done"
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class SlaveDriver {
  private static final int CALL_TIMEOUT_MS = 10_000;

  private static synchronized void emit(String kind, String... pairs) {
    StringBuilder b = new StringBuilder("{\"event\":\"").append(kind).append('"');
    for (int i = 0; i + 1 < pairs.length; i += 2) {
      b.append(",\"").append(pairs[i]).append("\":\"").append(pairs[i + 1].replace("\"", "'")).append('"');
    }
    System.out.println(b.append('}'));
    System.out.flush();
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    for (int i = 1; i + 1 < argv.length; i += 2) args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    long deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args.getOrDefault("deadline-s", "90"));
    int code;
    try {
      switch (argv[0]) {
        case "send": code = send(args); break;
        case "push": code = push(args, deadline); break;
        default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
      }
    } catch (Exception e) {
      emit("error", "message", String.valueOf(e));
      e.printStackTrace();
      code = 2;
    }
    System.exit(code);
  }

  private static int send(Map<String, String> args) throws Exception {
    DefaultMQProducer producer = new DefaultMQProducer("slave-read-producer");
    producer.setNamesrvAddr(args.get("namesrv"));
    producer.setInstanceName("send-" + System.nanoTime());
    producer.setSendMsgTimeout(CALL_TIMEOUT_MS);
    producer.start();
    try {
      int count = Integer.parseInt(args.getOrDefault("count", "1"));
      for (int i = 0; i < count; i++) {
        Message m = new Message(args.get("topic"), "TagA", "k-" + i, ("m-" + i).getBytes(StandardCharsets.UTF_8));
        SendResult r = producer.send(m);
        emit("sent", "message_id", r.getMsgId(), "status", r.getSendStatus().name());
      }
      return 0;
    } finally {
      producer.shutdown();
    }
  }

  private static int push(Map<String, String> args, long deadline) throws Exception {
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
    consumer.setNamesrvAddr(args.get("namesrv"));
    consumer.setInstanceName("push-" + System.nanoTime());
    consumer.setMqClientApiTimeout(CALL_TIMEOUT_MS);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    String topic = args.get("topic");
    consumer.subscribe(topic, "*");
    int count = Integer.parseInt(args.getOrDefault("count", "1"));
    Set<String> seen = ConcurrentHashMap.newKeySet();
    CountDownLatch done = new CountDownLatch(1);
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      for (MessageExt m : msgs) {
        if (!m.getTopic().equals(topic)) continue;
        emit("received", "message_id", m.getMsgId(), "body", new String(m.getBody(), StandardCharsets.UTF_8));
        if (seen.add(m.getMsgId()) && seen.size() >= count) done.countDown();
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    try {
      boolean ok = done.await(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      emit("done", "received", String.valueOf(seen.size()));
      return ok ? 0 : 3;
    } finally {
      consumer.shutdown();
    }
  }
}
