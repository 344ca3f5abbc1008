// Command goclassic drives the official classic Go client (github.com/apache/rocketmq-client-go/v2,
// unmodified, pinned in go.mod to the pseudo-version of its unreleased master, the first with
// TLS; it speaks the Remoting protocol) through one conformance scenario
// against an Ariane name server and prints one JSON object per line: the events the Python tests
// parse. build.sh compiles it into the Ariane cache; nothing here is Ariane's.
//
// Usage: goclassic SCENARIO --endpoints H:P (the name server) --topic T [flags]. Scenarios:
//
//   - send: send `count` messages ("<prefix>-<i>", tag TagA, key k-<i>, property color=red) with
//     --mode sync|async|oneway|batch; --orders K sends message i of order i%K ("o<order>-<step>")
//     to queue order%queues through a QueueSelector; --delay-level L sets a delay level. Events:
//     `sent` (i, body, message_id, offset_msg_id, queue_id, queue_offset), then `done`.
//   - push: a push consumer (--model CLUSTERING|BROADCASTING, --orderly, --fail to answer
//     ConsumeRetryLater with --retry-delay-level, --max-reconsume N) prints `started`, one
//     `allocated` per rebalance result and one `received` per delivery, until `count`
//     deliveries (0: until stdin closes), then `done`.
//   - transaction: sends m-0 (commit), m-1 (rollback), m-2 (unknown, committed by the check-back);
//     prints `sent` per message and `checked` per check-back, until stdin closes.
//
// --access-key AK --secret-key SK make every scenario's client sign its Remoting requests as that
// user (WithCredentials, the client's AccessKey/Signature ext fields).
//
// --tls makes every scenario's client dial the name server and the brokers over TLS
// (producer/consumer.WithTls(true), apache/rocketmq-client-go#951). The client does not verify
// the server (tls.Config{InsecureSkipVerify: true}, internal/remote/tcp_conn.go) and presents no
// client certificate, so a run proves the wire, not verification. WithTls writes the client's
// package-global remote.DefaultRemotingClientConfig (every client's options point at it), so it
// switches TLS for every client of the process: one scenario per process keeps that harmless.
//
// Every scenario ends at --deadline-s (exit 3). Exit codes: 0 done, 3 deadline, 2 a client error.
// The client's own log (logrus) goes to stderr, which the test keeps in a file.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// onewaySettle is how long a oneway sender waits before it shuts its producer down.
const onewaySettle = time.Second

type options struct {
	namesrv, topic, group, mode, model, prefix, instance                string
	accessKey, secretKey                                                string
	count, orders, delayLevel, retryDelayLevel, maxReconsume, deadlineS int
	orderly, fail, tls                                                  bool
}

var (
	opts  options
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func emit(event string, kv ...any) {
	m := map[string]any{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(m)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goclassic:", err)
	emit("error", "message", err.Error())
	os.Exit(2)
}

func parse() string {
	fs := flag.NewFlagSet("goclassic", flag.ExitOnError)
	fs.StringVar(&opts.namesrv, "endpoints", "127.0.0.1:9876", "name server (Remoting)")
	fs.StringVar(&opts.topic, "topic", "t", "topic")
	fs.StringVar(&opts.group, "group", "g", "producer or consumer group")
	fs.StringVar(&opts.mode, "mode", "sync", "sync | async | oneway | batch")
	fs.StringVar(&opts.model, "model", "CLUSTERING", "CLUSTERING | BROADCASTING")
	fs.StringVar(&opts.prefix, "prefix", "m", "body prefix")
	fs.StringVar(&opts.instance, "instance", "", "client instance name (default: per process)")
	fs.IntVar(&opts.count, "count", 1, "messages to send, or deliveries to wait for (0: until stdin closes)")
	fs.IntVar(&opts.orders, "orders", 0, "orders sent through the queue selector; 0 = none")
	fs.IntVar(&opts.delayLevel, "delay-level", 0, "delay level of sent messages; 0 = none")
	fs.IntVar(&opts.retryDelayLevel, "retry-delay-level", 0, "DelayLevelWhenNextConsume with --fail")
	fs.IntVar(&opts.maxReconsume, "max-reconsume", -1, "MaxReconsumeTimes (-1: the client's 16)")
	fs.IntVar(&opts.deadlineS, "deadline-s", 60, "give up after this long")
	fs.BoolVar(&opts.orderly, "orderly", false, "consume orderly (locks the queues)")
	fs.BoolVar(&opts.fail, "fail", false, "answer every delivery with ConsumeRetryLater")
	fs.StringVar(&opts.accessKey, "access-key", "", "ACL user the client signs as (none: unsigned)")
	fs.StringVar(&opts.secretKey, "secret-key", "", "the user's secret")
	fs.BoolVar(&opts.tls, "tls", false, "dial over TLS (WithTls; the server is not verified)")
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: goclassic SCENARIO [flags]"))
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err)
	}
	if opts.instance == "" {
		opts.instance = strconv.Itoa(os.Getpid())
	}
	return os.Args[1]
}

func resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{opts.namesrv})
}

// credentials are --access-key/--secret-key; empty (the client then signs nothing) without them.
func credentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: opts.accessKey, SecretKey: opts.secretKey}
}

// deadline exits with code 3 after --deadline-s.
func deadline() {
	time.AfterFunc(time.Duration(opts.deadlineS)*time.Second, func() {
		emit("deadline")
		os.Exit(3)
	})
}

// stdinClosed is closed when the test closes the driver's stdin.
func stdinClosed() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0)
		close(done)
	}()
	return done
}

// orderSelector sends order n to queue n % len(queues) (the order travels in property ORDER).
type orderSelector struct{}

func (orderSelector) Select(
	msg *primitive.Message, queues []*primitive.MessageQueue, _ string,
) *primitive.MessageQueue {
	order, _ := strconv.Atoi(msg.GetProperty("ORDER"))
	return queues[order%len(queues)]
}

func message(i int) *primitive.Message {
	body := fmt.Sprintf("%s-%d", opts.prefix, i)
	msg := primitive.NewMessage(opts.topic, nil)
	if opts.orders > 0 {
		order := i % opts.orders
		body = fmt.Sprintf("o%d-%d", order, i/opts.orders)
		msg.WithProperty("ORDER", strconv.Itoa(order))
	}
	msg.Body = []byte(body)
	msg.WithTag("TagA")
	msg.WithKeys([]string{fmt.Sprintf("k-%d", i)})
	msg.WithProperty("color", "red")
	if opts.delayLevel > 0 {
		msg.WithDelayTimeLevel(opts.delayLevel)
	}
	return msg
}

func sentEvent(i int, msg *primitive.Message, res *primitive.SendResult, offsetMsgID string, n int) {
	kv := []any{"i", i, "body", string(msg.Body), "at_ms", time.Now().UnixMilli()}
	if res != nil {
		kv = append(kv, "message_id", res.MsgID, "offset_msg_id", offsetMsgID,
			"queue_id", res.MessageQueue.QueueId, "queue_offset", res.QueueOffset+int64(n))
	} else {
		kv = append(kv, "message_id", msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
	}
	emit("sent", kv...)
}

func runSend() {
	popts := []producer.Option{
		producer.WithNsResolver(resolver()), producer.WithGroupName(opts.group),
		producer.WithInstanceName(opts.instance), producer.WithRetry(2),
		producer.WithCredentials(credentials()), producer.WithTls(opts.tls),
	}
	if opts.orders > 0 {
		popts = append(popts, producer.WithQueueSelector(orderSelector{}))
	}
	p, err := rocketmq.NewProducer(popts...)
	if err != nil {
		fail(err)
	}
	if err := p.Start(); err != nil {
		fail(err)
	}
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()
	msgs := make([]*primitive.Message, opts.count)
	for i := range msgs {
		msgs[i] = message(i)
	}
	switch opts.mode {
	case "batch":
		res, err := p.SendSync(ctx, msgs...)
		if err != nil {
			fail(err)
		}
		ids := strings.Split(res.OffsetMsgID, ",")
		if len(ids) != len(msgs) {
			fail(fmt.Errorf("batch of %d answered with %d offset ids: %v", len(msgs), len(ids), res))
		}
		for i, msg := range msgs {
			sentEvent(i, msg, res, ids[i], i)
		}
	case "async":
		var wg sync.WaitGroup
		for i, msg := range msgs {
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					fail(err)
				}
				sentEvent(i, msg, res, res.OffsetMsgID, 0)
			}, msg)
			if err != nil {
				fail(err)
			}
		}
		wg.Wait()
	case "oneway":
		for i, msg := range msgs {
			if err := p.SendOneWay(ctx, msg); err != nil {
				fail(err)
			}
			sentEvent(i, msg, nil, "", 0)
		}
		// This client sends "oneway" requests without the oneway flag, so the broker answers
		// them (RocketMQ's broker does too). An answer that reaches a socket closed by Shutdown
		// makes the kernel abort the connection and drop the bytes it had not sent yet (the
		// tail of the last message): let the answers arrive and be read before shutting down.
		time.Sleep(onewaySettle)
	default:
		for i, msg := range msgs {
			res, err := p.SendSync(ctx, msg)
			if err != nil {
				fail(err)
			}
			if res.Status != primitive.SendOK {
				fail(fmt.Errorf("send %d: status %d", i, res.Status))
			}
			sentEvent(i, msg, res, res.OffsetMsgID, 0)
		}
	}
	emit("done", "sent", len(msgs))
}

