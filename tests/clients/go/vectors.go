package main

// The client side of tests/vectors/go-client-3msgs (run by scripts/record-vectors.sh against
// Apache RocketMQ 5.5.0): a producer sends COUNT messages to a new topic (all but the last
// synchronously, the last asynchronously), tags TagA/TagB/TagC in turn, then two push
// consumers read them from the first offset, one with "TagA || TagB", one with "TagC".

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func vectors(ns string, count int) {
	stamp := fmt.Sprintf("%x", time.Now().UnixNano()%0xffffffff)
	topic := "GoAccTopic_" + stamp
	resolver := primitive.NewPassthroughResolver([]string{ns})
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithGroupName("go_acc_producer_"+stamp))
	if err != nil || p.Start() != nil {
		fail("start producer: %v", err)
	}
	tags := []string{"TagA", "TagB", "TagC"}
	var async sync.WaitGroup
	for i := 0; i < count; i++ {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("body-%s-%d-%s", stamp, i, strings.Repeat("x", i))))
		msg.WithTag(tags[i%3])
		msg.WithKeys([]string{fmt.Sprintf("k-%s-%d", stamp, i), fmt.Sprintf("idx-%d", i)})
		msg.WithProperty("seq", fmt.Sprint(i))
		if i < count-1 {
			if _, err := p.SendSync(context.Background(), msg); err != nil {
				fail("send %d: %v", i, err)
			}
			continue
		}
		async.Add(1)
		if err := p.SendAsync(context.Background(), func(_ context.Context, _ *primitive.SendResult, err error) {
			if err != nil {
				fail("async send: %v", err)
			}
			async.Done()
		}, msg); err != nil {
			fail("async send: %v", err)
		}
	}
	async.Wait()
	_ = p.Shutdown()
	for _, expression := range []string{"TagA || TagB", "TagC"} {
		want := 0
		for i := 0; i < count; i++ {
			if strings.Contains(expression, tags[i%3]) {
				want++
			}
		}
		got := make(chan struct{}, count)
		c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver),
			consumer.WithGroupName(fmt.Sprintf("go_acc_consumer_%s_%d", stamp, len(expression))),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		if err != nil {
			fail("new consumer: %v", err)
		}
		err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expression},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for range msgs {
					got <- struct{}{}
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil || c.Start() != nil {
			fail("start consumer: %v", err)
		}
		for n := 0; n < want; n++ {
			select {
			case <-got:
			case <-time.After(60 * time.Second):
				fail("%s: %d of %d messages", expression, n, want)
			}
		}
		_ = c.Shutdown()
	}
	fmt.Println("vectors: done")
}
