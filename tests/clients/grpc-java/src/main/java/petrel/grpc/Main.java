package petrel.grpc;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.MessageListener;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Scenarios that drive Petrel's gRPC endpoint (RocketMQ 5's gRPC protocol) with the official
 * RocketMQ 5 Java SDK.
 *
 * <pre>
 *   java -jar target/grpc-java-test.jar ENDPOINT SCENARIO [ARGS...]
 *
 *   normal      TOPIC GROUP
 *   invisible   TOPIC GROUP
 *   listed      TOPIC GROUP DONE_FILE  (clients online until DONE_FILE exists, for admin tools)
 *   push        TOPIC GROUP
 *   fifo        TOPIC GROUP      (FIFO topic, FIFO consumer group)
 *   delay       TOPIC GROUP      (DELAY topic)
 *   transaction TOPIC GROUP      (TRANSACTION topic)
 *   mixed-in    TOPIC GROUP COUNT
 *   mixed-out   TOPIC COUNT
 *   errors      TOPIC GROUP      (NORMAL topic)
 *   bench-produce, bench-consume  (throughput and latency runs: see Bench)
 * </pre>
 *
 * <p>ENDPOINT is host:port of the gRPC listener, reached without TLS. Each run prints exactly one
 * verdict line on stdout, {@code ok: ...} (exit 0) or {@code FAIL: ...} (exit 1; 2 for a usage
 * error); progress notes go to stderr as {@code info: ...}. A run never takes longer than 60 s
 * ({@code -Dpetrel.scenarioSeconds=N} changes that). Credentials are sent only when both
 * {@code -Dpetrel.accessKey} and {@code -Dpetrel.secretKey} (or PETREL_ACCESS_KEY and
 * PETREL_SECRET_KEY) are given. The SDK's own log goes to a file under
 * {@code ${java.io.tmpdir}/petrel-grpc-java-test-logs} at level warn unless
 * {@code -Drocketmq.log.root} / {@code -Drocketmq.log.level} say otherwise.
 */
public final class Main {
    private static final String TAG = "TagA";
    private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(5);
    private static final Pattern RESPONSE_CODE = Pattern.compile("response-code=(\\d+)");

    private static final int TOPIC_NOT_FOUND = 40402;
    private static final int MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014;
    private static final int PAYLOAD_TOO_LARGE = 41300;
    private static final int MESSAGE_BODY_TOO_LARGE = 41301;

    private static final AtomicBoolean VERDICT_GIVEN = new AtomicBoolean();
    private static volatile int exitCode = 1;

    private final String endpoint;
    private final String scenario;
    private final long startMs;
    /** Every wait inside a scenario ends by this instant; the watchdog enforces the hard limit. */
    private final long workDeadlineMs;
    private final ClientServiceProvider provider;
    private final ClientConfiguration config;
    private final List<Closeable> opened = Collections.synchronizedList(new ArrayList<>());
    private volatile String phase = "starting";

    /** A scenario's expectation did not hold. */
    private static final class Failure extends Exception {
        Failure(String message) {
            super(message);
        }
    }

    private Main(String endpoint, String scenario, long startMs, long workDeadlineMs) {
        this.endpoint = endpoint;
        this.scenario = scenario;
        this.startMs = startMs;
        this.workDeadlineMs = workDeadlineMs;
        this.provider = ClientServiceProvider.loadService();
        this.config = configuration(0);
    }

