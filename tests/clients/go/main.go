// Checks the official Go client (rocketmq-client-go v2.1.2) against a broker: a producer sends
// tagged, keyed messages with user properties (single sends and a batch), and a push consumer
// subscribed to "A || B" must receive exactly the A and B messages, each with its body, tag,
// keys and properties intact. Exit status 0 means every check held.
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
		fail("usage: clienttest NAMESRV_ADDR | clienttest vectors NAMESRV_ADDR COUNT")
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