func receivedEvent(msg *primitive.MessageExt, mq primitive.MessageQueue) {
	emit("received",
		"message_id", msg.MsgId, "offset_msg_id", msg.OffsetMsgId, "body", string(msg.Body),
		"tag", msg.GetTags(), "keys", msg.GetKeys(), "color", msg.GetProperty("color"),
		"topic", msg.Topic, "queue_topic", mq.Topic, "queue_id", mq.QueueId,
		"queue_offset", msg.QueueOffset, "reconsume_times", msg.ReconsumeTimes,
		"retry_topic", msg.GetProperty(primitive.PropertyRetryTopic),
		"born_ms", msg.BornTimestamp, "store_ms", msg.StoreTimestamp,
		"at_ms", time.Now().UnixMilli(), "instance", opts.instance)
}

// allocate is the client's default strategy (AllocateByAveragely); it prints each result as an
// `allocated` event (topic, the group's client ids, this client's queue ids), so a test can
// wait for a rebalance to settle.
func allocate(group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
	mine := consumer.AllocateByAveragely(group, cid, mqAll, cidAll)
	queues := make([]int, 0, len(mine))
	for _, mq := range mine {
		queues = append(queues, mq.QueueId)
	}
	topic := ""
	if len(mqAll) > 0 {
		topic = mqAll[0].Topic
	}
	emit("allocated", "topic", topic, "clients", len(cidAll), "queues", queues,
		"instance", opts.instance)
	return mine
}

func runPush() {
	model := consumer.Clustering
	if opts.model == "BROADCASTING" {
		model = consumer.BroadCasting
	}
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver()), consumer.WithGroupName(opts.group),
		consumer.WithInstance(opts.instance), consumer.WithConsumerModel(model),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumerOrder(opts.orderly),
		consumer.WithMaxReconsumeTimes(int32(opts.maxReconsume)),
		consumer.WithStrategy(allocate), consumer.WithCredentials(credentials()),
		consumer.WithTls(opts.tls),
	)
	if err != nil {
		fail(err)
	}
	var got atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	listener := func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		var mq primitive.MessageQueue
		if octx, ok := primitive.GetOrderlyCtx(ctx); ok {
			mq = octx.MQ
		} else if cctx, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			mq = cctx.MQ
			cctx.DelayLevelWhenNextConsume = opts.retryDelayLevel
		}
		for _, msg := range msgs {
			receivedEvent(msg, mq)
			if opts.count > 0 && got.Add(1) >= int64(opts.count) {
				once.Do(func() { close(enough) })
			}
		}
		if opts.fail {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}
	if err := c.Subscribe(opts.topic, consumer.MessageSelector{}, listener); err != nil {
		fail(err)
	}
	if err := c.Start(); err != nil {
		fail(err)
	}
	emit("started", "instance", opts.instance)
	select {
	case <-enough:
	case <-stdinClosed():
	}
	if err := c.Shutdown(); err != nil {
		fail(err)
	}
	emit("done", "received", got.Load())
}

// txListener commits m-0, rolls back m-1 and leaves m-2 unknown until its check-back commits it.
type txListener struct{}

func (txListener) state(body string) primitive.LocalTransactionState {
	switch body {
	case "m-0":
		return primitive.CommitMessageState
	case "m-1":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState // UnknowState in v2.1.2: the constant was renamed on master
}

func (l txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	return l.state(string(msg.Body))
}

func (txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	emit("checked", "body", string(msg.Body), "message_id", msg.MsgId,
		"transaction_id", msg.TransactionId, "at_ms", time.Now().UnixMilli())
	if string(msg.Body) == "m-1" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func runTransaction() {
	p, err := rocketmq.NewTransactionProducer(txListener{},
		producer.WithNsResolver(resolver()), producer.WithGroupName(opts.group),
		producer.WithInstanceName(opts.instance), producer.WithRetry(2),
		producer.WithCredentials(credentials()), producer.WithTls(opts.tls))
	if err != nil {
		fail(err)
	}
	if err := p.Start(); err != nil {
		fail(err)
	}
	for i := range 3 {
		msg := primitive.NewMessage(opts.topic, []byte(fmt.Sprintf("m-%d", i)))
		msg.WithTag("TagA")
		res, err := p.SendMessageInTransaction(context.Background(), msg)
		if err != nil {
			fail(err)
		}
		emit("sent", "i", i, "body", string(msg.Body), "message_id", res.MsgID,
			"offset_msg_id", res.OffsetMsgID, "state", int(res.State))
	}
	<-stdinClosed()
	_ = p.Shutdown()
	emit("done")
}

func main() {
	scenario := parse()
	deadline()
	switch scenario {
	case "send":
		runSend()
	case "push":
		runPush()
	case "transaction":
		runTransaction()
	default:
		fail(fmt.Errorf("unknown scenario %q", scenario))
	}
}
