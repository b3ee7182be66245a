// Checks the official Go client (rocketmq-client-go v2.1.2) against a broker: a producer sends
// tagged, keyed messages with user properties (single sends and a batch), and a push consumer
// subscribed to "A || B" must receive exactly the A and B messages, each with its body, tag,
// keys and properties intact. `clienttest delayed NAMESRV_ADDR`: messages sent at delay level 2
// (5 s) arrive once each no sooner than 5 s after they were born, and a message whose first
// delivery returns ConsumeRetryLater comes back once, about 10 s later, with ReconsumeTimes 1.
// `clienttest sql NAMESRV_ADDR` (a broker with enablePropertyFilter=true): a push consumer with an
// SQL92 selector receives exactly the messages it picks, once each. `clienttest request
// NAMESRV_ADDR`: a producer's requests are answered by a consumer through the reply topic and
// the broker's push of the reply to the requester. `clienttest transaction NAMESRV_ADDR`: a
// transactional producer's committed messages arrive once, rolled-back ones never, and undecided
// ones once the broker's check-back commits them.
// Exit status 0 means every check held.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type expected struct {
	tag, keys, body, seq string
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: clienttest NAMESRV_ADDR | clienttest delayed NAMESRV_ADDR | clienttest sql NAMESRV_ADDR | clienttest request NAMESRV_ADDR | clienttest transaction NAMESRV_ADDR | clienttest vectors NAMESRV_ADDR COUNT")
	}
	if os.Args[1] == "delayed" && len(os.Args) == 3 {
		rlog.SetLogLevel("error")
		delayed(os.Args[2])
		return
	}
	if os.Args[1] == "sql" && len(os.Args) == 3 {
		rlog.SetLogLevel("error")
		sql92(os.Args[2])
		return
	}
	if os.Args[1] == "request" && len(os.Args) == 3 {
		rlog.SetLogLevel("error")
		request(os.Args[2])
		return
	}
	if os.Args[1] == "transaction" && len(os.Args) == 3 {
		rlog.SetLogLevel("error")
		transaction(os.Args[2])
		return
	}
	if os.Args[1] == "vectors" && len(os.Args) == 4 {
		count, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fail("COUNT: %v", err)
		}
		rlog.SetLogLevel("error")
		vectors(os.Args[2], count)
		return
	}
	ns := os.Args[1]
	rlog.SetLogLevel("error")
	stamp := time.Now().UnixNano() % 1000000000
	topic := fmt.Sprintf("PetrelGo%d", stamp)
	group := fmt.Sprintf("cg_go_%d", stamp)
	resolver := primitive.NewPassthroughResolver([]string{ns})

	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithRetry(2),
		producer.WithGroupName(fmt.Sprintf("pg_go_%d", stamp)), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		fail("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		fail("start producer: %v", err)
	}
	tags := []string{"A", "B", "C"}
	want := map[string]expected{}
	all := 0
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		e := expected{tag: tags[i%3], keys: fmt.Sprintf("go-key-%d", i), body: fmt.Sprintf("go body %d %s", i, strings.Repeat("x", i)), seq: fmt.Sprint(i)}
		msg := primitive.NewMessage(topic, []byte(e.body))
		msg.WithTag(e.tag)
		msg.WithKeys([]string{e.keys})
		msg.WithProperty("seq", e.seq)
		res, err := p.SendSync(ctx, msg)
		if err != nil || res.Status != primitive.SendOK {
			fail("send %d: %v %v", i, res, err)
		}
		if res.MsgID == "" || res.OffsetMsgID == "" {
			fail("send %d: empty ids in %v", i, res)
		}
		all++
		if e.tag != "C" {
			want[e.seq] = e
		}
	}
	var batch []*primitive.Message
	for i := 30; i < 36; i++ {
		e := expected{tag: tags[i%2], keys: fmt.Sprintf("go-key-%d", i), body: fmt.Sprintf("go batch body %d", i), seq: fmt.Sprint(i)}
		msg := primitive.NewMessage(topic, []byte(e.body))
		msg.WithTag(e.tag)
		msg.WithKeys([]string{e.keys})
		msg.WithProperty("seq", e.seq)
		batch = append(batch, msg)
		want[e.seq] = e
		all++
	}
	if res, err := p.SendSync(ctx, batch...); err != nil || res.Status != primitive.SendOK {
		fail("batch send: %v %v", res, err)
	}

	var mu sync.Mutex
	got := map[string]int{}
	var problems []string
	c, err := rocketmq.NewPushConsumer(consumer.WithGroupName(group), consumer.WithNsResolver(resolver),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fail("new consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "A || B"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				seq := m.GetProperty("seq")
				got[seq]++
				e, ok := want[seq]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("unexpected message seq=%q tag=%q", seq, m.GetTags()))
				case string(m.Body) != e.body:
					problems = append(problems, fmt.Sprintf("seq %s: body %q, want %q", seq, m.Body, e.body))
				case m.GetTags() != e.tag:
					problems = append(problems, fmt.Sprintf("seq %s: tag %q, want %q", seq, m.GetTags(), e.tag))
				case m.GetKeys() != e.keys:
					problems = append(problems, fmt.Sprintf("seq %s: keys %q, want %q", seq, m.GetKeys(), e.keys))
				case m.Topic != topic:
					problems = append(problems, fmt.Sprintf("seq %s: topic %q", seq, m.Topic))
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		fail("start consumer: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // anything extra (a C message, a duplicate) would arrive now
	_ = c.Shutdown()
	_ = p.Shutdown()

	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for seq := range want {
		if got[seq] == 0 {
			missing = append(missing, seq)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("%d messages never arrived: %v", len(missing), missing))
	}
	for seq, n := range got {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("seq %s delivered %d times", seq, n))
		}
	}
	if len(problems) > 0 {
		fail("%d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Printf("go client: sent %d (30 single, 6 batched), consumed %d with \"A || B\", all bodies, tags, keys and properties match\n", all, len(got))
}

