// Command godriver drives the official Go client (github.com/apache/rocketmq-clients/golang/v5,
// unmodified, pinned in go.mod) through one conformance scenario against an Ariane access point
// and prints one JSON object per line (the events the Python tests parse). build.sh compiles it
// into the Ariane cache; nothing here is Ariane's.
//
// Usage: godriver SCENARIO --endpoints H:P --topic T [--group G] [--count N] [--mode sync|async]
// [--groups G] [--tags A,B] [--expr E] [--expr-type TAG|SQL92] [--expect N] [--linger-s S]
// [--deadline-s S] [--delay-ms D] [--access-key AK --secret-key SK] [--tls]. Scenarios: send-consume, push-redelivery, transaction (the Go
// client has no recall API), push-watch (a PushConsumer that prints what it consumes until its
// stdin closes, then stops gracefully). With --access-key the client signs as that user
// (Config.Credentials, ACL 2.0). --tls sets the client's EnableSsl (default here: plaintext; the
// client then skips verifying the server, InsecureSkipVerify). Exit codes: 0 done, 3 the deadline passed before `expect`
// messages arrived (push-watch: before stdin closed), 2 a client error: its `error` event
// carries the gRPC status `code` when the access point answered one (a refusal, 40100 or
// 40300, also ends a receive loop).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

type options struct {
	endpoints, topic, group, mode, tags, expr, exprType string
	accessKey, secretKey                                string
	tls                                                 bool
	count, groups, expect, lingerS, deadlineS, delayMs  int
}

var (
	opts   options
	outMu  sync.Mutex
	stdout = json.NewEncoder(os.Stdout)
)

func emit(event string, kv ...any) {
	m := map[string]any{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	outMu.Lock()
	defer outMu.Unlock()
	_ = stdout.Encode(m)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	if status, ok := rmq.AsErrRpcStatus(err); ok {
		emit("error", "message", err.Error(), "code", status.GetCode())
	} else {
		emit("error", "message", err.Error())
	}
	os.Exit(2)
}

// refused: the access point refused the credentials (40100) or the request (40300).
func refused(err error) bool {
	status, ok := rmq.AsErrRpcStatus(err)
	return ok && (status.GetCode() == int32(v2.Code_UNAUTHORIZED) ||
		status.GetCode() == int32(v2.Code_FORBIDDEN))
}

func parse() string {
	fs := flag.NewFlagSet("godriver", flag.ExitOnError)
	fs.StringVar(&opts.endpoints, "endpoints", "127.0.0.1:9876", "access point")
	fs.StringVar(&opts.topic, "topic", "t", "topic")
	fs.StringVar(&opts.group, "group", "g", "consumer group")
	fs.StringVar(&opts.mode, "mode", "sync", "sync | async send")
	fs.StringVar(&opts.tags, "tags", "TagA", "tags, round-robin over the messages")
	fs.StringVar(&opts.expr, "expr", "*", "filter expression")
	fs.StringVar(&opts.exprType, "expr-type", "TAG", "TAG | SQL92")
	fs.IntVar(&opts.count, "count", 1, "messages to send")
	fs.IntVar(&opts.groups, "groups", 0, "message groups (FIFO); 0 = none")
	fs.IntVar(&opts.expect, "expect", -1, "messages to receive (default: count)")
	fs.IntVar(&opts.lingerS, "linger-s", 0, "keep receiving this long after expect")
	fs.IntVar(&opts.deadlineS, "deadline-s", 60, "give up after this long")
	fs.IntVar(&opts.delayMs, "delay-ms", 0, "delivery delay; 0 = none")
	fs.StringVar(&opts.accessKey, "access-key", "", "ACL 2.0 user (none: unsigned)")
	fs.StringVar(&opts.secretKey, "secret-key", "", "the user's secret")
	fs.BoolVar(&opts.tls, "tls", false, "TLS to the access point (rmq.EnableSsl)")
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: godriver SCENARIO [flags]"))
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err)
	}
	if opts.expect < 0 {
		opts.expect = opts.count
	}
	return os.Args[1]
}

