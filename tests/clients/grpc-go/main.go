// grpc-go-test drives Petrel's gRPC endpoint (RocketMQ 5's gRPC protocol) with the official
// RocketMQ 5 Go SDK (github.com/apache/rocketmq-clients/golang/v5), unchanged.
//
//	grpc-go-test ENDPOINT SCENARIO TOPIC GROUP
//
//	normal  NORMAL topic: 10 tagged, keyed messages sent; a SimpleConsumer filtering on the tag
//	        receives and acks all of them, and receives nothing more for about 4 s afterwards.
//	delay   DELAY topic: one message with a delivery time 3 s ahead arrives no sooner than
//	        2.5 s and no later than 20 s after it was sent.
//	fifo    FIFO topic, orderly group: two message groups of 5 messages each arrive, each group
//	        in the order it was sent, all within 40 s.
//
// ENDPOINT is host:port of the gRPC listener, reached without TLS, signed with PETREL_ACCESS_KEY /
// PETREL_SECRET_KEY from the environment when set (an authenticating broker). A run
// prints exactly one verdict line on stdout, "ok: go SCENARIO: ..." (exit 0) or
// "FAIL: go SCENARIO: ..." (exit 1; 2 for a usage error); progress goes to stderr as "info: ...".
// A run never takes longer than 60 s. The SDK's own log goes to
// $TMPDIR/petrel-grpc-go-test-logs at level warn unless the environment variables
// rocketmq.client.logRoot / rocketmq.client.logLevel say otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

const (
	lang              = "go"
	tag               = "TagA"
	hardLimit         = 60 * time.Second
	awaitDuration     = 5 * time.Second
	invisibleDuration = 20 * time.Second
	startLimit        = 15 * time.Second
	requestLimit      = 10 * time.Second
	// The Go SDK reports an empty receive as an error carrying MESSAGE_NOT_FOUND.
	codeMessageNotFound = 40401
)

var (
	startedAt = time.Now()
	// Every wait inside a scenario ends by this instant; the watchdog enforces hardLimit.
	workDeadline = startedAt.Add(hardLimit - 8*time.Second)

	scenario = "?"

	stateMu  sync.Mutex
	phase    = "starting"
	decided  bool
	exitCode = 1
	closers  []func() error
)

// failure is a scenario expectation that did not hold; it is raised with panic and turned into
// the verdict by run.
type failure struct{ text string }

func (f failure) Error() string { return f.text }

func fail(format string, args ...interface{}) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func expect(cond bool, format string, args ...interface{}) {
	if !cond {
		fail(format, args...)
	}
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: grpc-go-test ENDPOINT normal|delay|fifo TOPIC GROUP")
		fmt.Println("FAIL: " + lang + " usage: expected 4 arguments, got " + strconv.Itoa(len(os.Args)-1))
		os.Exit(2)
	}
	endpoint, topic, group := os.Args[1], os.Args[3], os.Args[4]
	scenario = os.Args[2]
	switch scenario {
	case "normal", "delay", "fifo":
	default:
		fmt.Fprintln(os.Stderr, "usage: grpc-go-test ENDPOINT normal|delay|fifo TOPIC GROUP")
		fmt.Println("FAIL: " + lang + " usage: unknown scenario " + scenario)
		os.Exit(2)
	}

	quietSdkLog()
	// Plaintext gRPC: the SDK dials with TLS unless this is off (connections are dialed lazily,
	// so setting it before the first Start is enough).
	rmq.EnableSsl = false

	time.AfterFunc(hardLimit, func() {
		verdict(false, fmt.Sprintf("no verdict within %d s (last step: %s)", int(hardLimit/time.Second), currentPhase()))
		stateMu.Lock()
		code := exitCode
		stateMu.Unlock()
		os.Exit(code)
	})

	held, err := run(endpoint, topic, group)
	if err != nil {
		verdict(false, err.Error())
	} else {
		verdict(true, held)
	}
	closeAll(earlier(time.Now().Add(10*time.Second), startedAt.Add(hardLimit-time.Second)))
	stateMu.Lock()
	code := exitCode
	stateMu.Unlock()
	os.Exit(code)
}

func run(endpoint, topic, group string) (held string, err error) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				err = f
				return
			}
			err = fmt.Errorf("%s: unexpected panic: %v", currentPhase(), r)
		}
	}()
	switch scenario {
	case "normal":
		return normal(endpoint, topic, group), nil
	case "delay":
		return delay(endpoint, topic, group), nil
	default:
		return fifo(endpoint, topic, group), nil
	}
}

// ---------------------------------------------------------------- scenarios

