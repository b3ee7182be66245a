package petrel;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.body.UserInfo;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Runs the official RocketMQ Java client (5.5.0) against a broker and checks every message it
 * gets back: body, tag, keys and user properties. Scenarios:
 *
 * <ul>
 *   <li>{@code basic NS}: sync, async, oneway and batch sends; a push consumer with {@code A || B};
 *       a lite pull consumer with {@code *}; two push consumers of one group splitting 8 queues.
 *   <li>{@code acl NS} (a broker with ACL 2.0 on and the super user rocketmq / 12345678): users and
 *       policies made through the admin API; sends and consumption with {@code AclClientRPCHook}
 *       where a policy allows, NO_PERMISSION (16) naming why where it denies or nothing covers, for a
 *       wrong secret, an unknown user and an unsigned client.
 *   <li>{@code lmq NS} (a broker with enableLmq and enableMultiDispatch): light message queues
 *       filled through INNER_MULTI_DISPATCH and read with a pull consumer, as RocketMQ's examples do.
 *   <li>{@code tls NS} (a broker with TLS): {@code setUseTLS(true)} producer and consumer.
 *   <li>{@code restart NS DIR}: produce and consume, then wait (file {@code DIR/ready}) while the
 *       broker is restarted (file {@code DIR/restarted}); the same producer sends again, and a new
 *       consumer of the same group must resume from the committed offsets: all new messages,
 *       none of the old ones; every old message must still be readable.
 *   <li>{@code failover NS DIR}: sends without pause while a driver kills and restarts the
 *       brokers of a controller-mode set, until {@code DIR/stop}; every SEND_OK message must be
 *       consumed.
 *   <li>{@code orderly NS}: two {@code MessageListenerOrderly} consumers of one group lock disjoint
 *       queues; 16 orders of 25 steps, each order sent to one queue, arrive step by step, each once,
 *       with never two consumers in one queue at once; then one consumer leaves and the other takes
 *       every queue and the next 25 steps, still in order.
 *   <li>{@code delayed NS}: messages sent at delay level 2 (5 s) arrive once each, no sooner than 5 s
 *       after they were born; messages whose first delivery returns {@code RECONSUME_LATER} come
 *       back once, about 10 s later (level 3), with {@code reconsumeTimes} 1, the same id, body,
 *       keys and properties; messages that fail twice (maxReconsumeTimes 1) end in the group's
 *       {@code %DLQ%} topic, where a consumer reads them.
 *   <li>{@code timer NS}: messages sent with {@code setDeliverTimeMs}, {@code setDelayTimeSec} and
 *       {@code setDelayTimeMs} in an order unlike that of their times arrive once each, in the
 *       order of their times, stored no sooner than their time and within a second after it, with
 *       their ids; one due in the past arrives at once; one due after {@code timerMaxDelaySec} is
 *       refused with {@code MESSAGE_ILLEGAL}.
 *   <li>{@code query NS}: {@code queryMessage} by key finds exactly the messages sent with that key
 *       (among others), newest first, with their bodies; {@code viewMessage} by message id finds
 *       each message; an unknown key finds none.
 *   <li>{@code broadcast NS}: two push consumers of one group in {@code BROADCASTING} mode (offsets
 *       kept by the clients) each receive every message once, with its body and keys.
 *   <li>{@code reset NS}: a push consumer gets 8 messages, then 8 more; the admin API's
 *       {@code resetOffsetByTimestamp} to a time between the two sends moves every queue back to
 *       the second 8 (the answer says so), and the running consumer gets exactly those again.
 *   <li>{@code transaction NS}: a {@code TransactionMQProducer} whose local transaction commits,
 *       rolls back, or answers "unknown" until the broker's check asks: the consumer gets the
 *       committed and the checked-then-committed messages once each, never a rolled-back one, and
 *       a checked one no sooner than the broker asked.
 * </ul>
 *
 * Exits 0 when every check held; otherwise prints each failure and exits 1.
 */
public final class ClientTest {
    private static final List<String> failures = Collections.synchronizedList(new ArrayList<>());
    private static final long WAIT_MS = 60_000;

    /** What a consumer must see for one message, keyed by the user property "pid". */
    static final class Expected {
        final String pid, tag, keys, body, mode;

        Expected(String pid, String tag, String keys, String body, String mode) {
            this.pid = pid;
            this.tag = tag;
            this.keys = keys;
            this.body = body;
            this.mode = mode;
        }
    }

    /** Collects what a consumer received and checks each message against the expectation. */
    static final class Received {
        final String name;
        final Map<String, Expected> expected;
        final Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
        final Set<Integer> queues = ConcurrentHashMap.newKeySet();

        Received(String name, Map<String, Expected> expected) {
            this.name = name;
            this.expected = expected;
        }

        void accept(MessageExt m) {
            String pid = m.getUserProperty("pid");
            queues.add(m.getQueueId());
            counts.computeIfAbsent(String.valueOf(pid), k -> new AtomicInteger()).incrementAndGet();
            Expected e = expected.get(pid);
            if (e == null) {
                fail(name + ": unexpected message pid=" + pid + " tag=" + m.getTags());
                return;
            }
            String body = new String(m.getBody(), StandardCharsets.UTF_8);
            check(body.equals(e.body), name + ": " + pid + " body " + body + " != " + e.body);
            check(e.tag.equals(m.getTags()), name + ": " + pid + " tag " + m.getTags() + " != " + e.tag);
            check(e.keys.equals(m.getKeys()), name + ": " + pid + " keys " + m.getKeys() + " != " + e.keys);
            check(e.mode.equals(m.getUserProperty("mode")), name + ": " + pid + " mode " + m.getUserProperty("mode"));
            check(m.getMsgId() != null && !m.getMsgId().isEmpty(), name + ": " + pid + " has no msgId");
            check(m.getStoreTimestamp() >= m.getBornTimestamp() - 5_000, name + ": " + pid + " store time before born time");
        }

        boolean complete() {
            return counts.keySet().containsAll(expected.keySet());
        }

        /** Every expected message exactly once, nothing else. */
        void verifyExactlyOnce() {
            Set<String> missing = new TreeSet<>(expected.keySet());
            missing.removeAll(counts.keySet());
            check(missing.isEmpty(), name + ": " + missing.size() + " messages never arrived: " + missing);
            counts.forEach((pid, n) -> check(n.get() == 1, name + ": " + pid + " delivered " + n.get() + " times"));
            System.out.println(name + ": received " + counts.size() + "/" + expected.size() + " from queues " + new TreeSet<>(queues));
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            fail(what);
        }
    }

    static void fail(String what) {
        failures.add(what);
        System.err.println("FAIL: " + what);
    }

    /** What makes this run's topic and group names its own (`-Dpetrel.stamp`, else the time). */
    static String stamp() {
        return System.getProperty("petrel.stamp", Long.toString(System.currentTimeMillis() % 100_000_000));
    }

    /** A started admin client. */
    static DefaultMQAdminExt admin(String ns, String instance) throws Exception {
        // Signed as -Dpetrel.ak / -Dpetrel.sk say, for a broker with ACL 2.0 on.
        String ak = System.getProperty("petrel.ak");
        String sk = System.getProperty("petrel.sk");
        DefaultMQAdminExt admin = ak != null && sk != null ? new DefaultMQAdminExt(signer(ak, sk)) : new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName(instance);
        admin.start();
        return admin;
    }