func config() *rmq.Config {
	return &rmq.Config{
		Endpoint:      opts.endpoints,
		ConsumerGroup: opts.group,
		Credentials: &credentials.SessionCredentials{
			AccessKey: opts.accessKey, AccessSecret: opts.secretKey,
		},
	}
}

func newProducer(checker *rmq.TransactionChecker) rmq.Producer {
	options := []rmq.ProducerOption{rmq.WithTopics(opts.topic)}
	if checker != nil {
		options = append(options, rmq.WithTransactionChecker(checker))
	}
	p, err := rmq.NewProducer(config(), options...)
	if err != nil {
		fail(err)
	}
	start(p)
	return p
}

// start starts a client within --deadline-s. Start (v5.1.3) waits without bound for the
// broker's settings over Telemetry, and a broker that refuses the credentials (40100) or the
// group (40300) answers that stream with a status only, which the client logs ("failed to send
// heartbeat, code=UNAUTHORIZED") and retries forever: past the deadline the driver fails.
func start(client interface{ Start() error }) {
	started := make(chan error, 1)
	go func() { started <- client.Start() }()
	select {
	case err := <-started:
		if err != nil {
			fail(err)
		}
	case <-time.After(time.Duration(opts.deadlineS) * time.Second):
		fail(fmt.Errorf("start: no settings from the broker within %d s", opts.deadlineS))
	}
}

func message(i int, body string) *rmq.Message {
	tags := strings.Split(opts.tags, ",")
	m := &rmq.Message{Topic: opts.topic, Body: []byte(body)}
	m.SetTag(tags[i%len(tags)])
	m.SetKeys("k-" + strconv.Itoa(i))
	m.AddProperty("n", strconv.Itoa(i))
	if opts.groups > 0 {
		m.SetMessageGroup("g" + strconv.Itoa(i%opts.groups))
	}
	if opts.delayMs > 0 {
		m.SetDelayTimestamp(time.Now().Add(time.Duration(opts.delayMs) * time.Millisecond))
	}
	return m
}

func produce() {
	p := newProducer(nil)
	defer p.GracefulStop()
	var wg sync.WaitGroup
	for i := 0; i < opts.count; i++ {
		m := message(i, "m-"+strconv.Itoa(i))
		if opts.mode == "async" {
			wg.Add(1)
			i := i
			p.SendAsync(context.TODO(), m, func(_ context.Context, r []*rmq.SendReceipt, err error) {
				defer wg.Done()
				if err != nil {
					fail(err)
				}
				emit("sent", "i", i, "message_id", r[0].MessageID, "async", true)
			})
			continue
		}
		r, err := p.Send(context.TODO(), m)
		if err != nil {
			fail(err)
		}
		emit("sent", "i", i, "message_id", r[0].MessageID, "async", false)
	}
	wg.Wait()
}

func filter() *rmq.FilterExpression {
	kind := rmq.TAG
	if opts.exprType == "SQL92" {
		kind = rmq.SQL92
	}
	return rmq.NewFilterExpressionWithType(opts.expr, kind)
}

func emitView(event string, mv *rmq.MessageView, result string) {
	tag, group := "", ""
	if mv.GetTag() != nil {
		tag = *mv.GetTag()
	}
	if mv.GetMessageGroup() != nil {
		group = *mv.GetMessageGroup()
	}
	var dueMs int64
	if ts := mv.GetDeliveryTimestamp(); ts != nil {
		dueMs = ts.UnixMilli()
	}
	kv := []any{"message_id", mv.GetMessageId(), "body", string(mv.GetBody()), "tag", tag,
		"keys", mv.GetKeys(), "group", group, "attempt", mv.GetDeliveryAttempt(),
		"n", mv.GetProperties()["n"], "at_ms", time.Now().UnixMilli(), "due_ms", dueMs,
		"receipt_handle", mv.GetReceiptHandle()}
	if result != "" {
		kv = append(kv, "result", result)
	}
	emit(event, kv...)
}