func normal(endpoint, topic, group string) string {
	const total = 10
	consumer := startConsumer(endpoint, group, topic, rmq.NewFilterExpression(tag))
	producer := startProducer(endpoint, topic)

	step(fmt.Sprintf("sending %d messages", total))
	idByBody := make(map[string]string, total)
	for i := 0; i < total; i++ {
		body := fmt.Sprintf("%s-%d", lang, i)
		msg := &rmq.Message{Topic: topic, Body: []byte(body)}
		msg.SetTag(tag)
		msg.SetKeys(fmt.Sprintf("k%d", i))
		idByBody[body] = send(producer, msg, body)
	}

	step(fmt.Sprintf("receiving the %d messages", total))
	receiveStart := time.Now()
	until := earlier(receiveStart.Add(30*time.Second), workDeadline)
	seen := make(map[string]bool, total)
	receives := 0
	for len(seen) < total && time.Now().Before(until) {
		views := receive(consumer)
		receives++
		for _, mv := range views {
			b := body(mv)
			id, ok := idByBody[b]
			expect(ok, "received a message this run did not send: %s", describe(mv))
			expect(!seen[b], "received %s twice before its %s invisible duration ran out: %s", b, invisibleDuration, describe(mv))
			expect(mv.GetTag() != nil && *mv.GetTag() == tag, "%s came back with tag %s, expected %s", b, strOrNone(mv.GetTag()), tag)
			expect(mv.GetMessageId() == id, "%s came back with message id %q, its send receipt said %q", b, mv.GetMessageId(), id)
			key := "k" + strings.TrimPrefix(b, lang+"-")
			expect(contains(mv.GetKeys(), key), "%s came back with keys %v, expected %s", b, mv.GetKeys(), key)
			expect(mv.GetDeliveryAttempt() == 1, "%s came back with deliveryAttempt %d on its first delivery, expected 1", b, mv.GetDeliveryAttempt())
			ack(consumer, mv)
			seen[b] = true
		}
	}
	receiveTook := time.Since(receiveStart)
	expect(len(seen) == total, "received %d of %d messages in %s; missing %v", len(seen), total, receiveTook.Round(time.Millisecond), missing(idByBody, seen))

	step("checking acked messages stay gone")
	quietStart := time.Now()
	quietUntil := earlier(quietStart.Add(4*time.Second), workDeadline)
	quietReceives := 0
	for quietReceives == 0 || time.Now().Before(quietUntil) {
		again := receive(consumer)
		quietReceives++
		if len(again) > 0 {
			fail("a receive after all %d acks returned %d message(s), first %s", total, len(again), describe(again[0]))
		}
	}
	return fmt.Sprintf("%d messages sent, each send receipt carrying a message id; all %d received through tag filter %s"+
		" in %d receive(s) over %.1f s with their ids, keys and deliveryAttempt 1, and acked; %d receive(s) over the next %.1f s returned nothing",
		total, total, tag, receives, receiveTook.Seconds(), quietReceives, time.Since(quietStart).Seconds())
}

func delay(endpoint, topic, group string) string {
	const ahead = 3 * time.Second
	const earliest = 2500 * time.Millisecond
	const latest = 20 * time.Second
	consumer := startConsumer(endpoint, group, topic, rmq.SUB_ALL)
	producer := startProducer(endpoint, topic)

	step("sending one message with a delivery time 3 s ahead")
	b := lang + "-delay"
	msg := &rmq.Message{Topic: topic, Body: []byte(b)}
	msg.SetTag(tag)
	msg.SetKeys("kdelay")
	sentAt := time.Now()
	msg.SetDelayTimestamp(sentAt.Add(ahead))
	id := send(producer, msg, b)

	step("waiting for the delayed message")
	until := earlier(sentAt.Add(latest), workDeadline)
	var got time.Duration = -1
	receives := 0
	for got < 0 && time.Now().Before(until) {
		views := receive(consumer)
		receives++
		after := time.Since(sentAt)
		for _, mv := range views {
			expect(body(mv) == b, "waiting for %s, received %s", b, describe(mv))
			expect(got < 0, "received %s twice in one receive", b)
			expect(mv.GetMessageId() == id, "%s came back with message id %q, its send receipt said %q", b, mv.GetMessageId(), id)
			expect(after >= earliest, "%s arrived %d ms after the send, before its delivery time (+%d ms; earliest allowed %d ms)",
				b, after.Milliseconds(), ahead.Milliseconds(), earliest.Milliseconds())
			ack(consumer, mv)
			got = after
		}
	}
	expect(got >= 0, "%s was not received within %s of its send (%d receives)", b, time.Since(sentAt).Round(time.Millisecond), receives)
	return fmt.Sprintf("a message with a delivery time %d ms ahead was received %d ms after the send (allowed %d..%d ms) with its message id, and acked",
		ahead.Milliseconds(), got.Milliseconds(), earliest.Milliseconds(), latest.Milliseconds())
}

