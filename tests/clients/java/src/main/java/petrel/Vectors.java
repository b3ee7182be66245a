package petrel;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * The client side of the captures in tests/vectors (run by scripts/record-vectors.sh against
 * Apache RocketMQ 5.5.0):
 *
 * <ul>
 *   <li>{@code producer NS TOPIC}: group {@code vector_producer} sends three messages
 *       synchronously — tag {@code TagA}, keys {@code key-1..3}, user properties {@code color=red}
 *       and {@code seq=1..3}, bodies {@code hello-1..3} — then shuts down. Run with
 *       {@code -Drocketmq.serialize.type=ROCKETMQ} for the binary-header capture.
 *   <li>{@code consumer NS TOPIC}: group {@code vector_consumer}, subscription {@code TagA}, from the
 *       first offset, clustering; waits for three messages, then shuts down.
 * </ul>
 */
public final class Vectors {
    private Vectors() {}

    static void producer(String ns, String topic) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("vector_producer");
        p.setNamesrvAddr(ns);
        p.start();
        for (int i = 1; i <= 3; i++) {
            Message m = new Message(topic, "TagA", "key-" + i, ("hello-" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("color", "red");
            m.putUserProperty("seq", String.valueOf(i));
            System.out.println(p.send(m).getSendStatus());
        }
        p.shutdown();
    }

    static void consumer(String ns, String topic) throws Exception {
        CountDownLatch three = new CountDownLatch(3);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("vector_consumer");
        c.setNamesrvAddr(ns);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "TagA");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> three.countDown());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        boolean all = three.await(60, TimeUnit.SECONDS);
        c.shutdown();
        if (!all) {
            System.err.println("consumer: fewer than 3 messages");
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Vectors producer|consumer NAMESRV TOPIC");
            System.exit(2);
        }
        if (args[0].equals("producer")) {
            producer(args[1], args[2]);
        } else {
            consumer(args[1], args[2]);
        }
        System.exit(0);
    }
}
