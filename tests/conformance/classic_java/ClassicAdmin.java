// The admin half of ClassicDriver (which dispatches these scenarios here): mqadmin's library
// (rocketmq-tools 5.3.3, unmodified, DefaultMQAdminExt) and the official classic client's
// DefaultMQPushConsumer run one scenario against a name server and print one JSON object per line
// for the Python tests. Compiled with ClassicDriver.java by ../java/fetch.sh; nothing here is
// Ariane's.
//
// Usage: java -cp <jars>:<classes> ClassicDriver SCENARIO --namesrv H:P [--topic T] [--key K]
//        [--namespace N] [--value V] [--group G] [--count N] [--timeout-ms MS]
// Scenarios (add new ones to SCENARIOS and to ClassicDriver's dispatch; each returns the exit code):
//   route    DefaultMQAdminExt.examineTopicRouteInfo(topic)     -> {"event":"route",...}
//   cluster  DefaultMQAdminExt.examineBrokerClusterInfo()       -> {"event":"cluster",...}
//   topics   DefaultMQAdminExt.fetchAllTopicList()              -> {"event":"topics",...}
//   kv       create/get/list/delete a KV config entry            -> {"event":"kv",...}
//   consume  a DefaultMQPushConsumer (--group, --topic) consumes --count messages from the
//            first offset, then shuts down (committing its offsets) -> {"event":"consumed",...}
//   topic-stats  DefaultMQAdminExt.examineTopicStats(--broker, --topic): one broker's
//            TopicStatsTable as the library parses it -> {"event":"topic-stats",...}
// Exit codes: 0 done, 3 fewer messages than --count arrived in time, 4 the server answered an error code (printed as {"event":"error","code"}),
// 2 any other failure.

import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

final class ClassicAdmin {
  /** One scenario: runs against the driver's options and returns the process exit code. */
  interface Scenario {
    int run(ClassicAdmin driver) throws Exception;
  }

  private static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

  static {
    SCENARIOS.put("route", ClassicAdmin::route);
    SCENARIOS.put("cluster", ClassicAdmin::cluster);
    SCENARIOS.put("topics", ClassicAdmin::topics);
    SCENARIOS.put("kv", ClassicAdmin::kv);
    SCENARIOS.put("consume", ClassicAdmin::consume);
    SCENARIOS.put("topic-stats", ClassicAdmin::topicStats);
  }

  private final Map<String, String> opts = new HashMap<>();
  private DefaultMQAdminExt admin;