func fifo(endpoint, topic, group string) string {
	const perGroup = 5
	const within = 40 * time.Second
	groups := []string{"g0", "g1"}
	total := perGroup * len(groups)
	consumer := startConsumer(endpoint, group, topic, rmq.SUB_ALL)
	producer := startProducer(endpoint, topic)

	step(fmt.Sprintf("sending %d messages in message groups %v", total, groups))
	sendStart := time.Now()
	idByBody := make(map[string]string, total)
	for n := 0; n < perGroup; n++ {
		for _, g := range groups {
			b := fmt.Sprintf("%s-%d", g, n)
			msg := &rmq.Message{Topic: topic, Body: []byte(b)}
			msg.SetTag(tag)
			msg.SetMessageGroup(g)
			idByBody[b] = send(producer, msg, b)
		}
	}

	step("receiving the message groups in order")
	until := earlier(sendStart.Add(within), workDeadline)
	next := make(map[string]int, len(groups))
	var arrivals []string
	receives := 0
	for len(arrivals) < total && time.Now().Before(until) {
		views := receive(consumer)
		receives++
		for _, mv := range views {
			b := body(mv)
			id, ok := idByBody[b]
			expect(ok, "received a message this run did not send: %s", describe(mv))
			dash := strings.LastIndexByte(b, '-')
			g := b[:dash]
			n, _ := strconv.Atoi(b[dash+1:])
			expect(mv.GetMessageGroup() != nil && *mv.GetMessageGroup() == g, "%s came back with message group %s, expected %s",
				b, strOrNone(mv.GetMessageGroup()), g)
			expect(mv.GetMessageId() == id, "%s came back with message id %q, its send receipt said %q", b, mv.GetMessageId(), id)
			expect(n == next[g], "message group %s: received %s when %s-%d was due (arrivals so far: %v)", g, b, g, next[g], arrivals)
			ack(consumer, mv)
			next[g]++
			arrivals = append(arrivals, b)
		}
	}
	took := time.Since(sendStart)
	expect(len(arrivals) == total, "received %d of %d messages within %s of the first send (arrivals: %v)",
		len(arrivals), total, took.Round(time.Millisecond), arrivals)
	return fmt.Sprintf("%d message groups x %d messages sent with their group; all %d received and acked %.1f s after the first send"+
		" in %d receive(s), each group in order 0..%d (arrival order %s)",
		len(groups), perGroup, total, took.Seconds(), receives, perGroup-1, strings.Join(arrivals, " "))
}

// ---------------------------------------------------------------- clients

func config(endpoint, group string) *rmq.Config {
	// The SDK signs every request with these credentials and dereferences them, so they must be
	// present even when they are empty (a broker without authentication ignores them). An
	// authenticating broker is reached with PETREL_ACCESS_KEY / PETREL_SECRET_KEY.
	return &rmq.Config{
		Endpoint:      endpoint,
		ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{
			AccessKey:    os.Getenv("PETREL_ACCESS_KEY"),
			AccessSecret: os.Getenv("PETREL_SECRET_KEY"),
		},
	}
}

func startProducer(endpoint, topic string) rmq.Producer {
	step("starting the producer")
	p, err := rmq.NewProducer(config(endpoint, ""), rmq.WithTopics(topic))
	expect(err == nil, "creating the producer failed: %v", err)
	startWithin("the producer", p.Start)
	addCloser(p.GracefulStop)
	return p
}

func startConsumer(endpoint, group, topic string, filter *rmq.FilterExpression) rmq.SimpleConsumer {
	step("starting the simple consumer")
	c, err := rmq.NewSimpleConsumer(config(endpoint, group),
		rmq.WithSimpleAwaitDuration(awaitDuration),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: filter}))
	expect(err == nil, "creating the simple consumer failed: %v", err)
	startWithin("the simple consumer", c.Start)
	addCloser(c.GracefulStop)
	return c
}

// startWithin runs start, which in this SDK waits without limit for the server's Settings over
// Telemetry, and fails the scenario when it has not returned in time.
func startWithin(what string, start func() error) {
	done := make(chan error, 1)
	go func() { done <- start() }()
	limit := time.Until(earlier(time.Now().Add(startLimit), workDeadline))
	select {
	case err := <-done:
		expect(err == nil, "starting %s failed: %v", what, err)
	case <-time.After(limit):
		fail("starting %s did not finish within %s (it waits for the server's Settings over Telemetry)", what, limit.Round(time.Millisecond))
	}
}

