// A command-line driver around the official classic Java client (org.apache.rocketmq:rocketmq-client
// 5.3.3, the Remoting one), unmodified. It prints one JSON event per line on stdout; every loop is
// bounded by --deadline-s. Exit codes: 0 done, 3 the deadline passed first, 2 a client error.
//
// Scenarios (all take --namesrv HOST:PORT):
//   send        --topic T --count N --mode sync|async|oneway|batch|selector [--tag X] [--delay-level L]
//               [--queue Q] (selector: every message to queue Q through a MessageQueueSelector)
//   push        --topic T --group G --count N [--model CLUSTERING|BROADCASTING] [--instance I]
//   lite        --topic T --group G --count N [--assign-queue Q --seek O]
//   transaction --topic T --group G   (message 0 commits, 1 rolls back, 2 answers UNKNOW and is
//               committed by the check-back)
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public final class ClassicDriver {
  private static final Object PRINT = new Object();
  // The client's whole-send budget and its name-server/broker call timeout; their 3 s defaults
  // are too tight when the shared 2-core test machine is busy and the JVM is cold.
  private static final int SEND_TIMEOUT_MS = 15_000;

  private static void emit(Map<String, Object> event) {
    StringBuilder out = new StringBuilder("{");
    boolean first = true;
    for (Map.Entry<String, Object> e : event.entrySet()) {
      if (!first) out.append(',');
      first = false;
      out.append(quote(e.getKey())).append(':');
      Object v = e.getValue();
      if (v == null) out.append("null");
      else if (v instanceof Number || v instanceof Boolean) out.append(v);
      else if (v instanceof List) {
        out.append('[');
        List<?> items = (List<?>) v;
        for (int i = 0; i < items.size(); i++) {
          if (i > 0) out.append(',');
          out.append(quote(String.valueOf(items.get(i))));
        }
        out.append(']');
      } else out.append(quote(String.valueOf(v)));
    }
    synchronized (PRINT) {
      System.out.println(out.append('}'));
      System.out.flush();
    }
  }

  private static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  private static Map<String, Object> event(String name) {
    Map<String, Object> e = new java.util.LinkedHashMap<>();
    e.put("event", name);
    return e;
  }

  private static Map<String, Object> received(MessageExt m, String how) {
    Map<String, Object> e = event("received");
    e.put("how", how);
    e.put("message_id", m.getMsgId());
    e.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
    e.put("tag", m.getTags());
    e.put("keys", m.getKeys());
    e.put("topic", m.getTopic());
    e.put("queue_id", m.getQueueId());
    e.put("queue_offset", m.getQueueOffset());
    e.put("reconsume_times", m.getReconsumeTimes());
    e.put("born_ms", m.getBornTimestamp());
    e.put("store_ms", m.getStoreTimestamp());
    e.put("at_ms", System.currentTimeMillis());
    e.put("color", m.getUserProperty("color"));
    return e;
  }

  private static final class Args {
    final Map<String, String> values = new HashMap<>();

    Args(String[] argv) {
      for (int i = 1; i + 1 < argv.length; i += 2) values.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    }

    String get(String name, String fallback) {
      return values.getOrDefault(name, fallback);
    }

    int integer(String name, int fallback) {
      return Integer.parseInt(get(name, String.valueOf(fallback)));
    }
  }

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    long deadline = System.currentTimeMillis() + 1000L * args.integer("deadline-s", 90);
    int code;
    try {
      switch (argv[0]) {
        case "send": code = send(args); break;
        case "push": code = push(args, deadline); break;
        case "lite": code = lite(args, deadline); break;
        case "transaction": code = transaction(args, deadline); break;
        default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
      }
    } catch (Exception e) {
      Map<String, Object> err = event("error");
      err.put("message", String.valueOf(e));
      emit(err);
      e.printStackTrace();
      code = 2;
    }
    System.exit(code);
  }

  private static Message message(Args args, int i) {
    Message m = new Message(args.get("topic", ""), args.get("tag", "TagA"), "k-" + i,
        ("m-" + i).getBytes(StandardCharsets.UTF_8));
    m.putUserProperty("color", "red");
    int level = args.integer("delay-level", 0);
    if (level > 0) m.setDelayTimeLevel(level);
    return m;
  }

  private static void sent(int i, SendResult r) {
    Map<String, Object> e = event("sent");
    e.put("i", i);
    e.put("message_id", r.getMsgId());
    e.put("offset_msg_id", r.getOffsetMsgId());
    e.put("queue_id", r.getMessageQueue().getQueueId());
    e.put("queue_offset", r.getQueueOffset());
    e.put("status", r.getSendStatus().name());
    e.put("at_ms", System.currentTimeMillis());
    emit(e);
  }

  private static int send(Args args) throws Exception {
    DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "classic-producer"));
    producer.setNamesrvAddr(args.get("namesrv", ""));
    producer.setInstanceName("send-" + System.nanoTime());
    producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
    producer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    producer.start();
    try {
      int count = args.integer("count", 1);
      String mode = args.get("mode", "sync");
      if (mode.equals("batch")) {
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < count; i++) batch.add(message(args, i));
        SendResult r = producer.send(batch);
        String[] ids = r.getMsgId().split(",");
        for (int i = 0; i < ids.length; i++) {
          Map<String, Object> e = event("sent");
          e.put("i", i);
          e.put("message_id", ids[i]);
          e.put("queue_id", r.getMessageQueue().getQueueId());
          e.put("status", r.getSendStatus().name());
          emit(e);
        }
        return 0;
      }
      CountDownLatch done = new CountDownLatch(count);
      for (int i = 0; i < count; i++) {
        Message m = message(args, i);
        final int n = i;
        switch (mode) {
          case "sync": sent(i, producer.send(m)); done.countDown(); break;
          case "selector":
            int queue = args.integer("queue", 0);
            sent(i, producer.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg), queue));
            done.countDown();
            break;
          case "oneway":
            producer.sendOneway(m);
            Map<String, Object> e = event("sent");
            e.put("i", i);
            e.put("message_id", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
            emit(e);
            done.countDown();
            break;
          case "async":
            producer.send(m, new SendCallback() {
              public void onSuccess(SendResult r) { sent(n, r); done.countDown(); }
              public void onException(Throwable t) {
                Map<String, Object> err = event("error");
                err.put("message", String.valueOf(t));
                emit(err);
                done.countDown();
              }
            });
            break;
          default: throw new IllegalArgumentException("unknown mode " + mode);
        }
      }
      return done.await(60, TimeUnit.SECONDS) ? 0 : 3;
    } finally {
      producer.shutdown();
    }
  }

  private static int push(Args args, long deadline) throws Exception {
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group", "classic-push"));
    consumer.setNamesrvAddr(args.get("namesrv", ""));
    consumer.setInstanceName(args.get("instance", "push-" + System.nanoTime()));
    consumer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    consumer.setMessageModel(MessageModel.valueOf(args.get("model", "CLUSTERING")));
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(args.get("topic", ""), args.get("filter", "*"));
    int count = args.integer("count", 1);
    Set<String> seen = ConcurrentHashMap.newKeySet();
    CountDownLatch done = new CountDownLatch(1);
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      for (MessageExt m : msgs) {
        emit(received(m, "push"));
        if (m.getTopic().equals(args.get("topic", "")) && seen.add(m.getMsgId()) && seen.size() >= count) {
          done.countDown();
        }
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    try {
      boolean ok = done.await(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      Map<String, Object> e = event("done");
      e.put("received", seen.size());
      emit(e);
      return ok ? 0 : 3;
    } finally {
      consumer.shutdown();
    }
  }

  private static int lite(Args args, long deadline) throws Exception {
    DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.get("group", "classic-lite"));
    consumer.setNamesrvAddr(args.get("namesrv", ""));
    consumer.setInstanceName("lite-" + System.nanoTime());
    consumer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    String topic = args.get("topic", "");
    String assign = args.get("assign-queue", "");
    if (assign.isEmpty()) {
      consumer.subscribe(topic, "*");
      consumer.start();
    } else {
      consumer.start();
      Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
      MessageQueue target = null;
      for (MessageQueue q : queues) if (q.getQueueId() == Integer.parseInt(assign)) target = q;
      List<MessageQueue> one = new ArrayList<>();
      one.add(target);
      consumer.assign(one);
      consumer.seek(target, Long.parseLong(args.get("seek", "0")));
    }
    int count = args.integer("count", 1);
    Set<String> seen = new java.util.HashSet<>();
    try {
      while (seen.size() < count && System.currentTimeMillis() < deadline) {
        for (MessageExt m : consumer.poll(1000)) {
          emit(received(m, "lite"));
          seen.add(m.getMsgId());
        }
      }
      Map<String, Object> e = event("done");
      e.put("received", seen.size());
      emit(e);
      return seen.size() >= count ? 0 : 3;
    } finally {
      consumer.shutdown();
    }
  }

  private static int transaction(Args args, long deadline) throws Exception {
    TransactionMQProducer producer = new TransactionMQProducer(args.get("group", "classic-tx"));
    producer.setNamesrvAddr(args.get("namesrv", ""));
    producer.setInstanceName("tx-" + System.nanoTime());
    producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
    producer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    CountDownLatch checked = new CountDownLatch(1);
    producer.setTransactionListener(new TransactionListener() {
      public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
        int i = (Integer) arg;
        return i == 0 ? LocalTransactionState.COMMIT_MESSAGE
            : i == 1 ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
      }

      public LocalTransactionState checkLocalTransaction(MessageExt msg) {
        Map<String, Object> e = event("checked");
        e.put("message_id", msg.getMsgId());
        e.put("body", new String(msg.getBody(), StandardCharsets.UTF_8));
        emit(e);
        checked.countDown();
        return LocalTransactionState.COMMIT_MESSAGE;
      }
    });
    producer.start();
    try {
      for (int i = 0; i < 3; i++) sent(i, producer.sendMessageInTransaction(message(args, i), i));
      boolean ok = checked.await(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      Thread.sleep(500);  // let the check's END_TRANSACTION (oneway) leave before shutdown
      return ok ? 0 : 3;
    } finally {
      producer.shutdown();
    }
  }
}