  private ClassicAdmin(String[] args) {
    for (int i = 1; i + 1 < args.length; i += 2) {
      opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
  }

  /** Whether ClassicDriver should hand {@code scenario} to {@link #main}. */
  static boolean has(String scenario) {
    return SCENARIOS.containsKey(scenario);
  }

  static void main(String[] args) {
    int code;
    ClassicAdmin driver = new ClassicAdmin(args);
    try {
      Scenario scenario = SCENARIOS.get(args[0]);
      if (scenario == null) {
        throw new IllegalArgumentException("unknown scenario " + args[0] + "; have " + SCENARIOS.keySet());
      }
      code = scenario.run(driver);
    } catch (MQClientException e) {
      emit("error", "code", e.getResponseCode(), "message", String.valueOf(e.getErrorMessage()));
      code = 4;
    } catch (MQBrokerException e) {
      emit("error", "code", e.getResponseCode(), "message", String.valueOf(e.getErrorMessage()));
      code = 4;
    } catch (Throwable e) {
      e.printStackTrace();
      emit("error", "code", -1, "message", String.valueOf(e));
      code = 2;
    } finally {
      if (driver.admin != null) {
        driver.admin.shutdown();
      }
    }
    System.out.flush();
    // The client's executor threads are not daemons; end the process with the scenario's code.
    Runtime.getRuntime().halt(code);
  }

  String opt(String name, String fallback) {
    return opts.getOrDefault(name, fallback);
  }

  String required(String name) {
    String value = opts.get(name);
    if (value == null) {
      throw new IllegalArgumentException("--" + name + " is required");
    }
    return value;
  }

  /** A started DefaultMQAdminExt on --namesrv (what mqadmin builds for each command). */
  DefaultMQAdminExt admin() throws MQClientException {
    if (admin == null) {
      admin = new DefaultMQAdminExt(Long.parseLong(opt("timeout-ms", "5000")));
      admin.setNamesrvAddr(required("namesrv"));
      admin.setInstanceName("classic-driver-" + ProcessHandle.current().pid());
      admin.start();
    }
    return admin;
  }

  /** Print {"event": event, k1: v1, ...} as one JSON line. */
  static void emit(String event, Object... keyValues) {
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("event", event);
    for (int i = 0; i + 1 < keyValues.length; i += 2) {
      line.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
    }
    System.out.println(JSON.toJSONString(line));
    System.out.flush();
  }

  static Map<String, Object> brokerView(BrokerData data) {
    Map<String, Object> view = new LinkedHashMap<>();
    view.put("brokerName", data.getBrokerName());
    view.put("cluster", data.getCluster());
    Map<String, String> addrs = new TreeMap<>();
    data.getBrokerAddrs().forEach((id, addr) -> addrs.put(String.valueOf(id), addr));
    view.put("brokerAddrs", addrs);
    view.put("selectedAddr", data.selectBrokerAddr());
    return view;
  }

  static int route(ClassicAdmin d) throws Exception {
    TopicRouteData route = d.admin().examineTopicRouteInfo(d.required("topic"));
    List<Object> brokers = new ArrayList<>();
    for (BrokerData data : route.getBrokerDatas()) {
      brokers.add(brokerView(data));
    }
    List<Object> queues = new ArrayList<>();
    for (QueueData q : route.getQueueDatas()) {
      Map<String, Object> view = new LinkedHashMap<>();
      view.put("brokerName", q.getBrokerName());
      view.put("readQueueNums", q.getReadQueueNums());
      view.put("writeQueueNums", q.getWriteQueueNums());
      view.put("perm", q.getPerm());
      queues.add(view);
    }
    emit("route", "brokerDatas", brokers, "queueDatas", queues);
    return 0;
  }

  static int cluster(ClassicAdmin d) throws Exception {
    ClusterInfo info = d.admin().examineBrokerClusterInfo();
    Map<String, Object> brokers = new TreeMap<>();
    info.getBrokerAddrTable().forEach((name, data) -> brokers.put(name, brokerView(data)));
    Map<String, Object> clusters = new TreeMap<>();
    info.getClusterAddrTable().forEach((name, names) -> clusters.put(name, new ArrayList<>(names)));
    emit("cluster", "brokerAddrTable", brokers, "clusterAddrTable", clusters);
    return 0;
  }

  static int topics(ClassicAdmin d) throws Exception {
    List<String> topics = new ArrayList<>(d.admin().fetchAllTopicList().getTopicList());
    topics.sort(null);
    emit("topics", "topicList", topics);
    return 0;
  }

  /** One broker's GET_TOPIC_STATS_INFO: mqadmin topicStatus merges only the offset tables of
   *  the brokers (its "Topic Put TPS" is always 0.0), so the broker's rate is read here. */
  static int topicStats(ClassicAdmin d) throws Exception {
    TopicStatsTable table = d.admin().examineTopicStats(d.required("broker"), d.required("topic"));
    emit("topic-stats", "topicPutTps", table.getTopicPutTps(), "queues", table.getOffsetTable().size());
    return 0;
  }

  static int kv(ClassicAdmin d) throws Exception {
    String namespace = d.opt("namespace", "ORDER_TOPIC_CONFIG");
    String key = d.required("key");
    DefaultMQAdminExt admin = d.admin();
    admin.createAndUpdateKvConfig(namespace, key, d.required("value"));
    String got = admin.getKVConfig(namespace, key);
    KVTable table = admin.getKVListByNamespace(namespace);
    admin.deleteKvConfig(namespace, key);
    String missing;
    try {
      missing = admin.getKVConfig(namespace, key);
    } catch (MQClientException e) {
      missing = "error " + e.getResponseCode();
    }
    emit("kv", "value", got, "table", table.getTable(), "afterDelete", missing);
    return 0;
  }

  static int consume(ClassicAdmin d) throws Exception {
    int count = Integer.parseInt(d.opt("count", "1"));
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(d.required("group"));
    consumer.setNamesrvAddr(d.required("namesrv"));
    consumer.setInstanceName("classic-driver-" + ProcessHandle.current().pid());
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(d.required("topic"), "*");
    List<String> bodies = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch latch = new CountDownLatch(count);
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      for (MessageExt msg : msgs) {
        bodies.add(new String(msg.getBody(), java.nio.charset.StandardCharsets.UTF_8));
        latch.countDown();
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    long deadline = System.currentTimeMillis() + Long.parseLong(d.opt("timeout-ms", "60000"));
    boolean done = latch.await(deadline - System.currentTimeMillis(), TimeUnit.MILLISECONDS);
    // The listener counts down before the client records the consumed offset: poll the
    // client's offset table (with the same deadline) so that shutdown commits them all.
    while (done && consumedOffsets(consumer, d.required("topic")) < count) {
      if (System.currentTimeMillis() > deadline) {
        done = false;
      }
      Thread.sleep(20); // polling the client's table, bounded by the deadline
    }
    consumer.shutdown(); // persists the consumed offsets to the broker, then unregisters
    emit("consumed", "bodies", new ArrayList<>(bodies));
    return done ? 0 : 3;
  }

  /** The sum of the consumer's in-memory offsets on the topic's queues (new group: consumed). */
  static long consumedOffsets(DefaultMQPushConsumer consumer, String topic) throws MQClientException {
    long sum = 0;
    for (MessageQueue mq : consumer.fetchSubscribeMessageQueues(topic)) {
      long offset = consumer.getDefaultMQPushConsumerImpl().getOffsetStore()
          .readOffset(mq, ReadOffsetType.READ_FROM_MEMORY);
      sum += Math.max(0, offset);
    }
    return sum;
  }
}