func send(p rmq.Producer, msg *rmq.Message, b string) string {
	ctx, cancel := context.WithTimeout(context.Background(), requestLimit)
	defer cancel()
	receipts, err := p.Send(ctx, msg)
	expect(err == nil, "sending %s failed: %v", b, err)
	expect(len(receipts) == 1, "sending %s returned %d send receipts, expected 1", b, len(receipts))
	expect(receipts[0] != nil && receipts[0].MessageID != "", "the send receipt for %s has no message id", b)
	return receipts[0].MessageID
}

// receive asks for up to 16 messages; an empty answer (MESSAGE_NOT_FOUND) is an empty list, any
// other error fails the scenario.
func receive(c rmq.SimpleConsumer) []*rmq.MessageView {
	ctx, cancel := context.WithTimeout(context.Background(), awaitDuration+requestLimit)
	defer cancel()
	views, err := c.Receive(ctx, 16, invisibleDuration)
	if err != nil {
		if status, ok := rmq.AsErrRpcStatus(err); ok && status.GetCode() == codeMessageNotFound {
			return nil
		}
		fail("%s: receive failed: %v", currentPhase(), describeErr(err))
	}
	return views
}

func ack(c rmq.SimpleConsumer, mv *rmq.MessageView) {
	ctx, cancel := context.WithTimeout(context.Background(), requestLimit)
	defer cancel()
	err := c.Ack(ctx, mv)
	expect(err == nil, "acking %s failed: %v", body(mv), describeErr(err))
}

func addCloser(f func() error) {
	stateMu.Lock()
	closers = append(closers, f)
	stateMu.Unlock()
}

// closeAll stops every client, newest first, giving up at the deadline.
func closeAll(deadline time.Time) {
	stateMu.Lock()
	list := append([]func() error(nil), closers...)
	stateMu.Unlock()
	done := make(chan struct{})
	go func() {
		for i := len(list) - 1; i >= 0; i-- {
			if err := list[i](); err != nil {
				info("closing a client failed: " + err.Error())
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		info("clients still closing; exiting anyway")
	}
}

// ---------------------------------------------------------------- helpers

// quietSdkLog points the SDK's file log at a temp folder at level warn and keeps it off the
// console. The SDK builds its logger in an init function from environment variables, so they are
// set here and the logger rebuilt before any client exists.
func quietSdkLog() {
	setDefaultEnv("rocketmq.client.logRoot", filepath.Join(os.TempDir(), "petrel-grpc-go-test-logs"))
	setDefaultEnv("rocketmq.client.logLevel", "warn")
	os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
}

func setDefaultEnv(key, value string) {
	if os.Getenv(key) == "" {
		os.Setenv(key, value)
	}
}

func body(mv *rmq.MessageView) string {
	return string(mv.GetBody())
}

func describe(mv *rmq.MessageView) string {
	b := body(mv)
	if len(b) > 64 {
		b = fmt.Sprintf("%s...(%d bytes)", b[:64], len(b))
	}
	return fmt.Sprintf("{id=%s, topic=%s, body=%s, tag=%s, keys=%v, group=%s, deliveryAttempt=%d}",
		mv.GetMessageId(), mv.GetTopic(), b, strOrNone(mv.GetTag()), mv.GetKeys(), strOrNone(mv.GetMessageGroup()), mv.GetDeliveryAttempt())
}

func describeErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	var status *rmq.ErrRpcStatus
	if errors.As(err, &status) {
		return fmt.Sprintf("%v (code %d)", err, status.GetCode())
	}
	return err.Error()
}

func strOrNone(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func missing(want map[string]string, got map[string]bool) []string {
	var left []string
	for b := range want {
		if !got[b] {
			left = append(left, b)
		}
	}
	sort.Strings(left)
	return left
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func currentPhase() string {
	stateMu.Lock()
	defer stateMu.Unlock()
	return phase
}

func step(what string) {
	stateMu.Lock()
	phase = what
	stateMu.Unlock()
	info(fmt.Sprintf("%s +%d ms: %s", scenario, time.Since(startedAt).Milliseconds(), what))
}

func info(text string) {
	fmt.Fprintln(os.Stderr, "info: "+text)
}

// verdict prints the run's one verdict line; later calls are ignored.
func verdict(ok bool, text string) {
	stateMu.Lock()
	defer stateMu.Unlock()
	if decided {
		return
	}
	decided = true
	prefix := "FAIL: "
	exitCode = 1
	if ok {
		prefix = "ok: "
		exitCode = 0
	}
	fmt.Println(prefix + lang + " " + scenario + ": " + text)
	os.Stdout.Sync()
}