// One delivery in the delayed scenario.
type delivery struct {
	kind           string
	reconsumeTimes int32
	born, stored   int64
	arrived        time.Time
	msgID, topic   string
}

// startProducer starts a producer of group (instance names one client among several in this
// process); topic, when not empty, is created by a first send.
func startProducer(resolver primitive.NsResolver, group, instance, topic string) rocketmq.Producer {
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithRetry(2),
		producer.WithGroupName(group), producer.WithInstanceName(instance), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil || p.Start() != nil {
		fail("producer %s: %v", group, err)
	}
	if topic != "" {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("creates the topic"))); err != nil {
			fail("first send to %s: %v", topic, err)
		}
	}
	return p
}

func delayed(ns string) {
	stamp := time.Now().UnixNano() % 1000000000
	topic := fmt.Sprintf("PetrelGoDelayed%d", stamp)
	group := fmt.Sprintf("cg_go_delayed_%d", stamp)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	p := startProducer(resolver, fmt.Sprintf("pg_go_delayed_%d", stamp), "DEFAULT", topic)
	ctx := context.Background()
	// A consumer looks its retry topic up once at start and then every 30 s; the group's first
	// heartbeat creates that topic. A first consumer of the group registers it, as a deployed
	// group would have, so that the second finds its retry topic at start.
	newConsumer := func(listener func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) rocketmq.PushConsumer {
		c, err := rocketmq.NewPushConsumer(consumer.WithGroupName(group), consumer.WithNsResolver(resolver),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumeMessageBatchMaxSize(1))
		if err != nil {
			fail("new consumer: %v", err)
		}
		if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, listener); err != nil {
			fail("subscribe: %v", err)
		}
		if err := c.Start(); err != nil {
			fail("start consumer: %v", err)
		}
		return c
	}
	var mu sync.Mutex
	seen := map[string][]delivery{}
	first := newConsumer(func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	time.Sleep(2 * time.Second)
	_ = first.Shutdown()
	c := newConsumer(func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		later := false
		for _, m := range msgs {
			kind := m.GetProperty("kind")
			if kind == "" {
				continue
			}
			d := delivery{kind, m.ReconsumeTimes, m.BornTimestamp, m.StoreTimestamp, time.Now(), m.MsgId, m.Topic}
			seen[string(m.Body)] = append(seen[string(m.Body)], d)
			later = later || (kind == "retry" && m.ReconsumeTimes == 0)
		}
		if later {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	})
	for _, kind := range []string{"delay", "retry"} {
		for i := 0; i < 3; i++ {
			msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", kind, i)))
			msg.WithProperty("kind", kind)
			if kind == "delay" {
				msg.WithDelayTimeLevel(2)
			}
			if res, err := p.SendSync(ctx, msg); err != nil || res.Status != primitive.SendOK {
				fail("send %s-%d: %v %v", kind, i, res, err)
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := 0
		for _, ds := range seen {
			n += len(ds)
		}
		mu.Unlock()
		if n >= 9 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // an extra delivery would arrive now
	_ = c.Shutdown()
	_ = p.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	var problems []string
	for i := 0; i < 3; i++ {
		d := seen[fmt.Sprintf("delay-%d", i)]
		if len(d) != 1 {
			problems = append(problems, fmt.Sprintf("delay-%d delivered %d times", i, len(d)))
		} else if waited := d[0].stored - d[0].born; waited < 5000 {
			problems = append(problems, fmt.Sprintf("delay-%d stored in its queue %d ms after it was born, before 5 s", i, waited))
		}
		r := seen[fmt.Sprintf("retry-%d", i)]
		if len(r) != 2 {
			problems = append(problems, fmt.Sprintf("retry-%d delivered %d times", i, len(r)))
			continue
		}
		gap := r[1].arrived.Sub(r[0].arrived)
		switch {
		case r[1].reconsumeTimes != 1:
			problems = append(problems, fmt.Sprintf("retry-%d came back with ReconsumeTimes %d", i, r[1].reconsumeTimes))
		case gap < 9900*time.Millisecond || gap > 20*time.Second:
			problems = append(problems, fmt.Sprintf("retry-%d came back after %v, not about 10 s", i, gap))
		case r[1].topic != topic || r[1].msgID != r[0].msgID:
			problems = append(problems, fmt.Sprintf("retry-%d came back as %s on %s, not %s on %s", i, r[1].msgID, r[1].topic, r[0].msgID, topic))
		}
	}
	if len(problems) > 0 {
		fail("%d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Println("go client: 3 delayed messages after their 5 s, 3 retried once about 10 s later")
}

// sql92 sends 20 messages with user properties and checks that a push consumer with an SQL92
// selector gets exactly those it picks: the broker filters, the Go client does not.
func sql92(ns string) {
	stamp := time.Now().UnixNano() % 1000000000
	topic := fmt.Sprintf("PetrelGoSql%d", stamp)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	p := startProducer(resolver, fmt.Sprintf("pg_go_sql_%d", stamp), "DEFAULT", topic)
	ctx := context.Background()
	selector := "(color = 'red' OR color = 'blue') AND n > 5 AND n NOT BETWEEN 10 AND 12"
	want := map[string]bool{}
	var mu sync.Mutex
	got := map[string]int{}
	c, err := rocketmq.NewPushConsumer(consumer.WithGroupName(fmt.Sprintf("cg_go_sql_%d", stamp)),
		consumer.WithNsResolver(resolver), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fail("new consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: selector},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[string(m.Body)]++
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil || c.Start() != nil {
		fail("consumer: %v", err)
	}
	colors := []string{"red", "green", "blue"}
	for i := 0; i < 20; i++ {
		body := fmt.Sprintf("sql-%d", i)
		msg := primitive.NewMessage(topic, []byte(body))
		color := colors[i%3]
		msg.WithProperty("color", color)
		msg.WithProperty("n", strconv.Itoa(i))
		if (color == "red" || color == "blue") && i > 5 && (i < 10 || i > 12) {
			want[body] = true
		}
		if res, err := p.SendSync(ctx, msg); err != nil || res.Status != primitive.SendOK {
			fail("send %s: %v %v", body, res, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a message the selector does not pick would arrive now
	_ = c.Shutdown()
	_ = p.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	var problems []string
	for body := range want {
		if got[body] != 1 {
			problems = append(problems, fmt.Sprintf("%s delivered %d times", body, got[body]))
		}
	}
	for body, n := range got {
		if !want[body] {
			problems = append(problems, fmt.Sprintf("%s (not selected) delivered %d times", body, n))
		}
	}
	if len(want) != 7 {
		problems = append(problems, fmt.Sprintf("the selector should pick 7 messages, the test expects %d", len(want)))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		fail("sql: %d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Printf("go client: the SQL92 selector picked exactly %d of 20 messages\n", len(want))
}

// request: each request gets the reply a consumer made for it with CreateReplyMessage.
func request(ns string) {
	stamp := time.Now().UnixNano() % 1000000000
	topic := fmt.Sprintf("PetrelGoRequest%d", stamp)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	requester := startProducer(resolver, fmt.Sprintf("pg_go_req_%d", stamp), "requester", topic)
	replier := startProducer(resolver, fmt.Sprintf("pg_go_rep_%d", stamp), "replier", "")
	ctx := context.Background()
	c, err := rocketmq.NewPushConsumer(consumer.WithGroupName(fmt.Sprintf("cg_go_req_%d", stamp)),
		consumer.WithNsResolver(resolver), consumer.WithInstance("server"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fail("new consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "Req"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := consumer.CreateReplyMessage(m, nil)
				if err != nil {
					fail("create reply: %v", err)
				}
				// v2.1.2's CreateReplyMessage does not set the body it is given.
				reply.Body = []byte("re:" + string(m.Body))
				if res, err := replier.SendSync(ctx, reply); err != nil || res.Status != primitive.SendOK {
					fail("reply to %s: %v %v", m.Body, res, err)
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil || c.Start() != nil {
		fail("consumer: %v", err)
	}
	// The Go client registers a producer with the broker on its first heartbeat, a second after
	// it starts; a reply before that finds no requester (the client's own example waits too).
	time.Sleep(2 * time.Second)
	for i := 0; i < 3; i++ {
		ask := primitive.NewMessage(topic, []byte(fmt.Sprintf("ask-%d", i)))
		ask.WithTag("Req")
		r, err := requester.Request(ctx, 15*time.Second, ask)
		if err != nil {
			fail("request ask-%d: %v", i, err)
		}
		if want := fmt.Sprintf("re:ask-%d", i); string(r.Body) != want {
			fail("request ask-%d was answered %q, not %q", i, r.Body, want)
		}
		if r.GetProperty(primitive.PropertyCorrelationID) != ask.GetProperty(primitive.PropertyCorrelationID) {
			fail("request ask-%d: the reply's correlation id differs", i)
		}
	}
	_ = c.Shutdown()
	_ = replier.Shutdown()
	_ = requester.Shutdown()
	fmt.Println("go client: 3 requests answered through the reply topic")
}

// txListener commits "commit-*", rolls back "rollback-*" and leaves "unknown-*" undecided until
// the broker asks, then commits them.
type txListener struct {
	mu      sync.Mutex
	checked map[string]time.Time
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch body := string(m.Body); {
	case strings.HasPrefix(body, "commit"):
		return primitive.CommitMessageState
	case strings.HasPrefix(body, "rollback"):
		return primitive.RollbackMessageState
	default:
		return primitive.UnknowState
	}
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	body := string(m.Body)
	if _, seen := l.checked[body]; !seen {
		l.checked[body] = time.Now()
	}
	if strings.HasPrefix(body, "unknown") {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func transaction(ns string) {
	stamp := time.Now().UnixNano() % 1000000000
	topic := fmt.Sprintf("PetrelGoTx%d", stamp)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	_ = startProducer(resolver, fmt.Sprintf("pg_go_txw_%d", stamp), "DEFAULT", topic).Shutdown()
	ctx := context.Background()
	listener := &txListener{checked: map[string]time.Time{}}
	tp, err := rocketmq.NewTransactionProducer(listener, producer.WithNsResolver(resolver), producer.WithRetry(2),
		producer.WithGroupName(fmt.Sprintf("pg_go_tx_%d", stamp)), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil || tp.Start() != nil {
		fail("transaction producer: %v", err)
	}
	var mu sync.Mutex
	got := map[string][]time.Time{}
	c, err := rocketmq.NewPushConsumer(consumer.WithGroupName(fmt.Sprintf("cg_go_tx_%d", stamp)),
		consumer.WithNsResolver(resolver), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fail("new consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "T"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[string(m.Body)] = append(got[string(m.Body)], time.Now())
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil || c.Start() != nil {
		fail("consumer: %v", err)
	}
	for _, kind := range []string{"commit", "rollback", "unknown"} {
		for i := 0; i < 2; i++ {
			msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", kind, i)))
			msg.WithTag("T")
			if res, err := tp.SendMessageInTransaction(ctx, msg); err != nil || res.Status != primitive.SendOK {
				fail("send %s-%d: %v %v", kind, i, res, err)
			}
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 4 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a rolled-back message or a second copy would arrive now
	_ = c.Shutdown()
	_ = tp.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	listener.mu.Lock()
	defer listener.mu.Unlock()
	var problems []string
	for i := 0; i < 2; i++ {
		for _, kind := range []string{"commit", "unknown"} {
			body := fmt.Sprintf("%s-%d", kind, i)
			if len(got[body]) != 1 {
				problems = append(problems, fmt.Sprintf("%s delivered %d times", body, len(got[body])))
			}
		}
		if n := len(got[fmt.Sprintf("rollback-%d", i)]); n != 0 {
			problems = append(problems, fmt.Sprintf("rollback-%d delivered %d times", i, n))
		}
		body := fmt.Sprintf("unknown-%d", i)
		asked, ok := listener.checked[body]
		switch {
		case !ok:
			problems = append(problems, "the broker never asked about "+body)
		case len(got[body]) == 1 && got[body][0].Before(asked):
			problems = append(problems, body+" arrived before the broker asked")
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		fail("transaction: %d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Println("go client: 2 committed and 2 checked transactions delivered once, 2 rolled back never")
}