func consume() int {
	c, err := rmq.NewSimpleConsumer(config(),
		rmq.WithSimpleAwaitDuration(3*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{opts.topic: filter()}),
	)
	if err != nil {
		fail(err)
	}
	start(c)
	defer c.GracefulStop()
	deadline := time.Now().Add(time.Duration(opts.deadlineS) * time.Second)
	lingerUntil := time.Time{}
	received := 0
	for time.Now().Before(deadline) && (lingerUntil.IsZero() || time.Now().Before(lingerUntil)) {
		batch, err := c.Receive(context.TODO(), 16, 30*time.Second)
		if err != nil && refused(err) {
			fail(err)
		} else if err != nil {
			// MESSAGE_NOT_FOUND after a long poll with nothing to deliver is an error in Go.
			fmt.Fprintln(os.Stderr, "receive:", err)
		}
		for _, mv := range batch {
			emitView("received", mv, "")
			if err := c.Ack(context.TODO(), mv); err != nil {
				fail(err)
			}
			received++
		}
		if received >= opts.expect && lingerUntil.IsZero() {
			lingerUntil = time.Now().Add(time.Duration(opts.lingerS) * time.Second)
		}
	}
	emit("done", "received", received)
	if received >= opts.expect {
		return 0
	}
	return 3
}

func pushRedelivery() int {
	var succeeded atomic.Int64
	listener := &rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
		if mv.GetDeliveryAttempt() == 1 {
			emitView("consumed", mv, "FAILURE")
			return rmq.FAILURE
		}
		emitView("consumed", mv, "SUCCESS")
		succeeded.Add(1)
		return rmq.SUCCESS
	}}
	c, err := rmq.NewPushConsumer(config(),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{opts.topic: filter()}),
		rmq.WithPushMessageListener(listener),
	)
	if err != nil {
		fail(err)
	}
	start(c)
	defer c.GracefulStop()
	deadline := time.Now().Add(time.Duration(opts.deadlineS) * time.Second)
	for succeeded.Load() < int64(opts.count) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling a counter with a deadline
	}
	emit("done", "received", succeeded.Load())
	if succeeded.Load() >= int64(opts.count) {
		return 0
	}
	return 3
}

func pushWatch() int {
	listener := &rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
		emitView("consumed", mv, "SUCCESS")
		return rmq.SUCCESS
	}}
	c, err := rmq.NewPushConsumer(config(),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{opts.topic: filter()}),
		rmq.WithPushMessageListener(listener),
	)
	if err != nil {
		fail(err)
	}
	start(c)
	emit("started", "client_id", "")
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	code := 0
	select {
	case <-closed:
	case <-time.After(time.Duration(opts.deadlineS) * time.Second):
		code = 3
	}
	if err := c.GracefulStop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
	}
	emit("stopped")
	return code
}

func transaction() int {
	checker := &rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
		emit("checked", "message_id", mv.GetMessageId(), "body", string(mv.GetBody()))
		if string(mv.GetBody()) == "unknown" {
			return rmq.COMMIT
		}
		return rmq.UNKNOWN
	}}
	p := newProducer(checker)
	defer p.GracefulStop()
	for i, body := range []string{"commit", "rollback", "unknown"} {
		tx := p.BeginTransaction()
		r, err := p.SendWithTransaction(context.TODO(), message(i, body), tx)
		if err != nil {
			fail(err)
		}
		emit("sent", "i", i, "message_id", r[0].MessageID, "body", body)
		switch body {
		case "commit":
			err = tx.Commit()
		case "rollback":
			err = tx.RollBack()
		}
		if err != nil {
			fail(err)
		}
	}
	opts.expect = 2
	return consume()
}

func main() {
	os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
	scenario := parse()
	// Plaintext unless --tls: the switch exists from v5.1.3 on (grpc-v2.md, per-client notes).
	rmq.EnableSsl = opts.tls
	var code int
	switch scenario {
	case "send-consume":
		produce()
		code = consume()
	case "push-redelivery":
		produce()
		code = pushRedelivery()
	case "transaction":
		code = transaction()
	case "push-watch":
		code = pushWatch()
	default:
		fail(fmt.Errorf("unknown scenario %q", scenario))
	}
	os.Exit(code)
}