    public static void main(String[] args) {
        quietSdkLog();
        if (args.length < 2) {
            usage("missing arguments");
        }
        final String endpoint = args[0];
        final String scenario = args[1];
        final String[] rest = Arrays.copyOfRange(args, 2, args.length);
        if (scenario.startsWith("bench-")) {
            // Benchmark runs (Bench) last as long as they are told and keep their own time bound.
            System.exit(Bench.run(endpoint, scenario, rest));
        }
        final long limitMs = Long.getLong("petrel.scenarioSeconds", 60L) * 1000L;
        final long startMs = System.currentTimeMillis();
        final long workDeadlineMs = startMs + Math.max(5_000L, limitMs - 10_000L);

        final Thread mainThread = Thread.currentThread();
        final Main[] self = new Main[1];
        final Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(limitMs);
            } catch (InterruptedException e) {
                return;
            }
            if (!VERDICT_GIVEN.get()) {
                System.err.println("info: where the scenario was at the time limit:");
                for (StackTraceElement frame : mainThread.getStackTrace()) {
                    System.err.println("info:     at " + frame);
                }
                String step = self[0] == null ? "starting" : self[0].phase;
                verdict(false, scenario + ": no verdict within " + limitMs / 1000 + " s (last step: " + step + ")");
            }
            System.out.flush();
            System.err.flush();
            Runtime.getRuntime().halt(exitCode);
        }, "scenario-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        try {
            Main main = new Main(endpoint, scenario, startMs, workDeadlineMs);
            self[0] = main;
            String held = main.run(rest);
            verdict(true, scenario + ": " + held);
        } catch (Failure f) {
            verdict(false, scenario + ": " + f.getMessage());
        } catch (Throwable t) {
            String step = self[0] == null ? "starting" : self[0].phase;
            verdict(false, scenario + ": " + step + ": " + describe(t));
        }
        if (self[0] != null) {
            long graceMs = Math.max(1_000L, startMs + limitMs - 1_000L - System.currentTimeMillis());
            self[0].closeAll(Math.min(graceMs, 10_000L));
        }
        System.out.flush();
        System.err.flush();
        System.exit(exitCode);
    }

    private String run(String[] a) throws Exception {
        switch (scenario) {
            case "normal":
                need(a, 2, "normal TOPIC GROUP");
                return normal(a[0], a[1]);
            case "invisible":
                need(a, 2, "invisible TOPIC GROUP");
                return invisible(a[0], a[1]);
            case "listed":
                need(a, 3, "listed TOPIC GROUP DONE_FILE");
                return listed(a[0], a[1], a[2]);
            case "push":
                need(a, 2, "push TOPIC GROUP");
                return push(a[0], a[1]);
            case "fifo":
                need(a, 2, "fifo TOPIC GROUP");
                return fifo(a[0], a[1]);
            case "delay":
                need(a, 2, "delay TOPIC GROUP");
                return delay(a[0], a[1]);
            case "transaction":
                need(a, 2, "transaction TOPIC GROUP");
                return transaction(a[0], a[1]);
            case "mixed-in":
                need(a, 3, "mixed-in TOPIC GROUP COUNT");
                return mixedIn(a[0], a[1], count(a[2]));
            case "mixed-out":
                need(a, 2, "mixed-out TOPIC COUNT");
                return mixedOut(a[0], count(a[1]));
            case "errors":
                need(a, 2, "errors TOPIC GROUP");
                return errors(a[0], a[1]);
            case "admin":
                need(a, 2, "admin TOPIC GROUP");
                return admin(a[0], a[1]);
            default:
                usage("unknown scenario " + scenario);
                return null;
        }
    }

    // ---------------------------------------------------------------- scenarios

    /** Send 20 tagged messages, receive and ack them all with a SimpleConsumer, and see none return. */
    private String normal(String topic, String group) throws Exception {
        final int total = 20;
        SimpleConsumer consumer = simpleConsumer(group, topic, new FilterExpression(TAG, FilterExpressionType.TAG),
            Duration.ofSeconds(5));
        Producer producer = producer();

        step("sending " + total + " messages");
        Map<String, String> idByBody = new LinkedHashMap<>();
        for (int i = 0; i < total; i++) {
            String body = "normal-" + i;
            SendReceipt receipt = producer.send(message(topic, body).setTag(TAG).setKeys("normal-key-" + i).build());
            idByBody.put(body, receiptId(receipt, body));
        }

        step("receiving the " + total + " messages");
        Set<String> seen = new HashSet<>();
        long until = Math.min(workDeadlineMs, now() + 30_000L);
        while (seen.size() < total && now() < until) {
            for (MessageView view : consumer.receive(16, Duration.ofSeconds(20))) {
                String body = body(view);
                String sentId = idByBody.get(body);
                expect(sentId != null, "received a message this run did not send: " + describe(view));
                expect(seen.add(body), "received " + body + " twice before its 20 s invisible duration ran out: "
                    + describe(view));
                expect(Optional.of(TAG).equals(view.getTag()),
                    body + " came back with tag " + view.getTag().orElse("<none>") + ", expected " + TAG);
                expect(sentId.equals(view.getMessageId().toString()),
                    body + " came back with message id " + view.getMessageId() + ", its send receipt said " + sentId);
                String key = "normal-key-" + body.substring("normal-".length());
                expect(view.getKeys().contains(key), body + " came back with keys " + view.getKeys() + ", expected "
                    + key);
                expect(view.getDeliveryAttempt() == 1, body + " came back with deliveryAttempt "
                    + view.getDeliveryAttempt() + " on its first delivery, expected 1");
                consumer.ack(view);
            }
        }
        expect(seen.size() == total, "received " + seen.size() + " of " + total + " messages in 30 s; missing "
            + missing(idByBody.keySet(), seen));

        step("checking acked messages stay gone");
        long quietUntil = now() + 6_000L;
        while (now() < quietUntil) {
            List<MessageView> again = consumer.receive(16, Duration.ofSeconds(20));
            expect(again.isEmpty(), "a receive after all acks returned " + again.size() + " message(s), first "
                + (again.isEmpty() ? "" : describe(again.get(0))));
        }
        return total + " messages sent, each receipt carrying a message id; all " + total
            + " received through tag filter " + TAG + " with their ids, keys and deliveryAttempt 1, and acked;"
            + " receives for 6 s afterwards returned nothing";
    }

    /**
     * An unacked message returns after its invisible duration with deliveryAttempt 2;
     * changeInvisibleDuration shortens the wait; an ack after changeInvisibleDuration (which hands the
     * view a new receipt handle) keeps the message gone.
     */
    private String invisible(String topic, String group) throws Exception {
        SimpleConsumer consumer = simpleConsumer(group, topic, FilterExpression.SUB_ALL, Duration.ofSeconds(3));
        Producer producer = producer();

        step("part 1: receive without ack, 3 s invisible duration");
        String id1 = receiptId(producer.send(message(topic, "invisible-1").setTag(TAG).build()), "invisible-1");
        Received first = awaitBody(consumer, "invisible-1", Duration.ofSeconds(3), 15_000L);
        expect(id1.equals(first.view.getMessageId().toString()), "invisible-1 came back with message id "
            + first.view.getMessageId() + ", its send receipt said " + id1);
        expect(first.view.getDeliveryAttempt() == 1, "first delivery of invisible-1 had deliveryAttempt "
            + first.view.getDeliveryAttempt() + ", expected 1");
        step("part 1: waiting for invisible-1 to come back");
        Received again = awaitBody(consumer, "invisible-1", Duration.ofSeconds(20), 15_000L);
        // From the call of the receive that got it: the broker starts the invisible time after
        // that, however long its answer then takes to reach this client on a loaded machine.
        long returnMs = again.atMs - first.askedMs;
        expect(returnMs >= 2_500L, "invisible-1 came back " + returnMs + " ms after the receive that got it "
            + "(3 s invisible duration) was called");
        expect(id1.equals(again.view.getMessageId().toString()), "the returning invisible-1 has message id "
            + again.view.getMessageId() + ", expected " + id1);
        expect(again.view.getDeliveryAttempt() == 2, "the returning invisible-1 has deliveryAttempt "
            + again.view.getDeliveryAttempt() + ", expected 2");
        consumer.ack(again.view);

        step("part 2: changeInvisibleDuration 20 s -> 2 s");
        producer.send(message(topic, "invisible-2").setTag(TAG).build());
        Received second = awaitBody(consumer, "invisible-2", Duration.ofSeconds(20), 15_000L);
        long changedAt = now();
        consumer.changeInvisibleDuration(second.view, Duration.ofSeconds(2));
        Received secondBack = awaitBody(consumer, "invisible-2", Duration.ofSeconds(20), 12_000L);
        long secondReturnMs = secondBack.atMs - changedAt;
        expect(secondReturnMs >= 1_500L, "invisible-2 came back " + secondReturnMs + " ms after the call that "
            + "changed its invisible duration to 2 s");
        consumer.ack(secondBack.view);

        step("part 3: changeInvisibleDuration then ack with the refreshed handle");
        producer.send(message(topic, "invisible-3").setTag(TAG).build());
        Received third = awaitBody(consumer, "invisible-3", Duration.ofSeconds(20), 15_000L);
        consumer.changeInvisibleDuration(third.view, Duration.ofSeconds(2));
        consumer.ack(third.view);
        long quietUntil = now() + 5_000L;
        while (now() < quietUntil) {
            List<MessageView> views = consumer.receive(16, Duration.ofSeconds(20));
            if (!views.isEmpty()) {
                throw new Failure("after acking invisible-3 with the handle from changeInvisibleDuration, a "
                    + "receive returned " + describe(views.get(0)));
            }
        }
        return "invisible-1 returned " + returnMs + " ms after the call of an unacked receive (3 s invisible) with the same id "
            + "and deliveryAttempt 2; invisible-2 returned " + secondReturnMs + " ms after changeInvisibleDuration"
            + " to 2 s (deliveryAttempt " + secondBack.view.getDeliveryAttempt() + ") and was acked with the new "
            + "view; invisible-3 acked with the handle changeInvisibleDuration returned stayed gone for 5 s";
    }

    /**
     * A producer and a SimpleConsumer that stay online, with one message sent, received and acked,
     * until DONE_FILE exists: an admin tool asks about them meanwhile, however slowly it starts.
     */
    private String listed(String topic, String group, String doneFile) throws Exception {
        SimpleConsumer consumer = simpleConsumer(group, topic, FilterExpression.SUB_ALL, Duration.ofSeconds(20));
        Producer producer = producer();
        receiptId(producer.send(message(topic, "listed").setTag(TAG).build()), "listed");
        Received got = awaitBody(consumer, "listed", Duration.ofSeconds(20), 15_000L);
        consumer.ack(got.view);
        System.out.println("ready");
        System.out.flush();
        step("online until " + doneFile + " exists");
        waitUntil(() -> Paths.get(doneFile).toFile().exists(), workDeadlineMs);
        expect(Paths.get(doneFile).toFile().exists(), "nobody created " + doneFile + " within the run's limit");
        return "a producer and a consumer of " + topic + " stayed online until the admin's checks were done";
    }

    /** A PushConsumer gets 30 messages; one fails its first delivery and must be redelivered. */
    private String push(String topic, String group) throws Exception {
        final int total = 30;
        final String chosen = "push-7";
        final AtomicBoolean failedOnce = new AtomicBoolean();
        final AtomicInteger failedAttempt = new AtomicInteger();
        final ConcurrentMap<String, Integer> succeededAttempt = new ConcurrentHashMap<>();
        final AtomicInteger deliveries = new AtomicInteger();
        final Set<String> unexpected = ConcurrentHashMap.newKeySet();
        Set<String> sent = new TreeSet<>();
        for (int i = 0; i < total; i++) {
            sent.add("push-" + i);
        }

        MessageListener listener = view -> {
            deliveries.incrementAndGet();
            String body = body(view);
            if (!sent.contains(body)) {
                unexpected.add(describe(view));
                return ConsumeResult.SUCCESS;
            }
            if (body.equals(chosen) && failedOnce.compareAndSet(false, true)) {
                failedAttempt.set(view.getDeliveryAttempt());
                return ConsumeResult.FAILURE;
            }
            succeededAttempt.putIfAbsent(body, view.getDeliveryAttempt());
            return ConsumeResult.SUCCESS;
        };
        pushConsumer(group, topic, FilterExpression.SUB_ALL, listener);
        Producer producer = producer();

        step("sending " + total + " messages");
        for (String body : sent) {
            receiptId(producer.send(message(topic, body).setTag(TAG).setKeys(body + "-key").build()), body);
        }

        step("waiting for the push consumer to consume all " + total);
        waitUntil(() -> succeededAttempt.size() >= total || !unexpected.isEmpty(), workDeadlineMs);
        expect(unexpected.isEmpty(), "the push consumer got messages this run did not send: " + unexpected);
        expect(succeededAttempt.size() == total, "consumed " + succeededAttempt.size() + " of " + total
            + "; missing " + missing(sent, succeededAttempt.keySet()) + (failedOnce.get() ? ""
            : " (" + chosen + " never arrived)"));
        expect(failedOnce.get(), chosen + " was consumed without ever being failed once");
        int redelivered = succeededAttempt.get(chosen);
        expect(redelivered >= 2, chosen + " failed on deliveryAttempt " + failedAttempt.get()
            + " and was then consumed with deliveryAttempt " + redelivered + ", expected 2 or more");
        return "all " + total + " consumed (" + deliveries.get() + " deliveries); " + chosen + " failed on "
            + "deliveryAttempt " + failedAttempt.get() + " and was redelivered with deliveryAttempt " + redelivered;
    }

    /** Three message groups of ten to a FIFO topic; a FIFO push consumer must see each group in order. */
    private String fifo(String topic, String group) throws Exception {
        final int groups = 3;
        final int perGroup = 10;
        final Map<String, List<Integer>> arrivals = new ConcurrentHashMap<>();
        final Set<String> distinct = ConcurrentHashMap.newKeySet();
        final Set<String> problems = ConcurrentHashMap.newKeySet();
        final Pattern fifoBody = Pattern.compile("g(\\d+)-(\\d+)");

        MessageListener listener = view -> {
            String body = body(view);
            Matcher m = fifoBody.matcher(body);
            if (!m.matches()) {
                problems.add("unexpected message " + describe(view));
                return ConsumeResult.SUCCESS;
            }
            String messageGroup = "g" + m.group(1);
            if (!Optional.of(messageGroup).equals(view.getMessageGroup())) {
                problems.add(body + " came back with message group " + view.getMessageGroup().orElse("<none>"));
            }
            List<Integer> list = arrivals.computeIfAbsent(messageGroup,
                g -> Collections.synchronizedList(new ArrayList<>()));
            list.add(Integer.parseInt(m.group(2)));
            distinct.add(body);
            return ConsumeResult.SUCCESS;
        };
        pushConsumer(group, topic, FilterExpression.SUB_ALL, listener);
        Producer producer = producer();

        step("sending " + groups + " message groups x " + perGroup);
        for (int n = 0; n < perGroup; n++) {
            for (int g = 0; g < groups; g++) {
                String body = "g" + g + "-" + n;
                receiptId(producer.send(message(topic, body).setTag(TAG).setMessageGroup("g" + g).build()), body);
            }
        }

        step("waiting for the FIFO push consumer");
        waitUntil(() -> distinct.size() >= groups * perGroup || !problems.isEmpty(), workDeadlineMs);
        expect(problems.isEmpty(), String.join("; ", problems));
        expect(distinct.size() == groups * perGroup, "consumed " + distinct.size() + " of " + groups * perGroup
            + " distinct messages; arrivals per group " + arrivals);
        int repeats = 0;
        for (int g = 0; g < groups; g++) {
            List<Integer> got;
            List<Integer> raw = arrivals.getOrDefault("g" + g, Collections.emptyList());
            synchronized (raw) {
                got = new ArrayList<>(raw);
            }
            List<Integer> collapsed = new ArrayList<>();
            for (Integer n : got) {
                if (!collapsed.isEmpty() && collapsed.get(collapsed.size() - 1).equals(n)) {
                    repeats++;
                    continue;
                }
                collapsed.add(n);
            }
            List<Integer> wanted = new ArrayList<>();
            for (int n = 0; n < perGroup; n++) {
                wanted.add(n);
            }
            expect(collapsed.equals(wanted), "message group g" + g + " was consumed in the order " + got
                + ", expected " + wanted);
        }
        return "all " + groups * perGroup + " consumed; within each of g0..g" + (groups - 1)
            + " the bodies arrived in order 0.." + (perGroup - 1) + " with their message group set"
            + (repeats == 0 ? "" : " (" + repeats + " immediate redelivery/ies)");
    }

    /** A message with a delivery timestamp 3 s ahead is held back until then. */
    private String delay(String topic, String group) throws Exception {
        SimpleConsumer consumer = simpleConsumer(group, topic, FilterExpression.SUB_ALL, Duration.ofSeconds(3));
        Producer producer = producer();

        step("sending a message due in 3 s");
        long due = now() + 3_000L;
        SendReceipt receipt = producer.send(message(topic, "delay-1").setTag(TAG).setDeliveryTimestamp(due).build());
        long sentAt = now();
        receiptId(receipt, "delay-1");

        step("waiting for the delayed message");
        long until = Math.min(workDeadlineMs, sentAt + 15_000L);
        while (now() < until) {
            for (MessageView view : consumer.receive(16, Duration.ofSeconds(20))) {
                long at = now();
                String body = body(view);
                expect(body.equals("delay-1"), "received a message this run did not send: " + describe(view));
                long delayMs = at - sentAt;
                // Measured against the due time itself: the send can take a while on a loaded
                // machine, and a timer that is on time then delivers less than 3 s after it returned.
                long earlyMs = due - at;
                expect(earlyMs <= 500L, "delay-1 was delivered " + delayMs + " ms after its send returned, "
                    + earlyMs + " ms before its delivery timestamp (at most 500 ms allowed)");
                consumer.ack(view);
                String stamp = view.getDeliveryTimestamp().map(t -> t == due ? "carried as sent"
                    : "carried as " + t + " instead of " + due).orElse("not carried on the received message");
                return "delay-1 delivered " + (at - due) + " ms after its delivery timestamp (" + delayMs
                    + " ms after its send returned; due 3000 ms after the send began); delivery timestamp " + stamp;
            }
        }
        throw new Failure("delay-1 (due 3 s after sending) was not delivered within " + (now() - sentAt) + " ms");
    }

    /** Commit, rollback, and an open transaction resolved through the broker's check-back. */
    private String transaction(String topic, String group) throws Exception {
        SimpleConsumer consumer = simpleConsumer(group, topic, FilterExpression.SUB_ALL, Duration.ofSeconds(3));
        final List<String> checks = Collections.synchronizedList(new ArrayList<>());
        final long[] firstCheckAt = new long[1];
        TransactionChecker checker = view -> {
            String body = body(view);
            synchronized (checks) {
                if (checks.isEmpty()) {
                    firstCheckAt[0] = now();
                }
                checks.add(body);
            }
            return body.startsWith("check-commit") ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
        };
        step("starting the transactional producer");
        Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .setTransactionChecker(checker)
            .build();
        opened.add(producer);

        step("(a) send commit-1 and commit");
        Transaction commit = producer.beginTransaction();
        receiptId(producer.send(message(topic, "commit-1").setTag(TAG).build(), commit), "commit-1");
        commit.commit();

        step("(b) send rollback-1 and roll back");
        Transaction rollback = producer.beginTransaction();
        receiptId(producer.send(message(topic, "rollback-1").setTag(TAG).build(), rollback), "rollback-1");
        rollback.rollback();
        long rolledBackAt = now();

        step("(c) send check-commit-1 and leave the transaction open");
        Transaction open = producer.beginTransaction();
        receiptId(producer.send(message(topic, "check-commit-1").setTag(TAG).build(), open), "check-commit-1");
        long leftOpenAt = now();

        step("receiving: commit-1 now, check-commit-1 after the check-back, rollback-1 never");
        long commitSeenAt = -1;
        long checkSeenAt = -1;
        while (now() < workDeadlineMs
            && (commitSeenAt < 0 || checkSeenAt < 0 || now() < rolledBackAt + 3_000L)) {
            for (MessageView view : consumer.receive(16, Duration.ofSeconds(20))) {
                String body = body(view);
                switch (body) {
                    case "commit-1":
                        expect(commitSeenAt < 0, "commit-1 was delivered twice");
                        commitSeenAt = now();
                        break;
                    case "check-commit-1":
                        expect(checkSeenAt < 0, "check-commit-1 was delivered twice");
                        expect(checks.contains("check-commit-1"), "check-commit-1 was delivered although its "
                            + "transaction was never ended and the checker was never asked about it");
                        checkSeenAt = now();
                        break;
                    case "rollback-1":
                        throw new Failure("rollback-1 was delivered although its transaction was rolled back: "
                            + describe(view));
                    default:
                        throw new Failure("received a message this run did not send: " + describe(view));
                }
                consumer.ack(view);
            }
        }
        expect(commitSeenAt >= 0, "commit-1 was not delivered after its transaction was committed");
        expect(checkSeenAt >= 0, "check-commit-1 was not delivered within " + (now() - leftOpenAt) / 1000
            + " s of being left open; checker calls: " + checks);
        long firstCheck;
        synchronized (checks) {
            firstCheck = firstCheckAt[0];
        }
        return "commit-1 delivered after commit; rollback-1 never delivered; check-commit-1, left open, was checked "
            + "back " + (firstCheck - leftOpenAt) + " ms later, committed by the checker and delivered "
            + (checkSeenAt - leftOpenAt) + " ms after it was sent (checker calls: " + checks + ")";
    }

    /** Receive COUNT messages a remoting client sent (bodies remoting-N) and ack them. */
    private String mixedIn(String topic, String group, int count) throws Exception {
        SimpleConsumer consumer = simpleConsumer(group, topic, FilterExpression.SUB_ALL, Duration.ofSeconds(5));
        Pattern remoting = Pattern.compile("remoting-\\d+");
        Set<String> seen = new TreeSet<>();
        List<String> others = new ArrayList<>();
        String sample = null;

        step("receiving " + count + " messages sent over remoting");
        while (seen.size() < count && now() < workDeadlineMs) {
            for (MessageView view : consumer.receive(16, Duration.ofSeconds(20))) {
                String body = body(view);
                if (remoting.matcher(body).matches()) {
                    seen.add(body);
                    if (sample == null) {
                        sample = describe(view);
                    }
                } else {
                    others.add(body);
                }
                consumer.ack(view);
            }
        }
        expect(seen.size() >= count, "received " + seen.size() + " of " + count + " remoting-sent messages"
            + (others.isEmpty() ? "" : "; other bodies: " + others));
        info("first remoting-sent message as the gRPC consumer saw it: " + sample);
        return seen.size() + " remoting-sent messages received and acked"
            + (others.isEmpty() ? "" : " (also " + others.size() + " other message(s): " + others + ")");
    }

    /** Send COUNT messages (bodies grpc-N, tag TagA) for another client to read. */
    private String mixedOut(String topic, int count) throws Exception {
        Producer producer = producer();
        step("sending " + count + " messages");
        for (int i = 0; i < count; i++) {
            String body = "grpc-" + i;
            receiptId(producer.send(message(topic, body).setTag(TAG).setKeys("grpc-key-" + i).build()), body);
        }
        return count + " messages grpc-0..grpc-" + (count - 1) + " sent with tag " + TAG
            + ", each receipt carrying a message id";
    }

    /** Requests the broker must refuse, and the codes it refuses them with. */
    private String errors(String topic, String group) throws Exception {
        List<String> held = new ArrayList<>();
        Producer producer = producer();
        String missingTopic = topic + "-missing-" + Long.toString(System.currentTimeMillis(), 36);

        step("send to the missing topic " + missingTopic);
        Throwable err = attempt(() -> producer.send(message(missingTopic, "to-nowhere").build()));
        expect(err != null, "a send to the missing topic " + missingTopic + " succeeded");
        int code = responseCode(err);
        expect(code == TOPIC_NOT_FOUND, "a send to a missing topic failed with code " + codeText(code)
            + ", expected TOPIC_NOT_FOUND (40402): " + describe(err));
        held.add("send to a missing topic -> " + err.getClass().getSimpleName() + " code 40402");

        step("one ordinary send, so the producer has the broker's settings");
        receiptId(producer.send(message(topic, "errors-ordinary").setTag(TAG).build()), "errors-ordinary");

        step("send a 4 MiB + 1 byte body");
        byte[] big = new byte[4 * 1024 * 1024 + 1];
        Arrays.fill(big, (byte) 'x');
        err = attempt(() -> producer.send(provider.newMessageBuilder().setTopic(topic).setTag(TAG).setBody(big)
            .build()));
        expect(err != null, "a 4 MiB + 1 byte body was accepted");
        code = responseCode(err);
        IOException local = causeOf(err, IOException.class);
        if (code == MESSAGE_BODY_TOO_LARGE || code == PAYLOAD_TOO_LARGE) {
            held.add("4 MiB+1 body -> refused by the broker with " + err.getClass().getSimpleName() + " code " + code);
        } else if (code < 0 && local != null && String.valueOf(local.getMessage()).contains("exceeds")) {
            held.add("4 MiB+1 body -> refused by the client itself before sending, against the broker's "
                + "max body size (" + local.getMessage() + ")");
        } else {
            throw new Failure("a 4 MiB + 1 byte body failed with code " + codeText(code) + ", expected "
                + "MESSAGE_BODY_TOO_LARGE (41301) or PAYLOAD_TOO_LARGE (41300) or the client's own refusal: "
                + describe(err));
        }

        step("send a FIFO message (with a message group) to the NORMAL topic");
        err = attempt(() -> producer.send(message(topic, "errors-fifo").setTag(TAG).setMessageGroup("errors-g")
            .build()));
        expect(err != null, "a message with a message group was accepted by the NORMAL topic " + topic);
        code = responseCode(err);
        IllegalArgumentException typeMismatch = causeOf(err, IllegalArgumentException.class);
        if (code == MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) {
            held.add("FIFO message to a NORMAL topic -> refused by the broker with " + err.getClass().getSimpleName()
                + " code 40014");
        } else if (code < 0 && typeMismatch != null
            && String.valueOf(typeMismatch.getMessage()).contains("accept message types")) {
            held.add("FIFO message to a NORMAL topic -> refused by the client itself, from the route's accepted "
                + "message types and the broker's validate_message_type (" + typeMismatch.getMessage() + ")");
        } else {
            throw new Failure("a FIFO message to a NORMAL topic failed with code " + codeText(code) + ", expected "
                + "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (40014) or the client's own refusal: " + describe(err));
        }

        step("start a SimpleConsumer subscribed to the missing topic");
        ClientConfiguration once = configuration(1);
        final SimpleConsumer[] consumer = new SimpleConsumer[1];
        err = attempt(() -> consumer[0] = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(once)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(missingTopic, FilterExpression.SUB_ALL))
            .setAwaitDuration(Duration.ofSeconds(3))
            .build());
        if (consumer[0] != null) {
            opened.add(consumer[0]);
        }
        expect(err != null, "a SimpleConsumer subscribed to the missing topic " + missingTopic + " started");
        code = responseCode(err);
        expect(code == TOPIC_NOT_FOUND, "a SimpleConsumer on a missing topic failed to start with code "
            + codeText(code) + ", expected TOPIC_NOT_FOUND (40402): " + describe(err));
        held.add("SimpleConsumer on a missing topic -> start-up refused with code 40402");
        return String.join("; ", held);
    }

    /**
     * A PushConsumer that an admin questions through the broker (the script runs mqadmin
     * consumerStatus -s and queryMsgById -d meanwhile): it consumes one message, prints its id
     * on a line "msgid ID" and "ready", then waits for that message to come back once more
     * through VerifyMessageCommand (consumeMessageDirectly), which the listener sees again.
     */
    private String admin(String topic, String group) throws Exception {
        final String chosen = "verify-me";
        final AtomicInteger seen = new AtomicInteger();
        final Set<String> unexpected = ConcurrentHashMap.newKeySet();
        MessageListener listener = view -> {
            if (chosen.equals(body(view))) {
                seen.incrementAndGet();
            } else {
                unexpected.add(describe(view));
            }
            return ConsumeResult.SUCCESS;
        };
        pushConsumer(group, topic, FilterExpression.SUB_ALL, listener);
        Producer producer = producer();
        String id = receiptId(producer.send(message(topic, chosen).setTag(TAG).build()), chosen);
        step("waiting for " + chosen + " to be consumed");
        waitUntil(() -> seen.get() >= 1, workDeadlineMs);
        expect(seen.get() == 1, chosen + " was consumed " + seen.get() + " times before any admin asked");
        System.out.println("msgid " + id);
        System.out.println("ready");
        System.out.flush();
        step("waiting for the admin's consumeMessageDirectly to deliver " + chosen + " again");
        waitUntil(() -> seen.get() >= 2, workDeadlineMs);
        expect(unexpected.isEmpty(), "the push consumer got messages this run did not send: " + unexpected);
        expect(seen.get() == 2, chosen + " was seen " + seen.get() + " times; expected its delivery and one "
            + "direct consumption");
        return chosen + " (" + id + ") consumed, then once more through VerifyMessageCommand";
    }

    // ---------------------------------------------------------------- clients

    private ClientConfiguration configuration(int maxStartupAttempts) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            // TLS when asked (-Dpetrel.ssl=true): the SDK trusts any certificate, as it does by default.
            .enableSsl(Boolean.getBoolean("petrel.ssl"))
            .setRequestTimeout(REQUEST_TIMEOUT);
        if (maxStartupAttempts > 0) {
            builder.setMaxStartupAttempts(maxStartupAttempts);
        }
        String accessKey = setting("petrel.accessKey", "PETREL_ACCESS_KEY");
        String secretKey = setting("petrel.secretKey", "PETREL_SECRET_KEY");
        if (accessKey != null && secretKey != null) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(accessKey, secretKey));
        }
        return builder.build();
    }

    /** A producer bound to no topic up front: the route is fetched at the first send. */
    private Producer producer() throws ClientException {
        step("starting the producer");
        Producer producer = provider.newProducerBuilder().setClientConfiguration(config).build();
        opened.add(producer);
        return producer;
    }

    private SimpleConsumer simpleConsumer(String group, String topic, FilterExpression filter, Duration await)
        throws ClientException {
        step("starting a SimpleConsumer in group " + group + " on " + topic);
        SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, filter))
            .setAwaitDuration(await)
            .build();
        opened.add(consumer);
        return consumer;
    }

    private PushConsumer pushConsumer(String group, String topic, FilterExpression filter, MessageListener listener)
        throws ClientException {
        step("starting a PushConsumer in group " + group + " on " + topic);
        PushConsumer consumer = provider.newPushConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, filter))
            .setMessageListener(listener)
            .build();
        opened.add(consumer);
        return consumer;
    }

    private MessageBuilder message(String topic, String body) {
        return provider.newMessageBuilder().setTopic(topic).setBody(body.getBytes(StandardCharsets.UTF_8));
    }

    /** Closes every client, newest first, giving up after {@code maxMs} (a push consumer may wait out a long poll). */
    private void closeAll(long maxMs) {
        List<Closeable> toClose;
        synchronized (opened) {
            toClose = new ArrayList<>(opened);
        }
        Collections.reverse(toClose);
        Thread closer = new Thread(() -> {
            for (Closeable c : toClose) {
                try {
                    c.close();
                } catch (Throwable t) {
                    info("closing a client failed: " + describe(t));
                }
            }
        }, "client-closer");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(maxMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (closer.isAlive()) {
            info("clients still closing after " + maxMs + " ms; exiting anyway");
        }
    }

    // ---------------------------------------------------------------- helpers

    private static final class Received {
        final MessageView view;
        /** When the receive that returned it was called: the broker's invisible time starts later. */
        final long askedMs;
        final long atMs;

        Received(MessageView view, long askedMs, long atMs) {
            this.view = view;
            this.askedMs = askedMs;
            this.atMs = atMs;
        }
    }

    /** Receives until the message with this body arrives; any other message is a failure. */
    private Received awaitBody(SimpleConsumer consumer, String body, Duration invisible, long timeoutMs)
        throws Exception {
        long until = Math.min(workDeadlineMs, now() + timeoutMs);
        while (now() < until) {
            long asked = now();
            List<MessageView> views = consumer.receive(16, invisible);
            long at = now();
            for (MessageView view : views) {
                expect(body.equals(body(view)), "waiting for " + body + ", received " + describe(view));
            }
            if (!views.isEmpty()) {
                expect(views.size() == 1, "waiting for " + body + ", received it " + views.size()
                    + " times in one receive");
                return new Received(views.get(0), asked, at);
            }
        }
        throw new Failure(body + " was not received within " + timeoutMs + " ms (step: " + phase + ")");
    }

    private interface Call<T> {
        T call() throws Exception;
    }

    /** Runs the call and returns what it threw, or null when it returned. */
    private static <T> Throwable attempt(Call<T> call) {
        try {
            call.call();
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    private void waitUntil(BooleanSupplier condition, long untilMs) throws InterruptedException {
        while (!condition.getAsBoolean() && now() < untilMs) {
            Thread.sleep(100);
        }
    }

    private static String receiptId(SendReceipt receipt, String body) throws Failure {
        if (receipt == null || receipt.getMessageId() == null || receipt.getMessageId().toString().isEmpty()) {
            throw new Failure("the send receipt for " + body + " has no message id");
        }
        return receipt.getMessageId().toString();
    }

    private static String body(MessageView view) {
        ByteBuffer buffer = view.getBody().duplicate();
        byte[] bytes = new byte[buffer.remaining()];
        buffer.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static String describe(MessageView view) {
        String body = body(view);
        if (body.length() > 64) {
            body = body.substring(0, 64) + "...(" + body.length() + " bytes)";
        }
        return "{id=" + view.getMessageId() + ", topic=" + view.getTopic() + ", body=" + body
            + ", tag=" + view.getTag().orElse("") + ", keys=" + view.getKeys()
            + ", group=" + view.getMessageGroup().orElse("") + ", deliveryAttempt=" + view.getDeliveryAttempt()
            + "}";
    }

    /** The exception and its causes, one "Class: message" each. */
    private static String describe(Throwable t) {
        StringBuilder out = new StringBuilder();
        Set<Throwable> seen = Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (Throwable c = t; c != null && seen.add(c); c = c.getCause()) {
            if (out.length() > 0) {
                out.append(" <- caused by ");
            }
            out.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return out.toString();
    }

    /**
     * The RocketMQ status code a failure carries. The SDK's ClientException has no getter for it; the
     * exceptions built from a response status put "response-code=N" in their message.
     */
    private static int responseCode(Throwable t) {
        Set<Throwable> seen = Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (Throwable c = t; c != null && seen.add(c); c = c.getCause()) {
            if (c.getMessage() != null) {
                Matcher m = RESPONSE_CODE.matcher(c.getMessage());
                if (m.find()) {
                    return Integer.parseInt(m.group(1));
                }
            }
        }
        return -1;
    }

    private static String codeText(int code) {
        return code < 0 ? "<none>" : Integer.toString(code);
    }

    private static <T extends Throwable> T causeOf(Throwable t, Class<T> type) {
        Set<Throwable> seen = Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (Throwable c = t; c != null && seen.add(c); c = c.getCause()) {
            if (type.isInstance(c)) {
                return type.cast(c);
            }
        }
        return null;
    }

    private static String missing(Set<String> wanted, Set<String> got) {
        Set<String> left = new TreeSet<>(wanted);
        left.removeAll(got);
        return left.toString();
    }

    private static void expect(boolean condition, String failure) throws Failure {
        if (!condition) {
            throw new Failure(failure);
        }
    }

    private void step(String what) {
        phase = what;
        info(scenario + " +" + (now() - startMs) + " ms: " + what);
    }

    private static void info(String text) {
        System.err.println("info: " + text);
    }

    private static long now() {
        return System.currentTimeMillis();
    }

    private static void verdict(boolean ok, String text) {
        if (!VERDICT_GIVEN.compareAndSet(false, true)) {
            return;
        }
        exitCode = ok ? 0 : 1;
        System.out.println((ok ? "ok: " : "FAIL: ") + text);
        System.out.flush();
    }

    private static void need(String[] args, int n, String shape) {
        if (args.length != n) {
            usage("expected: ENDPOINT " + shape);
        }
    }

    private static int count(String text) {
        try {
            int n = Integer.parseInt(text);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        usage("COUNT must be a positive number, got " + text);
        return 0;
    }

    private static void usage(String why) {
        System.err.println("usage: java -jar grpc-java-test.jar ENDPOINT SCENARIO [ARGS...]\n"
            + "  normal|invisible|push|fifo|delay|transaction|errors TOPIC GROUP\n"
            + "  mixed-in TOPIC GROUP COUNT\n"
            + "  mixed-out TOPIC COUNT");
        System.out.println("FAIL: usage: " + why);
        System.out.flush();
        System.exit(2);
    }

    private static String setting(String property, String env) {
        String value = System.getProperty(property);
        if (value == null || value.isEmpty()) {
            value = System.getenv(env);
        }
        return value == null || value.isEmpty() ? null : value;
    }

    /**
     * The SDK logs through its bundled logback configuration, which reads these properties: the level,
     * the folder of rocketmq-client.log (default ~/logs/rocketmq), and whether to copy to the console.
     */
    private static void quietSdkLog() {
        setDefault("rocketmq.log.level", "warn");
        setDefault("rocketmq.log.root",
            Paths.get(System.getProperty("java.io.tmpdir"), "petrel-grpc-java-test-logs").toString());
        setDefault("mq.consoleAppender.enabled", "false");
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }
}
