// The one command-line driver around the official classic Java client (org.apache.rocketmq:
// rocketmq-client 5.3.3, the Remoting one) and mqadmin's library (rocketmq-tools 5.3.3), both
// unmodified (pom.xml; fetched and compiled with ClassicAdmin.java by ../java/fetch.sh, run by
// ../classic_java_client.py). It prints one JSON event per line on stdout; every loop is bounded by
// --deadline-s. Exit codes: 0 done, 3 the deadline passed first, 2 a client error.
// The admin scenarios route, cluster, topics, kv and consume are ClassicAdmin's (its header; exit
// code 4 there: the server answered an error code).
//
// Scenarios (all take --namesrv HOST:PORT):
//   send        --topic T --count N --mode sync|async|oneway|batch|selector [--tag X] [--delay-level L]
//               [--queue Q] (selector: every message to queue Q through a MessageQueueSelector)
//   push        --topic T --group G --count N [--model CLUSTERING|BROADCASTING] [--instance I]
//   lite        --topic T --group G --count N [--assign-queue Q --seek O [--seek-after M]]
//               (--seek-after: read M messages first, then seek to O and read N more, printed as
//               received with how "lite-seeked"; a seek before the first pull races the pull that
//               assign() has already started from the group's offset)
//   transaction --topic T --group G   (message 0 commits, 1 rolls back, 2 answers UNKNOW and is
//               committed by the check-back)
//   orderly-send --topic T --orders K --count N [--interval-ms X]  (message i is step i / K of
//               order i % K, body o<order>-<step>, sent through a MessageQueueSelector by order id)
//   orderly     --topic T --group G --instance I  (a MessageListenerOrderly push consumer)
//   consumers   --topic T --groups G1:S1,G2:S2.. --instance I [--index i --members m]
//               [--broker-name B]  (one CLUSTERING push consumer per group, S its rebalance
//               strategy: AVG, CIRCLE, HASH or CONFIG (queues q with q % m == i on broker B);
//               every allocation is printed as an "allocated" event)
//   later       --topic T --group G --max-reconsume N  (every delivery answers RECONSUME_LATER)
//   fault-send  --topic T --count N [--interval-ms X]  (sync sends with sendLatencyFaultEnable;
//               a failed send is printed as "failed" and the run goes on)
//   client-ip   --count N  (builds ClientConfigs, the base of every producer, consumer and
//               admin, each resolving the client's IP as the client does (NetworkUtil), N of them
//               or as many as the deadline allows; prints one "client-ip" event with how many
//               and the addresses seen; talks to no server)
// orderly, consumers and later run until their stdin closes (or the deadline passes).
// Every scenario's producers and push consumers sign their requests when given
// --access-key AK --secret-key SK (RocketMQ's AclClientRPCHook over SessionCredentials).
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
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByConfig;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
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
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public final class ClassicDriver {
  private static final Object PRINT = new Object();
  // The client's whole-send budget and its name-server/broker call timeout; their 3 s defaults
  // are too tight when the shared 2-core test machine is busy and the JVM is cold. 15 s on an
  // idle machine; the launcher passes a longer one as -Ddriver.timeoutMs on a loaded one.
  private static final int SEND_TIMEOUT_MS = Integer.getInteger("driver.timeoutMs", 15_000);

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
    e.put("origin_id", m.getProperty(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID));
    e.put("retry_topic", m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC));
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
    if (argv.length > 0 && ClassicAdmin.has(argv[0])) {
      ClassicAdmin.main(argv);  // ends the process with the scenario's exit code
      return;
    }
    Args args = new Args(argv);
    long deadline = System.currentTimeMillis() + 1000L * args.integer("deadline-s", 90);
    int code;
    try {
      switch (argv[0]) {
        case "send": code = send(args); break;
        case "push": code = push(args, deadline); break;
        case "lite": code = lite(args, deadline); break;
        case "transaction": code = transaction(args, deadline); break;
        case "orderly-send": code = orderlySend(args); break;
        case "orderly": code = orderly(args, deadline); break;
        case "consumers": code = consumers(args, deadline); break;
        case "later": code = later(args, deadline); break;
        case "fault-send": code = faultSend(args); break;
        case "client-ip": code = clientIp(args, deadline); break;
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
    e.put("broker", r.getMessageQueue().getBrokerName());
    e.put("queue_id", r.getMessageQueue().getQueueId());
    e.put("queue_offset", r.getQueueOffset());
    e.put("status", r.getSendStatus().name());
    e.put("at_ms", System.currentTimeMillis());
    emit(e);
  }

  private static int send(Args args) throws Exception {
    DefaultMQProducer producer = producer(args, "send-");
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
    DefaultMQPushConsumer consumer = consumer(args, args.get("group", "classic-push"));
    consumer.setMessageModel(MessageModel.valueOf(args.get("model", "CLUSTERING")));
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
      int before = args.integer("seek-after", 0);
      Set<String> first = new java.util.HashSet<>();
      while (first.size() < before && System.currentTimeMillis() < deadline) {
        for (MessageExt m : consumer.poll(1000)) {
          emit(received(m, "lite"));
          first.add(m.getMsgId());
        }
      }
      consumer.seek(target, Long.parseLong(args.get("seek", "0")));
    }
    String how = args.get("seek-after", "").isEmpty() ? "lite" : "lite-seeked";
    int count = args.integer("count", 1);
    Set<String> seen = new java.util.HashSet<>();
    try {
      while (seen.size() < count && System.currentTimeMillis() < deadline) {
        for (MessageExt m : consumer.poll(1000)) {
          emit(received(m, how));
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

  // The signing hook of --access-key/--secret-key, or null (unsigned requests).
  private static RPCHook rpcHook(Args args) {
    String ak = args.get("access-key", "");
    if (ak.isEmpty()) return null;
    return new AclClientRPCHook(new SessionCredentials(ak, args.get("secret-key", "")));
  }

  private static DefaultMQProducer producer(Args args, String prefix) {
    DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "classic-producer"), rpcHook(args));
    producer.setNamesrvAddr(args.get("namesrv", ""));
    producer.setInstanceName(prefix + System.nanoTime());
    producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
    producer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    return producer;
  }

  private static DefaultMQPushConsumer consumer(Args args, String group) {
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, rpcHook(args));
    consumer.setNamesrvAddr(args.get("namesrv", ""));
    consumer.setInstanceName(args.get("instance", "push-" + System.nanoTime()));
    consumer.setMqClientApiTimeout(SEND_TIMEOUT_MS);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    return consumer;
  }

  // Blocks until stdin closes (the test's way to ask for a clean shutdown) or the deadline.
  private static void awaitStdinClosed(long deadline) throws InterruptedException {
    CountDownLatch closed = new CountDownLatch(1);
    Thread reader = new Thread(() -> {
      try {
        while (System.in.read() >= 0) { }
      } catch (java.io.IOException e) {
        // a broken stdin counts as closed
      }
      closed.countDown();
    });
    reader.setDaemon(true);
    reader.start();
    closed.await(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
  }

  // Every ClientConfig resolves the client's IP (NetworkUtil.getLocalAddress), probing each
  // network interface the JVM lists; a failed probe ends in a NullPointerException here.
  private static int clientIp(Args args, long deadline) {
    Set<String> seen = new java.util.TreeSet<>();
    int built = 0;
    while (built < args.integer("count", 1) && System.currentTimeMillis() < deadline) {
      seen.add(new org.apache.rocketmq.client.ClientConfig().getClientIP());
      built++;
    }
    Map<String, Object> e = event("client-ip");
    e.put("built", built);
    e.put("addresses", new ArrayList<>(seen));
    emit(e);
    return 0;
  }

  private static void started(String clientId) {
    Map<String, Object> e = event("started");
    e.put("client_id", clientId);
    emit(e);
  }

  private static int orderlySend(Args args) throws Exception {
    DefaultMQProducer producer = producer(args, "orderly-send-");
    producer.start();
    try {
      int orders = args.integer("orders", 1);
      int interval = args.integer("interval-ms", 0);
      for (int i = 0; i < args.integer("count", 1); i++) {
        int order = i % orders;
        Message m = new Message(args.get("topic", ""), "TagA", "o" + order,
            ("o" + order + "-" + (i / orders)).getBytes(StandardCharsets.UTF_8));
        sent(i, producer.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), order));
        if (interval > 0) Thread.sleep(interval);  // pacing the workload, not synchronisation
      }
      return 0;
    } finally {
      producer.shutdown();
    }
  }

  private static int orderly(Args args, long deadline) throws Exception {
    DefaultMQPushConsumer consumer = consumer(args, args.get("group", "classic-orderly"));
    consumer.subscribe(args.get("topic", ""), "*");
    String instance = args.get("instance", "");
    consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
      for (MessageExt m : msgs) emit(received(m, "orderly", "instance", instance));
      return ConsumeOrderlyStatus.SUCCESS;
    });
    return serve(List.of(consumer), deadline);
  }

  private static Map<String, Object> received(MessageExt m, String how, String key, String value) {
    Map<String, Object> e = received(m, how);
    e.put(key, value);
    return e;
  }

  // Starts the consumers, runs them until stdin closes (or the deadline), shuts them down.
  private static int serve(List<DefaultMQPushConsumer> consumers, long deadline) throws Exception {
    List<DefaultMQPushConsumer> started = new ArrayList<>();
    try {
      for (DefaultMQPushConsumer consumer : consumers) {
        consumer.start();
        started.add(consumer);
      }
      started(consumers.get(0).buildMQClientId());
      awaitStdinClosed(deadline);
      return 0;
    } finally {
      for (DefaultMQPushConsumer consumer : started) consumer.shutdown();
    }
  }

  // A strategy that prints every allocation it makes, so the test sees when a group settled.
  private static AllocateMessageQueueStrategy reporting(String group, AllocateMessageQueueStrategy s) {
    return new AllocateMessageQueueStrategy() {
      public List<MessageQueue> allocate(String cg, String cid, List<MessageQueue> all, List<String> cids) {
        List<MessageQueue> mine = s.allocate(cg, cid, all, cids);
        Map<String, Object> e = event("allocated");
        e.put("group", group);
        e.put("topic", all.isEmpty() ? "" : all.get(0).getTopic());
        e.put("cids", cids.size());
        List<String> queues = new ArrayList<>();
        for (MessageQueue q : mine) queues.add(q.getBrokerName() + "/" + q.getQueueId());
        e.put("queues", queues);
        emit(e);
        return mine;
      }

      public String getName() {
        return s.getName();
      }
    };
  }

  private static AllocateMessageQueueStrategy strategy(Args args, String name) {
    switch (name) {
      case "AVG": return new AllocateMessageQueueAveragely();
      case "CIRCLE": return new AllocateMessageQueueAveragelyByCircle();
      case "HASH": return new AllocateMessageQueueConsistentHash();
      case "CONFIG":
        AllocateMessageQueueByConfig byConfig = new AllocateMessageQueueByConfig();
        List<MessageQueue> queues = new ArrayList<>();
        int members = args.integer("members", 1);
        for (int q = args.integer("index", 0); q < args.integer("queues", 4); q += members) {
          queues.add(new MessageQueue(args.get("topic", ""), args.get("broker-name", "broker-a"), q));
        }
        byConfig.setMessageQueueList(queues);
        return byConfig;
      default: throw new IllegalArgumentException("unknown strategy " + name);
    }
  }

  private static int consumers(Args args, long deadline) throws Exception {
    List<DefaultMQPushConsumer> consumers = new ArrayList<>();
    for (String spec : args.get("groups", "").split(",")) {
      String group = spec.split(":")[0];
      DefaultMQPushConsumer consumer = consumer(args, group);
      consumer.setAllocateMessageQueueStrategy(reporting(group, strategy(args, spec.split(":")[1])));
      consumer.subscribe(args.get("topic", ""), "*");
      consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
        for (MessageExt m : msgs) emit(received(m, "push", "group", group));
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
      });
      consumers.add(consumer);
    }
    return serve(consumers, deadline);
  }

  private static int later(Args args, long deadline) throws Exception {
    DefaultMQPushConsumer consumer = consumer(args, args.get("group", "classic-later"));
    consumer.setMaxReconsumeTimes(args.integer("max-reconsume", 2));
    consumer.subscribe(args.get("topic", ""), "*");
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      for (MessageExt m : msgs) emit(received(m, "later"));
      return ConsumeConcurrentlyStatus.RECONSUME_LATER;
    });
    return serve(List.of(consumer), deadline);
  }

  private static int faultSend(Args args) throws Exception {
    DefaultMQProducer producer = producer(args, "fault-send-");
    producer.setSendLatencyFaultEnable(true);
    producer.start();
    try {
      int interval = args.integer("interval-ms", 0);
      for (int i = 0; i < args.integer("count", 1); i++) {
        try {
          SendResult r = producer.send(message(args, i));
          sent(i, r);
        } catch (Exception err) {
          Map<String, Object> e = event("failed");
          e.put("i", i);
          e.put("message", String.valueOf(err));
          emit(e);
        }
        if (interval > 0) Thread.sleep(interval);  // pacing the workload, not synchronisation
      }
      emit(event("done"));
      return 0;
    } finally {
      producer.shutdown();
    }
  }
}