    static void waitFor(String what, Supplier<Boolean> done) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!done.get()) {
            if (System.currentTimeMillis() > deadline) {
                fail("timed out waiting for " + what);
                return;
            }
            Thread.sleep(100);
        }
    }

    /**
     * Waits until a new push consumer pulls from its retry topic. Its first heartbeat creates that
     * topic, after the client looked up its routes; a client rebalances a clustering group every
     * 20 s and does not retry sooner for a retry topic it has no route for (RebalanceImpl), so
     * without this a message sent back at once could come back 20 s late, on RocketMQ as here.
     */
    static void holdRetryQueue(DefaultMQPushConsumer c) throws InterruptedException {
        var impl = c.getDefaultMQPushConsumerImpl();
        waitFor("the retry topic's route", () -> impl.getRebalanceImpl().getTopicSubscribeInfoTable().keySet().stream()
            .anyMatch(t -> t.startsWith("%RETRY%")));
        impl.getmQClientFactory().rebalanceImmediately();
        waitFor("the retry queue in the consumer's rebalance", () -> impl.getRebalanceImpl().getProcessQueueTable().keySet().stream()
            .anyMatch(mq -> mq.getTopic().startsWith("%RETRY%")));
    }

    /** A producer of {@code group} that has created {@code topic} with one warm-up message (tag W). */
    static DefaultMQProducer warmedProducer(String ns, String group, String topic) throws Exception {
        DefaultMQProducer p = producer(ns, group);
        p.send(new Message(topic, "W", "warmup", "creates the topic".getBytes(StandardCharsets.UTF_8)));
        return p;
    }

    /** A push consumer of {@code group} on all of {@code topic} from its first offset, not started. */
    static DefaultMQPushConsumer pushConsumer(String ns, String group, String instance, String topic) throws Exception {
        return pushConsumer(ns, group, instance, topic, "*");
    }

    /** A push consumer of {@code group} on {@code topic}'s {@code expression} from its first offset, not started. */
    static DefaultMQPushConsumer pushConsumer(String ns, String group, String instance, String topic, String expression)
            throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, expression);
        return c;
    }

    static Message message(String topic, Expected e) {
        Message m = new Message(topic, e.tag, e.keys, e.body.getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("pid", e.pid);
        m.putUserProperty("mode", e.mode);
        return m;
    }

    static Expected expect(String mode, int i) {
        String tag = new String[] {"A", "B", "C"}[i % 3];
        StringBuilder body = new StringBuilder(mode + " body " + i + " ");
        for (int k = 0; k < i % 7; k++) {
            body.append("\u00e9\u6d88\u606f"); // multi-byte text survives the round trip
        }
        return new Expected(mode + "-" + i, tag, "key-" + mode + "-" + i, body.toString(), mode);
    }

    static DefaultMQProducer producer(String ns, String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.setDefaultTopicQueueNums(8);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer pushConsumer(String ns, String group, String instance, String topic, String expression,
            Received into) throws Exception {
        DefaultMQPushConsumer c = pushConsumer(ns, group, instance, topic, expression);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(into::accept);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        return c;
    }

    /** Sends with all four modes; returns what was acknowledged (oneway: what was handed over). */
    static Map<String, Expected> produceAllModes(DefaultMQProducer p, String topic) throws Exception {
        Map<String, Expected> sent = new ConcurrentHashMap<>();
        for (int i = 0; i < 30; i++) {
            Expected e = expect("sync", i);
            SendResult r = p.send(message(topic, e));
            check(r.getSendStatus() == SendStatus.SEND_OK, "sync send " + i + ": " + r);
            check(r.getOffsetMsgId() != null && r.getOffsetMsgId().length() == 32, "sync send " + i + " offsetMsgId " + r.getOffsetMsgId());
            sent.put(e.pid, e);
        }
        int asyncCount = 20;
        CountDownLatch acked = new CountDownLatch(asyncCount);
        for (int i = 0; i < asyncCount; i++) {
            Expected e = expect("async", i);
            p.send(message(topic, e), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    check(r.getSendStatus() == SendStatus.SEND_OK, "async send " + e.pid + ": " + r);
                    sent.put(e.pid, e);
                    acked.countDown();
                }

                @Override
                public void onException(Throwable t) {
                    fail("async send " + e.pid + ": " + t);
                    acked.countDown();
                }
            });
        }
        check(acked.await(30, TimeUnit.SECONDS), "async sends acknowledged within 30 s");
        for (int i = 0; i < 10; i++) {
            Expected e = expect("oneway", i);
            p.sendOneway(message(topic, e));
            sent.put(e.pid, e);
        }
        for (int b = 0; b < 2; b++) {
            List<Message> batch = new ArrayList<>();
            List<Expected> items = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                Expected e = expect("batch", b * 10 + i);
                batch.add(message(topic, e));
                items.add(e);
            }
            SendResult r = p.send(batch);
            check(r.getSendStatus() == SendStatus.SEND_OK, "batch send " + b + ": " + r);
            check(r.getMsgId().split(",").length == 10, "batch send " + b + " has 10 ids: " + r.getMsgId());
            items.forEach(e -> sent.put(e.pid, e));
        }
        return sent;
    }

    static Map<String, Expected> only(Map<String, Expected> all, Set<String> tags) {
        Map<String, Expected> out = new HashMap<>();
        all.forEach((k, v) -> {
            if (tags.contains(v.tag)) {
                out.put(k, v);
            }
        });
        return out;
    }

    static void basic(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelJava" + stamp;
        DefaultMQProducer p = producer(ns, "pg_java_" + stamp);
        Map<String, Expected> sent = produceAllModes(p, topic);
        System.out.println("basic: sent " + sent.size() + " messages (30 sync, 20 async, 10 oneway, 2 batches of 10) to " + topic);

        // Push consumer with a tag expression: exactly the A and B messages.
        Received ab = new Received("push A || B", only(sent, Set.of("A", "B")));
        DefaultMQPushConsumer push = pushConsumer(ns, "cg_push_" + stamp, "push", topic, "A || B", ab);
        waitFor("push consumer to receive every A and B message", ab::complete);
        Thread.sleep(2_000); // a C message or a duplicate would show up now
        push.shutdown();
        ab.verifyExactlyOnce();

        // Lite pull consumer: everything.
        Received lite = new Received("lite pull *", sent);
        litePullAll(ns, "cg_lite_" + stamp, topic, lite);
        lite.verifyExactlyOnce();

        // Two push consumers in one group split the 8 queues of a topic.
        String splitTopic = "PetrelSplit" + stamp;
        p.send(message(splitTopic, new Expected("warmup", "W", "warmup", "creates the topic", "warmup")));
        Map<String, Expected> splitSent = new ConcurrentHashMap<>();
        Map<String, Expected> splitExpected = new ConcurrentHashMap<>();
        splitExpected.put("warmup", new Expected("warmup", "W", "warmup", "creates the topic", "warmup"));
        Received one = new Received("split consumer 1", splitExpected);
        Received two = new Received("split consumer 2", splitExpected);
        String splitGroup = "cg_split_" + stamp;
        DefaultMQPushConsumer c1 = pushConsumer(ns, splitGroup, "split1", splitTopic, "*", one);
        DefaultMQPushConsumer c2 = pushConsumer(ns, splitGroup, "split2", splitTopic, "*", two);
        waitFor("both consumers to own 4 queues each", () -> assigned(c1, splitTopic) == 4 && assigned(c2, splitTopic) == 4);
        System.out.println("split: queues owned " + owned(c1) + " and " + owned(c2) + " (ids seen by the broker: "
                + c1.getDefaultMQPushConsumerImpl().getmQClientFactory().findConsumerIdList(splitTopic, splitGroup) + ")");
        for (int i = 0; i < 80; i++) {
            Expected e = expect("split", i);
            splitExpected.put(e.pid, e);
            SendResult r = p.send(message(splitTopic, e));
            check(r.getSendStatus() == SendStatus.SEND_OK, "split send " + i);
            splitSent.put(e.pid, e);
        }
        waitFor("the group to receive all 81 messages", () -> union(one, two).containsAll(splitExpected.keySet()));
        Thread.sleep(2_000);
        c1.shutdown();
        c2.shutdown();
        p.shutdown();
        Set<String> both = new HashSet<>(one.counts.keySet());
        both.retainAll(two.counts.keySet());
        check(both.isEmpty(), "split: " + both.size() + " messages went to both consumers: " + both);
        Set<Integer> sharedQueues = new HashSet<>(one.queues);
        sharedQueues.retainAll(two.queues);
        check(sharedQueues.isEmpty(), "split: queues consumed by both: " + sharedQueues);
        check(!one.counts.isEmpty() && !two.counts.isEmpty(), "split: each consumer got messages: " + one.counts.size() + "/" + two.counts.size());
        System.out.println("split: consumer 1 got " + one.counts.size() + " from queues " + new TreeSet<>(one.queues)
                + ", consumer 2 got " + two.counts.size() + " from queues " + new TreeSet<>(two.queues));
    }

    /** Queues of {@code topic} the consumer owns now (its %RETRY% topic's queue is not counted). */
    /** A lite pull consumer of a new group reads {@code topic} from the start into {@code into}. */
    static void litePullAll(String ns, String group, String topic, Received into) throws Exception {
        DefaultLitePullConsumer pull = new DefaultLitePullConsumer(group);
        pull.setNamesrvAddr(ns);
        pull.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pull.subscribe(topic, "*");
        pull.start();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!into.complete() && System.currentTimeMillis() < deadline) {
            pull.poll(1_000).forEach(into::accept);
        }
        pull.poll(1_000).forEach(into::accept); // a duplicate would show up now
        pull.shutdown();
    }

    static int assigned(DefaultMQPushConsumer c, String topic) {
        return (int) c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet().stream()
                .filter(mq -> mq.getTopic().equals(topic)).count();
    }

    static String owned(DefaultMQPushConsumer c) {
        StringBuilder out = new StringBuilder();
        c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) ->
                out.append(mq.getTopic()).append(':').append(mq.getQueueId()).append(pq.isDropped() ? "(dropped)" : "").append(' '));
        return "[" + out.toString().trim() + "]";
    }

    static Set<String> union(Received a, Received b) {
        Set<String> s = new HashSet<>(a.counts.keySet());
        s.addAll(b.counts.keySet());
        return s;
    }

    static void restart(String ns, Path dir) throws Exception {
        String stamp = Long.toString(System.currentTimeMillis() % 100_000_000);
        String topic = "PetrelRestart" + stamp;
        String group = "cg_restart_" + stamp;
        DefaultMQProducer p = producer(ns, "pg_restart_" + stamp);
        Map<String, Expected> before = new HashMap<>();
        for (int i = 0; i < 100; i++) {
            Expected e = expect("before", i);
            check(p.send(message(topic, e)).getSendStatus() == SendStatus.SEND_OK, "send before " + i);
            before.put(e.pid, e);
        }
        Received first = new Received("before restart", before);
        DefaultMQPushConsumer c = pushConsumer(ns, group, "restart1", topic, "*", first);
        waitFor("all 100 messages before the restart", first::complete);
        // The listener has seen every message, but the client moves a queue's offset only after
        // the consume task returns, and its shutdown does not wait for those tasks
        // (awaitTerminationMillisWhenShutdown = 0): without this pause a queue whose last task is
        // still running commits an older offset, and its messages come again — the client's
        // at-least-once, not the broker's doing.
        Thread.sleep(1_000);
        c.shutdown(); // commits the consumed offsets
        first.verifyExactlyOnce();

        Files.createFile(dir.resolve("ready"));
        System.out.println("restart: waiting for the broker to restart");
        long deadline = System.currentTimeMillis() + 120_000;
        while (!Files.exists(dir.resolve("restarted"))) {
            if (System.currentTimeMillis() > deadline) {
                fail("the broker was not restarted within 120 s");
                return;
            }
            Thread.sleep(100);
        }

        // The same producer instance reconnects by itself.
        Map<String, Expected> after = new HashMap<>();
        for (int i = 0; i < 100; i++) {
            Expected e = expect("after", i);
            SendResult r = null;
            for (int attempt = 0; attempt < 30 && r == null; attempt++) {
                try {
                    r = p.send(message(topic, e));
                } catch (Exception ex) {
                    Thread.sleep(500);
                }
            }
            check(r != null && r.getSendStatus() == SendStatus.SEND_OK, "send after restart " + i + ": " + r);
            after.put(e.pid, e);
        }
        Received second = new Received("after restart, same group", after);
        DefaultMQPushConsumer c2 = pushConsumer(ns, group, "restart2", topic, "*", second);
        waitFor("the 100 new messages after the restart", second::complete);
        Thread.sleep(3_000); // a redelivered old message would show up now
        c2.shutdown();
        second.verifyExactlyOnce(); // an old message here is an "unexpected message" failure

        Map<String, Expected> all = new HashMap<>(before);
        all.putAll(after);
        Received everything = new Received("restart: new group reads all 200", all);
        litePullAll(ns, "cg_restart_all_" + stamp, topic, everything);
        p.shutdown();
        everything.verifyExactlyOnce();
    }

    /**
     * Sends synchronously without pause until the file {@code DIR/stop} appears, while the
     * driver kills brokers; then every SEND_OK message must reach the push consumer (at least
     * once: a failover may redeliver what was consumed after the last offset commit). Writes
     * {@code DIR/result} and prints the longest time between two SEND_OKs.
     */
    static void failover(String ns, Path dir) throws Exception {
        String stamp = Long.toString(System.currentTimeMillis() % 100_000_000);
        String topic = "PetrelFailover" + stamp;
        DefaultMQProducer p = new DefaultMQProducer("pg_failover_" + stamp);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(3_000);
        // Routes are polled, not pushed: a short poll lets the client find the new master soon.
        p.setPollNameServerInterval(1_000);
        p.start();
        Map<String, Expected> acked = new ConcurrentHashMap<>();
        Received got = new Received("failover consumer", acked);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_failover_" + stamp);
        c.setNamesrvAddr(ns);
        c.setPollNameServerInterval(1_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> {
                String pid = m.getUserProperty("pid");
                got.counts.computeIfAbsent(String.valueOf(pid), k -> new AtomicInteger()).incrementAndGet();
            });
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long lastOk = System.currentTimeMillis();
        long longestGap = 0;
        int refused = 0;
        String lastHost = "";
        for (int i = 0; !Files.exists(dir.resolve("stop")); i++) {
            Expected e = expect("failover", i);
            try {
                SendResult r = p.send(message(topic, e));
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    acked.put(e.pid, e);
                    long now = System.currentTimeMillis();
                    // The offset message id starts with the storing broker's address.
                    String host = r.getOffsetMsgId().substring(0, 16);
                    if (!host.equals(lastHost)) {
                        System.out.println("failover: SEND_OK from " + host + " at " + now + " (previous " + (now - lastOk) + " ms before)");
                        lastHost = host;
                    }
                    longestGap = Math.max(longestGap, now - lastOk);
                    lastOk = now;
                } else {
                    refused++;
                }
            } catch (Exception ex) {
                refused++;
                if (refused % 20 == 1) {
                    System.out.println("failover: send failed at " + System.currentTimeMillis() + ": " + ex);
                }
                Thread.sleep(20);
            }
        }
        waitFor("every acknowledged message consumed", got::complete);
        Thread.sleep(1_000);
        c.shutdown();
        p.shutdown();
        Set<String> missing = new TreeSet<>(acked.keySet());
        missing.removeAll(got.counts.keySet());
        long redelivered = got.counts.values().stream().filter(n -> n.get() > 1).count();
        check(missing.isEmpty(), missing.size() + " acknowledged messages never consumed: " + missing);
        String summary = "acknowledged " + acked.size() + ", consumed " + got.counts.size() + " distinct (" + redelivered
            + " more than once), lost " + missing.size() + ", sends not acknowledged " + refused
            + ", longest time between two SEND_OKs " + longestGap + " ms";
        System.out.println("failover: " + summary);
        Files.write(dir.resolve("result"), summary.getBytes(StandardCharsets.UTF_8));
    }

    static void writeLines(Path file, Iterable<String> lines) throws Exception {
        Files.write(file, String.join("\n", lines).getBytes(StandardCharsets.UTF_8));
    }

    static Set<String> readLines(Path file) throws Exception {
        Set<String> out = new TreeSet<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                out.add(line.trim());
            }
        }
        return out;
    }

    /** At most the first 10 of {@code all}, for a failure message. */
    static List<String> firstOf(Set<String> all) {
        return all.stream().limit(10).collect(java.util.stream.Collectors.toList());
    }

    static void waitForFile(Path file, long ms) throws Exception {
        long deadline = System.currentTimeMillis() + ms;
        while (!Files.exists(file)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no " + file + " within " + ms + " ms");
            }
            Thread.sleep(50);
        }
    }

    /**
     * The read half of "consumed, then lost in a failover" (scripts/interop-consumed.sh). Creates
     * the topic with one acknowledged message, says {@code DIR/ready}, waits for
     * {@code DIR/stopped} (the driver has SIGSTOPped the slave), then sends 512 messages
     * asynchronously while a push consumer reads the topic from its first offset for 6 s. Writes
     * what the consumer was given to {@code DIR/consumed} and what was SEND_OK to
     * {@code DIR/acked}.
     */
    static void consumedRead(String ns, Path dir) throws Exception {
        String stamp = stamp();
        String topic = "PetrelConsumed" + stamp;
        DefaultMQProducer p = producer(ns, "pg_consumed_" + stamp);
        SendResult first = p.send(message(topic, expect("warm", 0)));
        check(first.getSendStatus() == SendStatus.SEND_OK, "consumed: the first send: " + first);
        Files.write(dir.resolve("topic"), topic.getBytes(StandardCharsets.UTF_8));
        Files.createFile(dir.resolve("ready"));
        waitForFile(dir.resolve("stopped"), 60_000);
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = pushConsumer(ns, "cg_consumed_" + stamp, "consumed-read", topic);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> consumed.add(m.getUserProperty("pid")));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long until = System.currentTimeMillis() + 6_000;
        Set<String> acked = ConcurrentHashMap.newKeySet();
        acked.add("warm-0");
        int count = 512;
        CountDownLatch answered = new CountDownLatch(count);
        for (int i = 0; i < count; i++) {
            Expected e = expect("consumed", i);
            p.send(message(topic, e), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        acked.add(e.pid);
                    }
                    answered.countDown();
                }

                @Override
                public void onException(Throwable t) {
                    answered.countDown();
                }
            });
        }
        answered.await(30, TimeUnit.SECONDS);
        Thread.sleep(Math.max(0, until - System.currentTimeMillis()));
        // Written before the clients shut down (a push consumer's shutdown waits for its held
        // pulls): the driver kills the master as soon as they are there.
        Set<String> given = new TreeSet<>(consumed);
        writeLines(dir.resolve("consumed"), given);
        writeLines(dir.resolve("acked"), acked);
        // The summary is printed (System.out flushes on println) before "read" exists: the driver
        // reads it as soon as it sees the file.
        System.out.println("consumed: sent " + (count + 1) + ", SEND_OK " + acked.size() + ", given to the consumer " + given.size());
        Files.createFile(dir.resolve("read"));
        c.shutdown();
        p.shutdown();
    }

    /**
     * The check after the failover: a new group reads the topic from its first offset on
     * whichever broker is master now, after 20 new messages; every message the first consumer
     * was given must be there ("consumed, then lost" is 0), and with {@code strict} every SEND_OK
     * one too. The 20 new ones must arrive: the new master serves.
     */
    static void consumedVerify(String ns, Path dir, boolean strict) throws Exception {
        String topic = new String(Files.readAllBytes(dir.resolve("topic")), StandardCharsets.UTF_8).trim();
        Set<String> consumed = readLines(dir.resolve("consumed"));
        Set<String> acked = readLines(dir.resolve("acked"));
        DefaultMQProducer p = new DefaultMQProducer("pg_consumed_after_" + stamp());
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(5_000);
        p.start();
        Set<String> fresh = new TreeSet<>();
        for (int i = 0; i < 20; i++) {
            Expected e = expect("after", i);
            for (int attempt = 0; attempt < 60; attempt++) {
                try {
                    if (p.send(message(topic, e)).getSendStatus() == SendStatus.SEND_OK) {
                        fresh.add(e.pid);
                        break;
                    }
                } catch (Exception ex) {
                    Thread.sleep(500);
                }
            }
        }
        check(fresh.size() == 20, "consumed: only " + fresh.size() + " of 20 sends to the new master were SEND_OK");
        Set<String> stored = ConcurrentHashMap.newKeySet();
        DefaultLitePullConsumer pull = new DefaultLitePullConsumer("cg_consumed_check_" + stamp());
        pull.setNamesrvAddr(ns);
        pull.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pull.subscribe(topic, "*");
        pull.start();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        long lastNew = System.currentTimeMillis();
        while (System.currentTimeMillis() < deadline && (!stored.containsAll(fresh) || System.currentTimeMillis() - lastNew < 3_000)) {
            for (MessageExt m : pull.poll(500)) {
                if (stored.add(m.getUserProperty("pid"))) {
                    lastNew = System.currentTimeMillis();
                }
            }
        }
        pull.shutdown();
        p.shutdown();
        Set<String> consumedLost = new TreeSet<>(consumed);
        consumedLost.removeAll(stored);
        Set<String> ackedLost = new TreeSet<>(acked);
        ackedLost.removeAll(stored);
        check(stored.containsAll(fresh), "consumed: the new master does not serve what it acknowledged after the failover");
        check(consumedLost.isEmpty(), "consumed: " + consumedLost.size() + " of the " + consumed.size()
            + " messages the consumer was given are gone after the failover, e.g. " + firstOf(consumedLost));
        if (strict) {
            check(ackedLost.isEmpty(), "consumed: " + ackedLost.size() + " acknowledged messages are gone after the failover, e.g. "
                + firstOf(ackedLost));
        }
        System.out.println("consumed: after the failover the new master holds " + stored.size() + "; consumed then lost "
            + consumedLost.size() + " of " + consumed.size() + "; acknowledged then lost " + ackedLost.size() + " of " + acked.size());
    }

    /** What orderly consumers saw: each order's steps in arrival order, and who consumed which queue. */
    static final class OrderlyLog {
        final Map<Integer, List<Integer>> steps = new ConcurrentHashMap<>();
        final Map<String, Set<Integer>> queuesBy = new ConcurrentHashMap<>();
        final Map<Integer, AtomicInteger> inFlight = new ConcurrentHashMap<>();
        final AtomicInteger maxInFlight = new AtomicInteger();
        final AtomicInteger total = new AtomicInteger();

        void accept(String consumer, MessageExt m) {
            if (m.getUserProperty("order") == null) {
                return; // the message that created the topic
            }
            AtomicInteger here = inFlight.computeIfAbsent(m.getQueueId(), q -> new AtomicInteger());
            maxInFlight.accumulateAndGet(here.incrementAndGet(), Math::max);
            try {
                Thread.sleep(1); // long enough for a second consumer of this queue to overlap
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            int order = Integer.parseInt(m.getUserProperty("order"));
            steps.computeIfAbsent(order, o -> Collections.synchronizedList(new ArrayList<>()))
                    .add(Integer.parseInt(m.getUserProperty("step")));
            queuesBy.computeIfAbsent(consumer, c -> ConcurrentHashMap.newKeySet()).add(m.getQueueId());
            total.incrementAndGet();
            here.decrementAndGet();
        }

        /** Every order holds exactly steps 0 .. count-1, in that order. */
        void verify(int orders, int count, String when) {
            for (int o = 0; o < orders; o++) {
                List<Integer> want = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    want.add(i);
                }
                List<Integer> got = steps.getOrDefault(o, List.of());
                synchronized (got) {
                    check(want.equals(got), when + ": order " + o + " arrived as " + got);
                }
            }
            check(maxInFlight.get() == 1, when + ": a queue was consumed by two consumers at once");
        }
    }

    static DefaultMQPushConsumer orderlyConsumer(String ns, String group, String name, String topic, OrderlyLog log) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(name);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            msgs.forEach(m -> log.accept(name, m));
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        return c;
    }

    /** The consumer owns {@code count} queues of {@code topic} and holds the broker's lock on each. */
    static boolean ownsLocked(DefaultMQPushConsumer c, String topic, int count) {
        long[] locked = {0};
        c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) -> {
            if (mq.getTopic().equals(topic) && pq.isLocked() && !pq.isDropped()) {
                locked[0]++;
            }
        });
        return assigned(c, topic) == count && locked[0] == count;
    }

    static void sendSteps(DefaultMQProducer p, String topic, int orders, int from, int to) throws Exception {
        for (int step = from; step < to; step++) {
            for (int order = 0; order < orders; order++) {
                Message m = new Message(topic, "O", "order-" + order, ("order " + order + " step " + step).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("order", Integer.toString(order));
                m.putUserProperty("step", Integer.toString(step));
                SendResult r = p.send(m, (List<MessageQueue> mqs, Message msg, Object arg) -> mqs.get((Integer) arg % mqs.size()), order);
                check(r.getSendStatus() == SendStatus.SEND_OK, "orderly send " + order + "/" + step + ": " + r);
                check(r.getMessageQueue().getQueueId() == order % 8, "order " + order + " went to queue " + r.getMessageQueue().getQueueId());
            }
        }
    }

    static void orderly(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelOrderly" + stamp;
        String group = "cg_orderly_" + stamp;
        int orders = 16;
        DefaultMQProducer p = warmedProducer(ns, "pg_orderly_" + stamp, topic);
        OrderlyLog log = new OrderlyLog();
        DefaultMQPushConsumer c1 = orderlyConsumer(ns, group, "orderly1", topic, log);
        DefaultMQPushConsumer c2 = orderlyConsumer(ns, group, "orderly2", topic, log);
        waitFor("both orderly consumers to lock 4 queues each", () -> ownsLocked(c1, topic, 4) && ownsLocked(c2, topic, 4));
        System.out.println("orderly: locked " + owned(c1) + " and " + owned(c2));
        sendSteps(p, topic, orders, 0, 25);
        waitFor("the group to consume 16 orders of 25 steps", () -> log.total.get() >= orders * 25);
        Thread.sleep(2_000); // a duplicate would show up now
        log.verify(orders, 25, "two consumers");
        Set<Integer> shared = new HashSet<>(log.queuesBy.getOrDefault("orderly1", Set.of()));
        shared.retainAll(log.queuesBy.getOrDefault("orderly2", Set.of()));
        check(shared.isEmpty(), "orderly: queues consumed by both consumers: " + shared);
        check(log.queuesBy.size() == 2, "orderly: both consumers consumed: " + log.queuesBy.keySet());
        System.out.println("orderly: consumer 1 took queues " + new TreeSet<>(log.queuesBy.getOrDefault("orderly1", Set.of()))
                + ", consumer 2 took " + new TreeSet<>(log.queuesBy.getOrDefault("orderly2", Set.of())));

        // One member leaves (it unlocks its queues); the other locks all eight and goes on in order.
        c1.shutdown();
        waitFor("the remaining consumer to lock all 8 queues", () -> ownsLocked(c2, topic, 8));
        sendSteps(p, topic, orders, 25, 50);
        waitFor("the remaining consumer to consume 25 more steps of each order", () -> log.total.get() >= orders * 50);
        Thread.sleep(2_000);
        log.verify(orders, 50, "after a consumer left");
        System.out.println("orderly: after consumer 1 left, consumer 2 locked " + owned(c2) + "; " + log.total.get() + " messages in order");
        c2.shutdown();
        p.shutdown();
    }

    /** One delivery to the delayed scenario's listener. */
    static final class Delivery {
        final String msgId, topic, body, keys, kind;
        final int reconsumeTimes;
        final long bornMs, storeMs, arrivedMs;

        Delivery(MessageExt m) {
            msgId = m.getMsgId();
            topic = m.getTopic();
            body = new String(m.getBody(), StandardCharsets.UTF_8);
            keys = m.getKeys();
            kind = m.getUserProperty("kind");
            reconsumeTimes = m.getReconsumeTimes();
            bornMs = m.getBornTimestamp();
            storeMs = m.getStoreTimestamp();
            arrivedMs = System.currentTimeMillis();
        }
    }

    static void delayed(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelDelayed" + stamp;
        String group = "cg_delayed_" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_delayed_" + stamp, topic);
        Map<String, List<Delivery>> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName("delayed");
        c.setMaxReconsumeTimes(1);
        // The client looks up its retry topic's route before its first heartbeat creates the topic,
        // and then only every pollNameServerInterval (30 s by default, on RocketMQ as here).
        c.setPollNameServerInterval(1_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            boolean later = false;
            for (MessageExt m : msgs) {
                if (m.getUserProperty("kind") == null) {
                    continue;
                }
                Delivery d = new Delivery(m);
                seen.computeIfAbsent(d.body, b -> Collections.synchronizedList(new ArrayList<>())).add(d);
                later |= d.kind.equals("dead") || (d.kind.equals("retry") && d.reconsumeTimes == 0);
            }
            return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.setConsumeMessageBatchMaxSize(1);
        c.start();
        holdRetryQueue(c);
        Map<String, String> sentIds = new HashMap<>();
        for (String kind : new String[] {"delay", "retry", "dead"}) {
            for (int i = 0; i < 4; i++) {
                Message m = new Message(topic, "T" + kind, kind + "-key-" + i, (kind + "-" + i).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("kind", kind);
                if (kind.equals("delay")) {
                    m.setDelayTimeLevel(2);
                }
                SendResult r = p.send(m);
                check(r.getSendStatus() == SendStatus.SEND_OK, "delayed: send " + kind + "-" + i + ": " + r);
                sentIds.put(kind + "-" + i, r.getMsgId());
            }
        }
        waitFor("every delivery of the delayed scenario", () -> {
            int delays = 0, retries = 0, deads = 0;
            for (List<Delivery> ds : seen.values()) {
                synchronized (ds) {
                    String kind = ds.get(0).kind;
                    if (kind.equals("delay")) delays += ds.size();
                    if (kind.equals("retry")) retries += ds.size();
                    if (kind.equals("dead")) deads += ds.size();
                }
            }
            return delays >= 4 && retries >= 8 && deads >= 8;
        });
        Thread.sleep(3_000); // an extra delivery would show up now
        checkDelayed(seen, sentIds, topic);
        List<String> dead = readDeadLetters(ns, group, stamp, 4);
        Collections.sort(dead);
        check(dead.equals(List.of("dead-0", "dead-1", "dead-2", "dead-3")), "delayed: the dead-letter queue holds " + dead);
        System.out.println("delayed: 4 delayed, 4 retried once, 4 in %DLQ%" + group);
        c.shutdown();
        p.shutdown();
    }

    static void timer(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelTimer" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_timer_" + stamp, topic);
        Map<String, List<Delivery>> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = pushConsumer(ns, "cg_timer_" + stamp, "timer", topic);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (m.getUserProperty("kind") != null) {
                    Delivery d = new Delivery(m);
                    seen.computeIfAbsent(d.body, b -> Collections.synchronizedList(new ArrayList<>())).add(d);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        // body -> the time it is due; sent in an order unlike that of their times, on one queue.
        Map<String, Long> dueMs = new HashMap<>();
        Map<String, String> sentIds = new HashMap<>();
        MessageQueue queue = p.fetchPublishMessageQueues(topic).get(0);
        long[][] plan = {{0, 5_000}, {1, 2}, {2, 1_500}, {0, 3_000}, {1, 4}, {2, 2_500}, {0, -60_000}};
        for (int i = 0; i < plan.length; i++) {
            String body = "timer-" + i;
            Message m = new Message(topic, "T", "timer-key-" + i, body.getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("kind", "timer");
            long now = System.currentTimeMillis();
            long amount = plan[i][1];
            if (plan[i][0] == 0) {
                m.setDeliverTimeMs(now + amount);
                dueMs.put(body, now + amount);
            } else if (plan[i][0] == 1) {
                m.setDelayTimeSec(amount);
                dueMs.put(body, now + amount * 1_000);
            } else {
                m.setDelayTimeMs(amount);
                dueMs.put(body, now + amount);
            }
            SendResult r = p.send(m, queue);
            check(r.getSendStatus() == SendStatus.SEND_OK, "timer: send " + body + ": " + r);
            sentIds.put(body, r.getMsgId());
        }
        Message tooFar = new Message(topic, "T", "too-far", "x".getBytes(StandardCharsets.UTF_8));
        tooFar.setDelayTimeSec(3 * 24 * 3600 + 60);
        try {
            p.send(tooFar, queue);
            fail("timer: a send due after timerMaxDelaySec was accepted");
        } catch (MQBrokerException e) {
            check(e.getResponseCode() == 13, "timer: a send due too late got " + e.getResponseCode() + " " + e.getErrorMessage());
        }
        waitFor("every timer message", () -> seen.keySet().containsAll(dueMs.keySet()));
        Thread.sleep(2_000); // an extra delivery would show up now
        List<Delivery> inStoreOrder = new ArrayList<>();
        for (String body : new TreeSet<>(dueMs.keySet())) {
            List<Delivery> d = seen.get(body);
            check(d.size() == 1, "timer: " + body + " delivered " + d.size() + " times");
            Delivery first = d.get(0);
            inStoreOrder.add(first);
            long due = Math.max(dueMs.get(body), first.bornMs);
            check(first.storeMs >= due, "timer: " + body + " stored in its queue " + (due - first.storeMs) + " ms before its time");
            check(first.storeMs < due + 1_000, "timer: " + body + " stored in its queue " + (first.storeMs - due) + " ms after its time");
            check(first.arrivedMs < due + 3_000, "timer: " + body + " arrived " + (first.arrivedMs - due) + " ms after its time");
            check(first.msgId.equals(sentIds.get(body)), "timer: " + body + " changed its id");
            check(first.keys.equals("timer-key-" + body.substring(6)), "timer: " + body + " keys " + first.keys);
        }
        inStoreOrder.sort((a, b) -> Long.compare(a.storeMs, b.storeMs));
        List<String> order = new ArrayList<>();
        inStoreOrder.forEach(d -> order.add(d.body));
        List<String> byDue = new ArrayList<>(dueMs.keySet());
        byDue.sort((a, b) -> Long.compare(dueMs.get(a), dueMs.get(b)));
        check(order.equals(byDue), "timer: stored in the order " + order + ", due in the order " + byDue);
        System.out.println("timer: " + dueMs.size() + " timer messages, each once, in the order of their times " + order);
        c.shutdown();
        p.shutdown();
    }

    @SuppressWarnings("deprecation")
    static void query(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelQuery" + stamp;
        DefaultMQProducer p = producer(ns, "pg_query_" + stamp);
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            String key = (i % 3 == 0 ? "wanted-" : "other-") + stamp;
            Message m = new Message(topic, "Q", key + " n-" + i, ("query-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = p.send(m);
            check(r.getSendStatus() == SendStatus.SEND_OK, "query: send " + i + ": " + r);
            ids.add(r.getMsgId());
        }
        List<String> bodies = new ArrayList<>();
        waitFor("messages found by key", () -> {
            try {
                bodies.clear();
                for (MessageExt m : p.queryMessage(topic, "wanted-" + stamp, 32, 0, Long.MAX_VALUE).getMessageList()) {
                    bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
                return bodies.size() >= 2;
            } catch (Exception e) {
                return false; // not indexed yet: "query message by key finished, but no message."
            }
        });
        Collections.sort(bodies);
        check(bodies.equals(List.of("query-0", "query-3")), "query: by key found " + bodies);
        for (int i = 0; i < ids.size(); i++) {
            // The index is built behind the sends: a message not indexed yet is "no message".
            String id = ids.get(i);
            MessageExt[] viewed = new MessageExt[1];
            waitFor("message " + id + " by id", () -> {
                try {
                    viewed[0] = p.viewMessage(topic, id);
                    return viewed[0] != null;
                } catch (Exception e) {
                    return false;
                }
            });
            MessageExt m = viewed[0];
            check(m != null && new String(m.getBody(), StandardCharsets.UTF_8).equals("query-" + i), "query: viewMessage " + ids.get(i) + " found " + m);
            check(m != null && m.getKeys().endsWith("n-" + i), "query: viewMessage " + i + " keys " + (m == null ? null : m.getKeys()));
        }
        try {
            int n = p.queryMessage(topic, "unknown-" + stamp, 32, 0, Long.MAX_VALUE).getMessageList().size();
            check(n == 0, "query: an unknown key found " + n);
        } catch (MQClientException e) {
            check(e.getResponseCode() == 208 || e.getErrorMessage().contains("no message"), "query: an unknown key: " + e);
        }
        System.out.println("query: by key " + bodies + ", each of " + ids.size() + " by id");
        p.shutdown();
    }

    /**
     * SQL92 selectors (the broker runs with enablePropertyFilter=true): a push consumer gets exactly
     * the messages its selector picks, by user properties and TAGS, with RocketMQ's precedence and
     * its rule that a missing property makes a comparison unknown (here OR'ed with a true one); a
     * selector that does not compile stops start() with SUBSCRIPTION_PARSE_FAILED (23).
     */
    static void sql(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelSql" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_sql_" + stamp, topic);
        String selector = "a BETWEEN 4 AND 13 AND TAGS IN ('TagA') AND region <> 'us' OR name STARTSWITH 'vip-'";
        Map<String, Expected> selected = new HashMap<>();
        List<Message> messages = new ArrayList<>();
        for (int i = 0; i <= 24; i++) {
            Expected e = new Expected("s" + i, i % 2 == 0 ? "TagA" : "TagB", "skey-" + i, "sql-" + i, "sync");
            Message m = message(topic, e);
            String name = i == 21 || i == 24 ? "vip-" + i : "n-" + i;
            m.putUserProperty("name", name);
            if (i < 24) { // the last one has neither property: a BETWEEN ... is unknown for it
                m.putUserProperty("a", Integer.toString(i));
                m.putUserProperty("region", i % 3 == 0 ? "us" : "eu");
            }
            boolean picked = (i >= 4 && i <= 13 && i % 2 == 0 && i % 3 != 0) || name.startsWith("vip-");
            if (picked) {
                selected.put(e.pid, e);
            }
            messages.add(m);
        }
        check(selected.keySet().equals(Set.of("s4", "s8", "s10", "s21", "s24")), "sql: the expected set is " + selected.keySet());
        Received got = new Received("sql consumer", selected);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_sql_" + stamp);
        c.setNamesrvAddr(ns);
        c.setInstanceName("sql");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, MessageSelector.bySql(selector));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(got::accept);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        for (Message m : messages) {
            SendResult r = p.send(m);
            check(r.getSendStatus() == SendStatus.SEND_OK, "sql: send " + m.getUserProperty("pid") + ": " + r);
        }
        waitFor("the selected messages", got::complete);
        Thread.sleep(3_000); // a message the selector does not pick would show up now
        got.verifyExactlyOnce();
        c.shutdown();

        DefaultMQPushConsumer bad = new DefaultMQPushConsumer("cg_sql_bad_" + stamp);
        bad.setNamesrvAddr(ns);
        bad.setInstanceName("sql-bad");
        bad.subscribe(topic, MessageSelector.bySql("a > "));
        bad.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            bad.start();
            fail("sql: a consumer with the selector 'a > ' started");
        } catch (MQClientException e) {
            check(e.getResponseCode() == 23, "sql: a selector that does not compile: " + e);
        } finally {
            bad.shutdown();
        }
        System.out.println("sql: " + selected.size() + " of " + messages.size() + " picked by " + selector);
        p.shutdown();
    }

    /**
     * A group's settings through the Java admin API (what mqadmin updateSubGroup sends): created
     * with consumption off, its consumer gets nothing; the retry topic its heartbeat creates has
     * the group's retryQueueNums; turned on, every message arrives once; deleted, it is gone.
     */
    static void groupConfig(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelGroupCfg" + stamp;
        String group = "cg_cfg_" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_cfg_" + stamp, topic);
        DefaultMQAdminExt admin = admin(ns, "cfg-admin");
        String addr = admin.examineTopicRouteInfo(topic).getBrokerDatas().get(0).selectBrokerAddr();
        SubscriptionGroupConfig cfg = new SubscriptionGroupConfig();
        cfg.setGroupName(group);
        cfg.setConsumeEnable(false);
        cfg.setRetryMaxTimes(2);
        cfg.setRetryQueueNums(2);
        admin.createAndUpdateSubscriptionGroupConfig(addr, cfg);
        SubscriptionGroupConfig read = admin.examineSubscriptionGroupConfig(addr, group);
        check(read.getRetryMaxTimes() == 2 && read.getRetryQueueNums() == 2 && !read.isConsumeEnable(),
            "groupconfig: read back " + read);
        Map<String, Expected> expected = new HashMap<>();
        for (int i = 0; i < 10; i++) {
            expected.put("c" + i, new Expected("c" + i, "TagC", "ckey-" + i, "cfg-" + i, "sync"));
        }
        Received got = new Received("groupconfig consumer", expected);
        DefaultMQPushConsumer c = pushConsumer(ns, group, "cfg", topic, "TagC", got);
        for (Expected e : expected.values()) {
            SendResult r = p.send(message(topic, e));
            check(r.getSendStatus() == SendStatus.SEND_OK, "groupconfig: send " + e.pid + ": " + r);
        }
        Thread.sleep(5_000);
        check(got.counts.isEmpty(), "groupconfig: " + got.counts.size() + " delivered while consumption was off");
        int retryQueues = admin.examineTopicConfig(addr, "%RETRY%" + group).getWriteQueueNums();
        check(retryQueues == 2, "groupconfig: the retry topic has " + retryQueues + " queues");
        cfg.setConsumeEnable(true);
        admin.createAndUpdateSubscriptionGroupConfig(addr, cfg);
        waitFor("the messages once consumption is on", got::complete);
        Thread.sleep(2_000);
        got.verifyExactlyOnce();
        c.shutdown();
        admin.deleteSubscriptionGroup(addr, group, true);
        // The admin API looks the group up in GET_ALL_SUBSCRIPTIONGROUP_CONFIG's table.
        check(admin.examineSubscriptionGroupConfig(addr, group) == null, "groupconfig: the deleted group is still there");
        System.out.println("groupconfig: consumption off held 10 messages back, on delivered them once; retry queues " + retryQueues);
        admin.shutdown();
        p.shutdown();
    }

    /**
     * Request-reply: a consumer answers each request with MessageUtil.createReplyMessage and its
     * own producer (SEND_REPLY_MESSAGE_V2); the broker pushes the reply to the requesting client
     * (PUSH_REPLY_MESSAGE_TO_CLIENT), which matches it by correlation id: sync and async requests
     * get their own answers, a request nobody answers times out, and a reply for a client that is
     * not connected is refused with SYSTEM_ERROR.
     */
    static void request(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelRequest" + stamp;
        String unanswered = "PetrelUnanswered" + stamp;
        DefaultMQProducer requester = warmedProducer(ns, "pg_req_" + stamp, topic);
        requester.send(new Message(unanswered, "W", "warmup", "creates the topic".getBytes(StandardCharsets.UTF_8)));
        DefaultMQProducer replier = new DefaultMQProducer("pg_rep_" + stamp);
        replier.setNamesrvAddr(ns);
        replier.setInstanceName("replier");
        replier.start();
        AtomicInteger answered = new AtomicInteger();
        DefaultMQPushConsumer server = pushConsumer(ns, "cg_req_" + stamp, "request-server", topic, "Req");
        server.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    Message reply = MessageUtil.createReplyMessage(m, ("re:" + body).getBytes(StandardCharsets.UTF_8));
                    SendResult r = replier.send(reply);
                    check(r.getSendStatus() == SendStatus.SEND_OK, "request: the reply to " + body + ": " + r);
                    answered.incrementAndGet();
                } catch (Exception e) {
                    fail("request: replying: " + e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        server.start();
        for (int i = 0; i < 5; i++) {
            Message ask = new Message(topic, "Req", ("ask-" + i).getBytes(StandardCharsets.UTF_8));
            Message r = requester.request(ask, 15_000);
            String body = r == null ? null : new String(r.getBody(), StandardCharsets.UTF_8);
            check(("re:ask-" + i).equals(body), "request: ask-" + i + " was answered " + body);
            check(r != null && ask.getProperty("CORRELATION_ID").equals(r.getProperty("CORRELATION_ID")), "request: correlation id of ask-" + i);
            check(r != null && r.getProperty("PUSH_REPLY_TIME") != null, "request: the broker's push time on the reply to ask-" + i);
        }
        CountDownLatch async = new CountDownLatch(3);
        Map<String, String> asyncAnswers = new ConcurrentHashMap<>();
        for (int i = 0; i < 3; i++) {
            String body = "async-" + i;
            requester.request(new Message(topic, "Req", body.getBytes(StandardCharsets.UTF_8)), new RequestCallback() {
                @Override
                public void onSuccess(Message r) {
                    asyncAnswers.put(body, new String(r.getBody(), StandardCharsets.UTF_8));
                    async.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    fail("request: " + body + ": " + e);
                    async.countDown();
                }
            }, 15_000);
        }
        check(async.await(30, TimeUnit.SECONDS), "request: async answers " + asyncAnswers);
        for (int i = 0; i < 3; i++) {
            check(("re:async-" + i).equals(asyncAnswers.get("async-" + i)), "request: async-" + i + " was answered " + asyncAnswers.get("async-" + i));
        }
        long started = System.currentTimeMillis();
        try {
            Message r = requester.request(new Message(unanswered, "Req", "anyone?".getBytes(StandardCharsets.UTF_8)), 2_000);
            fail("request: an unanswered request got " + r);
        } catch (RequestTimeoutException e) {
            long waited = System.currentTimeMillis() - started;
            check(waited >= 1_900 && waited < 10_000, "request: the unanswered request gave up after " + waited + " ms");
        }
        Message orphan = new Message("DefaultCluster_REPLY_TOPIC", "orphan".getBytes(StandardCharsets.UTF_8));
        MessageAccessor.putProperty(orphan, "MSG_TYPE", "reply");
        MessageAccessor.putProperty(orphan, "CORRELATION_ID", "none");
        MessageAccessor.putProperty(orphan, "REPLY_TO_CLIENT", "192.0.2.254@gone");
        try {
            SendResult r = replier.send(orphan);
            fail("request: a reply for a client that is not connected was " + r);
        } catch (MQClientException e) {
            // SYSTEM_ERROR is retried by the producer, then reported with the broker's answer as the cause.
            Throwable cause = e.getCause();
            check(cause instanceof MQBrokerException && ((MQBrokerException) cause).getResponseCode() == 1
                && cause.getMessage().contains("channel of <192.0.2.254@gone> not found"), "request: a reply for a client that is not connected: " + e);
        }
        check(answered.get() == 8, "request: the server answered " + answered.get() + " requests");
        System.out.println("request: 5 sync and 3 async requests answered, one unanswered timed out, an orphan reply refused");
        server.shutdown();
        replier.shutdown();
        requester.shutdown();
    }

    /**
     * POP consumption (RocketMQ 5): a group set to POP by the admin API (mqadmin setConsumeMode's
     * request), two push consumers with setClientRebalance(false) sharing a one-queue topic:
     * every message once with its POP_CK handle, both consumers served from the one queue, a
     * RECONSUME_LATER back about 10 s later with reconsumeTimes 1, and a message held past its
     * invisible time without an ack handed out again (revive).
     */
    static void pop(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelPop" + stamp;
        String group = "cg_pop_" + stamp;
        DefaultMQAdminExt admin = admin(ns, "pop-admin");
        String addr = admin.examineBrokerClusterInfo().getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
        admin.createAndUpdateTopicConfig(addr, new TopicConfig(topic, 1, 1, 6));
        admin.setMessageRequestMode(addr, topic, group, MessageRequestMode.POP, 0, 5_000);
        DefaultMQProducer p = producer(ns, "pg_pop_" + stamp);
        Map<String, List<Delivery>> seen = new ConcurrentHashMap<>();
        Map<String, Set<String>> byConsumer = new ConcurrentHashMap<>();
        AtomicInteger withoutHandle = new AtomicInteger();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (String name : new String[] {"pop1", "pop2"}) {
            DefaultMQPushConsumer c = pushConsumer(ns, group, name, topic);
            c.setClientRebalance(false);
            c.setPopInvisibleTime(5_000);
            c.setPopBatchNums(4);
            c.setConsumeMessageBatchMaxSize(1);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    Delivery d = new Delivery(m);
                    seen.computeIfAbsent(d.body, b -> Collections.synchronizedList(new ArrayList<>())).add(d);
                    byConsumer.computeIfAbsent(name, k -> ConcurrentHashMap.newKeySet()).add(d.body);
                    if (m.getProperty("POP_CK") == null) {
                        withoutHandle.incrementAndGet();
                    }
                    if (d.reconsumeTimes == 0 && d.body.equals("pop-later")) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                    if (d.reconsumeTimes == 0 && d.body.equals("pop-slow")) {
                        try {
                            Thread.sleep(8_000); // past the 5 s invisible time: the broker hands it out again
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            consumers.add(c);
        }
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            bodies.add("pop-" + i);
        }
        bodies.add("pop-later");
        bodies.add("pop-slow");
        // Once both consumers' pops wait on the queue, each message goes to whichever the broker
        // serves first: sent 100 ms apart, neither can take them all.
        waitFor("both consumers popping", () -> consumers.stream().allMatch(c ->
            c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getPopProcessQueueTable().size() > 0));
        Thread.sleep(2_000);
        for (String body : bodies) {
            SendResult r = p.send(new Message(topic, "P", body.getBytes(StandardCharsets.UTF_8)));
            check(r.getSendStatus() == SendStatus.SEND_OK, "pop: send " + body + ": " + r);
            Thread.sleep(100);
        }
        waitFor("every popped message, the retried one and the revived one again", () -> {
            for (String b : bodies) {
                if (!seen.containsKey(b)) {
                    return false;
                }
            }
            return seen.get("pop-later").size() >= 2 && seen.get("pop-slow").size() >= 2;
        });
        Thread.sleep(4_000); // a third delivery, or a second of another message, would show up now
        for (int i = 0; i < 30; i++) {
            int n = seen.getOrDefault("pop-" + i, List.of()).size();
            check(n == 1, "pop: pop-" + i + " delivered " + n + " times");
        }
        checkCameBackOnce(seen.get("pop-later"), "pop-later (RECONSUME_LATER: popDelayLevel 10 s)", 9_500, 20_000);
        checkCameBackOnce(seen.get("pop-slow"), "pop-slow (held past its 5 s invisible time)", 4_500, 15_000);
        check(withoutHandle.get() == 0, "pop: " + withoutHandle.get() + " messages had no POP_CK handle");
        check(byConsumer.size() == 2, "pop: only " + byConsumer.keySet() + " got messages from the shared queue");
        System.out.println("pop: " + bodies.size() + " messages through one queue to " + byConsumer.keySet() + " ("
            + byConsumer.values().stream().map(Set::size).toList() + "), a retry after 10 s and a revive after 5 s");
        consumers.forEach(DefaultMQPushConsumer::shutdown);
        admin.shutdown();
        p.shutdown();
    }

    /** Delivered exactly twice, the second time with reconsumeTimes 1, between min and max ms later. */
    static void checkCameBackOnce(List<Delivery> ds, String what, long minMs, long maxMs) {
        check(ds.size() == 2, "pop: " + what + " delivered " + ds.size() + " times");
        if (ds.size() == 2) {
            long gap = ds.get(1).arrivedMs - ds.get(0).arrivedMs;
            check(ds.get(1).reconsumeTimes == 1, "pop: " + what + " came back with reconsumeTimes " + ds.get(1).reconsumeTimes);
            check(gap >= minMs && gap < maxMs, "pop: " + what + " came back after " + gap + " ms");
        }
    }

    /**
     * An orderly listener that keeps failing a message: the client retries it in place
     * (SUSPEND_CURRENT_QUEUE_A_MOMENT) up to maxReconsumeTimes, then sends it to the group's
     * retry topic past its limit; the broker puts it in the dead-letter queue and the queue's
     * later messages go on, in order.
     */
    static void orderlyDead(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelOrderlyDead" + stamp;
        String group = "cg_orderly_dead_" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_orderly_dead_" + stamp, topic);
        List<String> consumed = Collections.synchronizedList(new ArrayList<>());
        DefaultMQPushConsumer c = pushConsumer(ns, group, "orderly-dead", topic, "O");
        c.setMaxReconsumeTimes(1);
        c.setSuspendCurrentQueueTimeMillis(100);
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                consumed.add(body);
                if (body.equals("poison")) {
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        for (String body : new String[] {"o-0", "poison", "o-2", "o-3"}) {
            SendResult r = p.send(new Message(topic, "O", body.getBytes(StandardCharsets.UTF_8)),
                (List<MessageQueue> mqs, Message msg, Object arg) -> mqs.get(0), null);
            check(r.getSendStatus() == SendStatus.SEND_OK && r.getMessageQueue().getQueueId() == 0, "orderly dead: send " + body + ": " + r);
        }
        waitFor("the queue's messages after the poison", () -> consumed.contains("o-3"));
        List<String> dead = readDeadLetters(ns, group, stamp, 1);
        Thread.sleep(2_000); // a late copy of the poison would show up now
        List<String> seen = new ArrayList<>(consumed);
        check(seen.equals(List.of("o-0", "poison", "poison", "o-2", "o-3")), "orderly dead: consumed " + seen);
        check(dead.equals(List.of("poison")), "orderly dead: the dead-letter queue holds " + dead);
        System.out.println("orderly dead: consumed " + seen + ", %DLQ%" + group + " holds " + dead);
        c.shutdown();
        p.shutdown();
    }

    static void broadcast(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelBroadcast" + stamp;
        String group = "cg_broadcast_" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_broadcast_" + stamp, topic);
        Map<String, Expected> expected = new HashMap<>();
        for (int i = 0; i < 24; i++) {
            String pid = "b" + i;
            expected.put(pid, new Expected(pid, "TagB", "bkey-" + i, "broadcast-" + i, "sync"));
        }
        List<Received> seen = new ArrayList<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int n = 1; n <= 2; n++) {
            Received r = new Received("broadcast consumer " + n, expected);
            seen.add(r);
            DefaultMQPushConsumer c = pushConsumer(ns, group, "broadcast" + n, topic);
            c.setMessageModel(MessageModel.BROADCASTING);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (m.getUserProperty("pid") != null) {
                        r.accept(m);
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            consumers.add(c);
        }
        for (Expected e : expected.values()) {
            SendResult r = p.send(message(topic, e));
            check(r.getSendStatus() == SendStatus.SEND_OK, "broadcast: send " + e.pid + ": " + r);
        }
        waitFor("both broadcast consumers", () -> seen.stream().allMatch(Received::complete));
        Thread.sleep(2_000); // an extra delivery would show up now
        for (Received r : seen) {
            r.verifyExactlyOnce();
        }
        consumers.forEach(DefaultMQPushConsumer::shutdown);
        p.shutdown();
    }

    static void reset(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelReset" + stamp;
        String group = "cg_reset_" + stamp;
        DefaultMQProducer p = warmedProducer(ns, "pg_reset_" + stamp, topic);
        Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = pushConsumer(ns, group, "reset", topic);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (m.getUserProperty("kind") != null) {
                    counts.computeIfAbsent(new String(m.getBody(), StandardCharsets.UTF_8), b -> new AtomicInteger()).incrementAndGet();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        List<String> before = new ArrayList<>(), after = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            before.add("before-" + i);
            after.add("after-" + i);
        }
        long at = 0;
        for (List<String> bodies : List.of(before, after)) {
            for (String body : bodies) {
                Message m = new Message(topic, "R", body, body.getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("kind", "reset");
                check(p.send(m).getSendStatus() == SendStatus.SEND_OK, "reset: send " + body);
            }
            waitFor("the " + bodies.get(0) + " batch", () -> counts.keySet().containsAll(bodies));
            if (at == 0) {
                Thread.sleep(1_100);
                at = System.currentTimeMillis();
                Thread.sleep(100);
            }
        }
        DefaultMQAdminExt admin = admin(ns, "reset-admin");
        Map<MessageQueue, Long> table = admin.resetOffsetByTimestamp(topic, group, at, true);
        long again = 0;
        for (Map.Entry<MessageQueue, Long> e : table.entrySet()) {
            again += p.maxOffset(e.getKey()) - e.getValue();
        }
        int queues = p.fetchPublishMessageQueues(topic).size();
        check(table.size() == queues && again == 8, "reset: the answer moves " + again + " messages back over " + table.size() + " queues: " + table);
        waitFor("the second batch again", () -> after.stream().allMatch(b -> counts.get(b).get() >= 2));
        Thread.sleep(2_000); // an extra delivery would show up now
        before.forEach(b -> check(counts.get(b).get() == 1, "reset: " + b + " delivered " + counts.get(b).get() + " times"));
        after.forEach(b -> check(counts.get(b).get() == 2, "reset: " + b + " delivered " + counts.get(b).get() + " times"));
        System.out.println("reset: " + queues + " queues reset to " + at + ", the 8 messages after it delivered again, the 8 before it not");
        admin.shutdown();
        c.shutdown();
        p.shutdown();
    }

    static void checkDelayed(Map<String, List<Delivery>> seen, Map<String, String> sentIds, String topic) {
        for (int i = 0; i < 4; i++) {
            List<Delivery> d = seen.getOrDefault("delay-" + i, List.of());
            check(d.size() == 1, "delayed: delay-" + i + " delivered " + d.size() + " times");
            if (d.size() == 1) {
                long waited = d.get(0).storeMs - d.get(0).bornMs;
                check(waited >= 5_000, "delayed: delay-" + i + " stored in its queue " + waited + " ms after it was born, before 5 s");
                check(d.get(0).arrivedMs - d.get(0).bornMs < 12_000, "delayed: delay-" + i + " arrived late");
                check(d.get(0).msgId.equals(sentIds.get("delay-" + i)), "delayed: delay-" + i + " changed its id");
            }
            List<Delivery> r = seen.getOrDefault("retry-" + i, List.of());
            check(r.size() == 2, "delayed: retry-" + i + " delivered " + r.size() + " times");
            if (r.size() == 2) {
                Delivery first = r.get(0), second = r.get(1);
                long gap = second.arrivedMs - first.arrivedMs;
                check(first.reconsumeTimes == 0 && second.reconsumeTimes == 1, "delayed: retry-" + i + " reconsumeTimes " + second.reconsumeTimes);
                check(gap >= 9_900 && gap < 20_000, "delayed: retry-" + i + " came back after " + gap + " ms, not about 10 s");
                check(second.topic.equals(topic), "delayed: retry-" + i + " came back on " + second.topic);
                check(second.msgId.equals(first.msgId), "delayed: retry-" + i + " came back as " + second.msgId + ", not " + first.msgId);
                check(("retry-key-" + i).equals(second.keys) && "retry".equals(second.kind), "delayed: retry-" + i + " lost its keys or properties");
            }
            List<Delivery> x = seen.getOrDefault("dead-" + i, List.of());
            check(x.size() == 2, "delayed: dead-" + i + " delivered " + x.size() + " times before the DLQ");
        }
    }

    /** Reads {@code count} bodies from the group's dead-letter topic with a lite pull consumer. */
    static List<String> readDeadLetters(String ns, String group, String stamp, int count) throws Exception {
        DefaultLitePullConsumer dlq = new DefaultLitePullConsumer("cg_dlq_reader_" + stamp);
        dlq.setNamesrvAddr(ns);
        dlq.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        dlq.start();
        // The DLQ topic may be moments old: a subscription would wait for the next rebalance
        // (20 s) to see it, so its queues are looked up and assigned.
        String topic = "%DLQ%" + group;
        List<Collection<MessageQueue>> queues = new ArrayList<>();
        waitFor("the route of " + topic, () -> {
            try {
                queues.add(dlq.fetchMessageQueues(topic));
                return !queues.get(queues.size() - 1).isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        dlq.assign(queues.get(queues.size() - 1));
        List<String> bodies = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (bodies.size() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : dlq.poll(1_000)) {
                bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
        }
        dlq.shutdown();
        return bodies;
    }

    static void transaction(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelTx" + stamp;
        Map<String, Long> checkedAt = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer("pg_tx_" + stamp);
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (body.startsWith("commit")) return LocalTransactionState.COMMIT_MESSAGE;
                if (body.startsWith("rollback")) return LocalTransactionState.ROLLBACK_MESSAGE;
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                check(m.getTopic().equals(topic), "transaction: checked on topic " + m.getTopic());
                checkedAt.putIfAbsent(body, System.currentTimeMillis());
                return body.startsWith("unknown") ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        p.send(new Message(topic, "W", "warmup", "creates the topic".getBytes(StandardCharsets.UTF_8)));
        Map<String, List<Delivery>> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_tx_" + stamp);
        c.setNamesrvAddr(ns);
        c.setInstanceName("transaction");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (m.getKeys() != null && m.getKeys().startsWith("tx-")) {
                    Delivery d = new Delivery(m);
                    seen.computeIfAbsent(d.body, b -> Collections.synchronizedList(new ArrayList<>())).add(d);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        for (String kind : new String[] {"commit", "rollback", "unknown"}) {
            for (int i = 0; i < 3; i++) {
                Message m = new Message(topic, "T", "tx-" + kind + "-" + i, (kind + "-" + i).getBytes(StandardCharsets.UTF_8));
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                check(r.getSendStatus() == SendStatus.SEND_OK, "transaction: send " + kind + "-" + i + ": " + r);
            }
        }
        waitFor("the committed and the checked transactions", () -> seen.size() >= 6);
        Thread.sleep(3_000); // a rolled-back message or a second copy would arrive now
        for (int i = 0; i < 3; i++) {
            check(seen.getOrDefault("commit-" + i, List.of()).size() == 1, "transaction: commit-" + i + " delivered " + seen.getOrDefault("commit-" + i, List.of()).size() + " times");
            check(!seen.containsKey("rollback-" + i), "transaction: rollback-" + i + " was delivered");
            List<Delivery> u = seen.getOrDefault("unknown-" + i, List.of());
            check(u.size() == 1, "transaction: unknown-" + i + " delivered " + u.size() + " times");
            Long asked = checkedAt.get("unknown-" + i);
            check(asked != null, "transaction: the broker never asked about unknown-" + i);
            if (asked != null && u.size() == 1) {
                check(u.get(0).arrivedMs >= asked, "transaction: unknown-" + i + " arrived before the broker asked");
                check(asked - u.get(0).bornMs >= 6_000, "transaction: unknown-" + i + " was checked before transactionTimeOut");
            }
            check(!checkedAt.containsKey("commit-" + i) && !checkedAt.containsKey("rollback-" + i), "transaction: a decided message was checked");
        }
        System.out.println("transaction: 3 committed, 3 rolled back, 3 committed when the broker asked");
        c.shutdown();
        p.shutdown();
    }

    /** The super user the interop script's ACL broker starts with (initAuthenticationUser). */
    static final String ROOT_AK = "rocketmq";
    static final String ROOT_SK = "12345678";

    static RPCHook signer(String ak, String sk) {
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    /** A started producer signing with {@code hook} (null: unsigned), on an instance of its own. */
    static DefaultMQProducer signedProducer(String ns, String group, RPCHook hook) throws Exception {
        DefaultMQProducer p = hook == null ? new DefaultMQProducer(group) : new DefaultMQProducer(group, hook);
        p.setNamesrvAddr(ns);
        p.setInstanceName(group);
        p.setSendMsgTimeout(5_000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        return p;
    }

    /** A push consumer of all of {@code topic} from its first offset, signing with {@code hook}; not started. */
    static DefaultMQPushConsumer signedConsumer(String ns, String group, String instance, String topic, RPCHook hook) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook, new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        c.setNamesrvAddr(ns);
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        return c;
    }

    /** The send's refusal: the broker's code and remark, or -1 and what else happened. */
    static String refusal(DefaultMQProducer p, String topic) {
        try {
            SendResult r = p.send(new Message(topic, "T", "refused?".getBytes(StandardCharsets.UTF_8)));
            return "-1 sent: " + r.getSendStatus();
        } catch (Exception e) {
            // The producer wraps the broker's answer in an MQClientException after its retries.
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof MQBrokerException) {
                    MQBrokerException b = (MQBrokerException) t;
                    return b.getResponseCode() + " " + b.getErrorMessage();
                }
            }
            return "-1 " + e;
        }
    }

    /**
     * ACL 2.0 with the official client's {@code AclClientRPCHook}: a super user creates a normal user
     * and its policies through the admin API; that user's sends and consumption where a policy
     * allows succeed, and the broker answers NO_PERMISSION (16), naming why, to a send a policy
     * denies, a topic no policy covers, a wrong secret, an unknown user and an unsigned client.
     */
    static void acl(String ns) throws Exception {
        String stamp = stamp();
        String ok = "AclOk" + stamp, denied = "AclDenied" + stamp, other = "AclOther" + stamp;
        String user = "alice" + stamp, secret = "alice-secret-" + stamp, group = "cg_acl_" + stamp;
        DefaultMQAdminExt admin = new DefaultMQAdminExt(signer(ROOT_AK, ROOT_SK));
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("acl-admin");
        admin.start();
        String addr = admin.examineBrokerClusterInfo().getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
        for (String t : List.of(ok, denied, other)) {
            admin.createAndUpdateTopicConfig(addr, new TopicConfig(t, 4, 4, 6));
        }
        admin.createUser(addr, user, secret, "Normal");
        UserInfo read = admin.getUser(addr, user);
        check(read != null && "Normal".equals(read.getUserType()) && "enable".equals(read.getUserStatus()), "acl: getUser read back " + read);
        String subject = "User:" + user;
        admin.createAcl(addr, subject, List.of("Topic:" + ok, "Group:" + group), List.of("Pub", "Sub"), null, "Allow");
        admin.createAcl(addr, subject, List.of("Topic:" + denied), List.of("Pub"), null, "Deny");
        check(admin.getAcl(addr, subject).getPolicies().get(0).getEntries().size() == 3, "acl: getAcl shows 3 entries");

        DefaultMQProducer alice = signedProducer(ns, "pg_acl_" + stamp, signer(user, secret));
        int acked = 0;
        for (int i = 0; i < 5; i++) {
            SendResult r = alice.send(new Message(ok, "T", "ak-" + i, ("allowed " + i).getBytes(StandardCharsets.UTF_8)));
            acked += r.getSendStatus() == SendStatus.SEND_OK ? 1 : 0;
        }
        check(acked == 5, "acl: " + acked + " of 5 allowed sends acknowledged");
        String r = refusal(alice, denied);
        check(r.startsWith("16 ") && r.contains(subject) && r.contains("Topic:" + denied) && r.contains("deny"), "acl: a denied topic: " + r);
        r = refusal(alice, other);
        check(r.startsWith("16 ") && r.contains("no matched policies"), "acl: a topic no policy covers: " + r);
        DefaultMQProducer wrong = signedProducer(ns, "pg_acl_wrong_" + stamp, signer(user, "guess"));
        r = refusal(wrong, ok);
        check(r.startsWith("16 ") && r.contains("signature"), "acl: a wrong secret: " + r);
        DefaultMQProducer nobody = signedProducer(ns, "pg_acl_nobody_" + stamp, signer("mallory" + stamp, "x"));
        r = refusal(nobody, ok);
        check(r.startsWith("16 ") && r.contains("not found"), "acl: an unknown user: " + r);
        DefaultMQProducer unsigned = signedProducer(ns, "pg_acl_unsigned_" + stamp, null);
        r = refusal(unsigned, ok);
        check(r.startsWith("16 ") && r.contains("not signed"), "acl: an unsigned client: " + r);

        Map<String, Expected> expected = new HashMap<>();
        for (int i = 0; i < 5; i++) {
            expected.put("ak-" + i, new Expected("ak-" + i, "T", "ak-" + i, "allowed " + i, "sync"));
        }
        Received got = new Received("acl consumer", expected);
        DefaultMQPushConsumer c = signedConsumer(ns, group, "acl-consumer", ok, signer(user, secret));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.counts.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        waitFor("the allowed user's consumer to get all 5", () -> got.counts.size() >= 5);
        got.counts.forEach((k, n) -> check(n.get() == 1 && expected.containsKey(k), "acl: " + k + " delivered " + n.get() + " times"));
        System.out.println("acl: 5 allowed sends consumed by the allowed group; denied, uncovered, wrong secret, unknown user and unsigned refused with 16");
        admin.deleteUser(addr, user);
        check(admin.getUser(addr, user) == null, "acl: a deleted user is gone");
        for (DefaultMQProducer p : List.of(alice, wrong, nobody, unsigned)) {
            p.shutdown();
        }
        c.shutdown();
        admin.shutdown();
    }

    /**
     * TLS: a producer and a consumer with {@code setUseTLS(true)} talk to the name server and the
     * broker over TLS. Run with {@code -Dtls.test.mode.enable=false -Dtls.client.authServer=true
     * -Dtls.client.trustCertPath=CA} so the client checks the broker's certificate against the
     * test's own CA (without authServer the client trusts any certificate).
     */
    static void tls(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelTls" + stamp;
        DefaultMQProducer p = new DefaultMQProducer("pg_tls_" + stamp, signer(ROOT_AK, ROOT_SK));
        p.setNamesrvAddr(ns);
        p.setUseTLS(true);
        p.setInstanceName("tls-producer");
        p.setSendMsgTimeout(10_000);
        p.start();
        Map<String, Expected> expected = new HashMap<>();
        for (int i = 0; i < 10; i++) {
            Expected e = new Expected("tls-" + i, "T", "tls-" + i, "over TLS " + i, "sync");
            SendResult r = p.send(message(topic, e));
            check(r.getSendStatus() == SendStatus.SEND_OK, "tls: send " + i + ": " + r);
            expected.put(e.pid, e);
        }
        Received got = new Received("tls consumer", expected);
        DefaultMQPushConsumer c = signedConsumer(ns, "cg_tls_" + stamp, "tls-consumer", topic, signer(ROOT_AK, ROOT_SK));
        c.setUseTLS(true);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(got::accept);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        waitFor("the TLS consumer to get all 10", got::complete);
        got.verifyExactlyOnce();
        c.shutdown();
        p.shutdown();
    }

    /**
     * Creates topics and consumer groups in one JVM (a test's setup, which would otherwise start
     * mqadmin once for each): "topic:NAME[:MESSAGE_TYPE]" (4 queues) and "group:NAME[:orderly]".
     */
    static void setup(String ns, String brokerAddr, String[] specs) throws Exception {
        DefaultMQAdminExt admin = admin(ns, "setup-admin");
        for (String spec : specs) {
            String[] f = spec.split(":");
            if (f[0].equals("topic")) {
                TopicConfig tc = new TopicConfig(f[1], 4, 4, 6);
                if (f.length > 2) {
                    Map<String, String> attributes = new HashMap<>();
                    attributes.put("+message.type", f[2]);
                    tc.setAttributes(attributes);
                }
                admin.createAndUpdateTopicConfig(brokerAddr, tc);
            } else if (f[0].equals("group")) {
                SubscriptionGroupConfig cfg = new SubscriptionGroupConfig();
                cfg.setGroupName(f[1]);
                cfg.setConsumeMessageOrderly(f.length > 2 && f[2].equals("orderly"));
                admin.createAndUpdateSubscriptionGroupConfig(brokerAddr, cfg);
            } else {
                fail("setup: unknown spec " + spec);
            }
        }
        admin.shutdown();
        System.out.println("ok: setup: " + specs.length + " topics and groups created");
    }

    /** Mixed protocols, remoting side: sends COUNT messages "remoting-N" (tag TagA) to TOPIC. */
    static void mixedSend(String ns, String topic, int count) throws Exception {
        DefaultMQProducer p = producer(ns, "pg_mixed_" + stamp());
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, "TagA", ("remoting-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = p.send(m);
            check(r.getSendStatus() == SendStatus.SEND_OK, "mixed: send " + i + ": " + r);
        }
        p.shutdown();
        System.out.println("ok: mixed-send: " + count + " remoting messages sent to " + topic);
    }

    /** Mixed protocols, remoting side: a push consumer of GROUP reads the COUNT messages "grpc-N" a gRPC producer sent. */
    static void mixedReceive(String ns, String topic, String group, int count) throws Exception {
        Set<String> bodies = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = pushConsumer(ns, group, "mixed-consumer", topic);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (body.startsWith("grpc-") && "TagA".equals(m.getTags())) {
                    bodies.add(body);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        waitFor("the remoting consumer to read every gRPC-sent message", () -> bodies.size() >= count);
        c.shutdown();
        System.out.println("ok: mixed-receive: a remoting push consumer read all " + count + " messages sent over gRPC, with their tag");
    }

    /**
     * The workload behind the metrics comparison (scripts/interop-operators.sh): normal, delay-level,
     * timer and transactional sends (one committed, one rolled back), a push consumer that reads
     * them and sends one to the dead-letter queue, and a pull of the topic; then, with every
     * client still connected, writes HOLD/ready and sends five messages a second until HOLD/done
     * appears (at most 120 s), so that the broker is scraped with its clients online and its
     * counters moving.
     */
    static void metrics(String ns, Path hold) throws Exception {
        String topic = "MetricsTopic";
        TransactionMQProducer p = new TransactionMQProducer("pg_metrics");
        p.setNamesrvAddr(ns);
        p.setSendMsgTimeout(10_000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                return body.startsWith("commit") ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                return LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        p.send(new Message(topic, "W", "warmup", "creates the topic".getBytes(StandardCharsets.UTF_8)));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("cg_metrics");
        c.setNamesrvAddr(ns);
        c.setInstanceName("metrics");
        c.setMaxReconsumeTimes(0);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            boolean later = false;
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                seen.add(body);
                later |= body.equals("dead");
            }
            return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        for (int i = 0; i < 5; i++) {
            p.send(new Message(topic, "T", "normal-" + i, ("normal-" + i).getBytes(StandardCharsets.UTF_8)));
        }
        Message delayed = new Message(topic, "T", "delay", "delay".getBytes(StandardCharsets.UTF_8));
        delayed.setDelayTimeLevel(1);
        p.send(delayed);
        Message timer = new Message(topic, "T", "timer", "timer".getBytes(StandardCharsets.UTF_8));
        timer.setDeliverTimeMs(System.currentTimeMillis() + 2_000);
        p.send(timer);
        p.send(new Message(topic, "T", "dead", "dead".getBytes(StandardCharsets.UTF_8)));
        for (String kind : new String[] {"commit", "rollback"}) {
            Message m = new Message(topic, "T", "tx-" + kind, kind.getBytes(StandardCharsets.UTF_8));
            check(p.sendMessageInTransaction(m, null).getSendStatus() == SendStatus.SEND_OK, "metrics: transaction " + kind);
        }
        waitFor("every message the consumer should read", () -> seen.containsAll(List.of("normal-4", "delay", "timer", "dead", "commit")));
        DefaultLitePullConsumer pull = new DefaultLitePullConsumer("cg_metrics_pull");
        pull.setNamesrvAddr(ns);
        pull.setInstanceName("metrics-pull");
        pull.subscribe(topic, "*");
        pull.start();
        List<MessageExt> pulled = new ArrayList<>();
        waitFor("the pull consumer's first messages", () -> {
            pulled.addAll(pull.poll(200));
            return !pulled.isEmpty();
        });
        // Message traces: a producer and a consumer with enableMsgTrace write their hops to
        // RMQ_SYS_TRACE_TOPIC; the traced message's id is left for mqadmin and the dashboard.
        DefaultMQProducer traced = new DefaultMQProducer("pg_trace", true, null);
        traced.setNamesrvAddr(ns);
        traced.setInstanceName("metrics-trace");
        traced.start();
        Set<String> tracedSeen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer tracer = new DefaultMQPushConsumer("cg_trace", true, null);
        tracer.setNamesrvAddr(ns);
        tracer.setInstanceName("metrics-trace");
        tracer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        tracer.subscribe("TraceTopic", "*");
        tracer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> tracedSeen.add(m.getMsgId()));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        tracer.start();
        SendResult tracedSend = traced.send(new Message("TraceTopic", "T", "traced", "traced".getBytes(StandardCharsets.UTF_8)));
        check(tracedSend.getSendStatus() == SendStatus.SEND_OK, "metrics: the traced send");
        waitFor("the traced message to be consumed", () -> tracedSeen.contains(tracedSend.getMsgId()));
        Files.writeString(hold.resolve("trace-msgid"), tracedSend.getMsgId());
        Thread.sleep(2_000); // the dead-letter send, the offsets and the trace batches settle
        Files.writeString(hold.resolve("ready"), "ready");
        // A steady trickle while held, so that a scraper sees counters move between scrapes.
        long deadline = System.currentTimeMillis() + 120_000;
        for (int i = 0; !Files.exists(hold.resolve("done")) && System.currentTimeMillis() < deadline; i++) {
            p.send(new Message(topic, "Tick", "tick-" + i, ("tick-" + i).getBytes(StandardCharsets.UTF_8)));
            Thread.sleep(200);
        }
        pull.shutdown();
        tracer.shutdown();
        traced.shutdown();
        c.shutdown();
        p.shutdown();
        System.out.println("ok: metrics: the workload ran (" + seen.size() + " bodies consumed, " + pulled.size() + " pulled)");
    }

    /**
     * Light message queues (the broker runs with enableLmq and enableMultiDispatch): messages sent
     * to a topic with {@code INNER_MULTI_DISPATCH} naming {@code %LMQ%} queues are read from each of
     * them with a pull consumer addressing {@code MessageQueue(lmq, broker, 0)} directly, as
     * RocketMQ's LMQ examples do; each carries its offset in each queue in
     * {@code INNER_MULTI_QUEUE_OFFSET}, a client's own value for it is replaced, a long-polling pull
     * wakes on a new message, offsets commit for an ordinary and a {@code %LMQ%} group, and names
     * that are not light queues are refused with MESSAGE_ILLEGAL (13).
     */
    static void lmq(String ns) throws Exception {
        String stamp = stamp();
        String topic = "PetrelLmq" + stamp;
        String[] lmqs = {"%LMQ%dev-" + stamp + "-1", "%LMQ%dev-" + stamp + "-2", "%LMQ%dev-" + stamp + "-3"};
        DefaultMQProducer p = producer(ns, "pg_lmq_" + stamp);
        Map<String, List<String>> expected = new HashMap<>();
        for (String q : lmqs) {
            expected.put(q, new ArrayList<>());
        }
        for (int i = 0; i < 30; i++) {
            List<String> names = new ArrayList<>();
            names.add(lmqs[0]);
            if (i % 2 == 0) {
                names.add(lmqs[1]);
            }
            if (i % 3 == 0) {
                names.add(lmqs[2]);
            }
            Message m = new Message(topic, "L", "lmq-" + i, ("lmq-" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("INNER_MULTI_DISPATCH", String.join(",", names));
            if (i == 7) {
                // Only the broker writes these offsets.
                MessageAccessor.putProperty(m, "INNER_MULTI_QUEUE_OFFSET", "999");
            }
            SendResult r = p.send(m);
            check(r.getSendStatus() == SendStatus.SEND_OK, "lmq: send " + i + ": " + r);
            for (String q : names) {
                expected.get(q).add("lmq-" + i);
            }
        }
        for (String bad : new String[] {"orders", lmqs[0] + "," + lmqs[0], "%LMQ%a/b"}) {
            Message m = new Message(topic, "L", "bad", "bad".getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("INNER_MULTI_DISPATCH", bad);
            try {
                p.send(m);
                fail("lmq: INNER_MULTI_DISPATCH " + bad + " was accepted");
            } catch (MQBrokerException e) {
                check(e.getResponseCode() == 13, "lmq: INNER_MULTI_DISPATCH " + bad + ": " + e);
            } catch (MQClientException e) {
                // The Java client refuses a File.separator in the list itself.
                check(bad.contains("/"), "lmq: INNER_MULTI_DISPATCH " + bad + ": " + e);
            }
        }
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("CID_LMQ_" + stamp);
        c.setNamesrvAddr(ns);
        c.setInstanceName("lmq-" + stamp);
        c.start();
        // The name server has no route for a light queue: the parent topic's names the broker, and
        // loading it into the client's tables lets it address the broker by name (as RocketMQ's
        // LMQ examples do).
        String broker = c.fetchSubscribeMessageQueues(topic).iterator().next().getBrokerName();
        c.getDefaultMQPullConsumerImpl().getRebalanceImpl().getmQClientFactory().updateTopicRouteInfoFromNameServer(topic);
        for (int k = 0; k < lmqs.length; k++) {
            MessageQueue mq = new MessageQueue(lmqs[k], broker, 0);
            List<String> want = expected.get(lmqs[k]);
            check(c.maxOffset(mq) == want.size(), "lmq: " + lmqs[k] + " max offset " + c.maxOffset(mq) + ", sent " + want.size());
            List<String> got = new ArrayList<>();
            long offset = 0;
            for (int round = 0; round < 10 && got.size() < want.size(); round++) {
                PullResult r = c.pull(mq, "*", offset, 8);
                if (r.getPullStatus() != PullStatus.FOUND) {
                    break;
                }
                for (MessageExt m : r.getMsgFoundList()) {
                    String[] names = m.getProperty("INNER_MULTI_DISPATCH").split(",");
                    String[] offsets = m.getProperty("INNER_MULTI_QUEUE_OFFSET").split(",");
                    int slot = java.util.Arrays.asList(names).indexOf(lmqs[k]);
                    check(slot >= 0 && offsets.length == names.length && Long.parseLong(offsets[slot]) == got.size(),
                        "lmq: " + lmqs[k] + " message " + got.size() + " has offsets " + m.getProperty("INNER_MULTI_QUEUE_OFFSET") + " for " + m.getProperty("INNER_MULTI_DISPATCH"));
                    got.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
                offset = r.getNextBeginOffset();
            }
            check(got.equals(want), "lmq: " + lmqs[k] + " read " + got + ", sent " + want);
        }
        // A long-polling pull at the end of a light queue wakes on the next message for it.
        MessageQueue first = new MessageQueue(lmqs[0], broker, 0);
        long end = c.maxOffset(first);
        PullResult[] woke = new PullResult[1];
        Thread poller = new Thread(() -> {
            try {
                woke[0] = c.pullBlockIfNotFound(first, "*", end, 8);
            } catch (Exception e) {
                fail("lmq: long-polling pull: " + e);
            }
        });
        long started = System.currentTimeMillis();
        poller.start();
        Thread.sleep(1_000);
        Message late = new Message(topic, "L", "late", "lmq-late".getBytes(StandardCharsets.UTF_8));
        late.putUserProperty("INNER_MULTI_DISPATCH", lmqs[0]);
        p.send(late);
        poller.join(20_000);
        long waited = System.currentTimeMillis() - started;
        check(woke[0] != null && woke[0].getPullStatus() == PullStatus.FOUND
                && new String(woke[0].getMsgFoundList().get(0).getBody(), StandardCharsets.UTF_8).equals("lmq-late"),
            "lmq: the long-polling pull got " + woke[0]);
        check(waited < 10_000, "lmq: the long-polling pull answered after " + waited + " ms");
        // Offsets commit for the ordinary group and for a %LMQ% group nobody created.
        DefaultMQPullConsumer lc = new DefaultMQPullConsumer("%LMQ%GID_" + stamp);
        lc.setNamesrvAddr(ns);
        lc.setInstanceName("lmq-group-" + stamp);
        lc.start();
        lc.getDefaultMQPullConsumerImpl().getRebalanceImpl().getmQClientFactory().updateTopicRouteInfoFromNameServer(topic);
        for (DefaultMQPullConsumer consumer : List.of(c, lc)) {
            consumer.getOffsetStore().updateConsumeOffsetToBroker(first, 7, false);
            long committed = consumer.getOffsetStore().readOffset(first, ReadOffsetType.READ_FROM_STORE);
            check(committed == 7, "lmq: " + consumer.getConsumerGroup() + " committed 7, reads back " + committed);
        }
        lc.shutdown();
        c.shutdown();
        p.shutdown();
        System.out.println("lmq: " + lmqs.length + " light queues read back (" + expected.get(lmqs[0]).size() + ", "
            + expected.get(lmqs[1]).size() + ", " + expected.get(lmqs[2]).size() + " messages), long polling woke after " + waited + " ms");
    }

    /** The body of the cold tier's message {@code i}: its number, then about 1 KiB. */
    static String tierBody(int i) {
        return String.format("tier-java-%06d-", i) + "y".repeat(1000);
    }

    /** The cold tier: {@code count} messages of about 1 KiB to {@code topic}, each acknowledged. */
    static void tierProduce(String ns, String topic, int count) throws Exception {
        DefaultMQProducer p = producer(ns, "pg_tier_" + stamp());
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, "T", "tier-" + i, tierBody(i).getBytes(StandardCharsets.UTF_8));
            SendResult r = p.send(m);
            check(r.getSendStatus() == SendStatus.SEND_OK, "tier: send " + i + ": " + r);
        }
        p.shutdown();
        System.out.println("tier-produce: " + count + " messages sent");
    }

    /**
     * The cold tier: a lite pull consumer of a new group reads {@code topic} from its first offset
     * (most of it no longer on the broker's disk) and gets every message once, with its body.
     */
    static void tierConsume(String ns, String topic, int count) throws Exception {
        DefaultLitePullConsumer pull = new DefaultLitePullConsumer("cg_tier_" + stamp());
        pull.setNamesrvAddr(ns);
        pull.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pull.subscribe(topic, "*");
        pull.start();
        Set<Integer> seen = new HashSet<>();
        int duplicates = 0;
        MessageExt first = null;
        long deadline = System.currentTimeMillis() + 2 * WAIT_MS;
        while (seen.size() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : pull.poll(1_000)) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                int i = Integer.parseInt(body.substring(10, 16));
                check(body.equals(tierBody(i)), "tier: message " + i + " came back with another body");
                if (!seen.add(i)) {
                    duplicates++;
                }
                if (i == 0) {
                    first = m;
                }
            }
        }
        int extra = pull.poll(1_000).size(); // once all were read, any message is one too many
        pull.shutdown();
        check(extra == 0, "tier: " + extra + " messages after all were read");
        check(seen.size() == count, "tier: " + seen.size() + " of " + count + " messages read back");
        check(duplicates == 0, "tier: " + duplicates + " messages read twice");
        // The first message, long gone from the disk, found as an operator finds it: by its
        // offset id (VIEW_MESSAGE_BY_ID), its key and its unique id (QUERY_MESSAGE).
        check(first != null, "tier: message 0 not read");
        DefaultMQProducer admin = producer(ns, "pg_tier_view_" + stamp());
        String want = tierBody(0);
        MessageExt byOffset = admin.viewMessage(topic, ((MessageClientExt) first).getOffsetMsgId());
        check(byOffset != null && new String(byOffset.getBody(), StandardCharsets.UTF_8).equals(want), "tier: message 0 by its offset id: " + byOffset);
        boolean byKey = admin.queryMessage(topic, "tier-0", 32, 0, Long.MAX_VALUE).getMessageList().stream()
                .anyMatch(m -> new String(m.getBody(), StandardCharsets.UTF_8).equals(want));
        check(byKey, "tier: message 0 by its key");
        MessageExt byUniq = admin.viewMessage(topic, first.getMsgId());
        check(byUniq != null && new String(byUniq.getBody(), StandardCharsets.UTF_8).equals(want), "tier: message 0 by its unique id: " + byUniq);
        admin.shutdown();
        // And a POP consumer of a new group, from the first offset: every message, acked once.
        String group = "cg_tier_pop_" + stamp();
        DefaultMQAdminExt modes = admin(ns, "tier-pop-admin");
        String addr = modes.examineBrokerClusterInfo().getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
        modes.setMessageRequestMode(addr, topic, group, MessageRequestMode.POP, 0, 5_000);
        modes.shutdown();
        Set<Integer> popped = ConcurrentHashMap.newKeySet();
        AtomicInteger wrong = new AtomicInteger();
        DefaultMQPushConsumer pop = pushConsumer(ns, group, "tier-pop", topic);
        pop.setClientRebalance(false);
        pop.setPopInvisibleTime(60_000);
        pop.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                int i = Integer.parseInt(body.substring(10, 16));
                if (!body.equals(tierBody(i))) {
                    wrong.incrementAndGet();
                }
                popped.add(i);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pop.start();
        long popDeadline = System.currentTimeMillis() + 2 * WAIT_MS;
        while (popped.size() < count && System.currentTimeMillis() < popDeadline) {
            Thread.sleep(200);
        }
        pop.shutdown();
        check(wrong.get() == 0, "tier: " + wrong.get() + " popped messages with another body");
        check(popped.size() == count, "tier: " + popped.size() + " of " + count + " messages popped");
        System.out.println("tier-consume: " + seen.size() + " messages read back from the first offset and " + popped.size()
            + " popped; the first found by offset id, key and unique id");
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "setup":
                setup(args[1], args[2], java.util.Arrays.copyOfRange(args, 3, args.length));
                break;
            case "mixed-send":
                mixedSend(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "mixed-receive":
                mixedReceive(args[1], args[2], args[3], Integer.parseInt(args[4]));
                break;
            case "basic":
                basic(args[1]);
                break;
            case "orderly":
                orderly(args[1]);
                break;
            case "delayed":
                delayed(args[1]);
                break;
            case "timer":
                timer(args[1]);
                break;
            case "query":
                query(args[1]);
                break;
            case "broadcast":
                broadcast(args[1]);
                break;
            case "sql":
                sql(args[1]);
                break;
            case "groupconfig":
                groupConfig(args[1]);
                break;
            case "request":
                request(args[1]);
                break;
            case "pop":
                pop(args[1]);
                break;
            case "orderlydead":
                orderlyDead(args[1]);
                break;
            case "reset":
                reset(args[1]);
                break;
            case "transaction":
                transaction(args[1]);
                break;
            case "lmq":
                lmq(args[1]);
                break;
            case "acl":
                acl(args[1]);
                break;
            case "tls":
                tls(args[1]);
                break;
            case "restart":
                restart(args[1], Paths.get(args[2]));
                break;
            case "failover":
                failover(args[1], Paths.get(args[2]));
                break;
            case "metrics":
                metrics(args[1], Paths.get(args[2]));
                break;
            case "consumed-read":
                consumedRead(args[1], Paths.get(args[2]));
                break;
            case "consumed-verify":
                consumedVerify(args[1], Paths.get(args[2]), args.length > 3 && args[3].equals("strict"));
                break;
            case "tier-produce":
                tierProduce(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "tier-consume":
                tierConsume(args[1], args[2], Integer.parseInt(args[3]));
                break;
            default:
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ClientTest basic NAMESRV | acl NAMESRV | tls NAMESRV | orderly NAMESRV | delayed NAMESRV | timer NAMESRV | query NAMESRV | sql NAMESRV | groupconfig NAMESRV | request NAMESRV | pop NAMESRV | orderlydead NAMESRV | broadcast NAMESRV | reset NAMESRV | transaction NAMESRV | lmq NAMESRV | restart NAMESRV DIR | failover NAMESRV DIR | consumed-read NAMESRV DIR | consumed-verify NAMESRV DIR [strict]");
            System.exit(2);
        }
        try {
            run(args);
        } catch (Throwable e) {
            // The clients' threads would keep the JVM alive after main ends: fail and exit.
            e.printStackTrace();
            fail(args[0] + ": " + e);
        }
        if (!failures.isEmpty()) {
            System.err.println(args[0] + ": " + failures.size() + " failures");
            System.exit(1);
        }
        System.out.println(args[0] + ": all checks passed");
        System.exit(0);
    }
}
