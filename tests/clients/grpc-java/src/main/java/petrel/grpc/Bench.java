package petrel.grpc;

import java.io.Closeable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Throughput and latency runs of the RocketMQ 5 Java SDK against any gRPC endpoint (Petrel,
 * RocketMQ's proxy), reached through {@link Main}:
 *
 * <pre>
 *   java -jar target/grpc-java-test.jar ENDPOINT bench-produce TOPIC THREADS SECONDS BODY_BYTES [RATE_PER_SECOND]
 *   java -jar target/grpc-java-test.jar ENDPOINT bench-consume TOPIC GROUP SECONDS THREADS
 * </pre>
 *
 * <p>{@code bench-produce}: THREADS threads share one Producer, each sending synchronously in a
 * loop until SECONDS have passed. Without a rate the loop is closed (the next send starts when the
 * last returns) and a send's latency runs from its start; with RATE_PER_SECOND each thread paces
 * itself to RATE/THREADS sends a second on a fixed schedule, and a send's latency runs from the
 * instant the schedule meant it to start, so a slow send also charges the sends it held up. Before
 * the measured window opens, a thread that falls behind its schedule skips ahead instead of
 * catching up, so the warm-up's backlog is not charged to the window.
 *
 * <p>{@code bench-consume}: THREADS SimpleConsumers of GROUP (one a thread) receive up to 32
 * messages at a time (30 s invisible, 2 s long poll) and ack each, for SECONDS.
 *
 * <p>Stdout, line by line: {@code window start} and {@code window end} when the measured window
 * opens and closes (so a caller can sample the server's CPU over exactly that window), {@code tick
 * SECOND COUNT} once a second (sends, or acks, that completed in that second of the run, warm-up
 * included), and last {@code result ...}:
 * {@code result sends=N errors=N tps=X p50_us=N p99_us=N p9999_us=N max_us=N} or
 * {@code result received=N tps=X errors=N}. Everything in {@code result} covers only what completed
 * inside the window, from the warm-up's end ({@code -Dpetrel.bench.warmupSeconds}, default 0) to
 * SECONDS; tps divides by the window's length. Setting the run up (starting clients, fetching
 * routes) happens before the clock starts. A run is bounded by SECONDS + 60 s; past it, it prints
 * {@code FAIL: ...} and exits 1. A usage error prints {@code FAIL: usage: ...} and exits 2.
 */
final class Bench {
    private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(5);
    private static final int RECEIVE_BATCH = 32;
    private static final Duration INVISIBLE = Duration.ofSeconds(30);
    private static final Duration AWAIT = Duration.ofSeconds(2);
    /** The ticker prints a second's count this long after the second ends, so its last sends are in. */
    private static final long TICK_GRACE_NS = 20_000_000L;
    /** At most this many failures are described on stderr; the rest are only counted. */
    private static final int ERRORS_SHOWN = 10;

    private final ClientServiceProvider provider = ClientServiceProvider.loadService();
    private final ClientConfiguration config;
    private final List<Closeable> opened = Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger errorsShown = new AtomicInteger();

    private Bench(String endpoint) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(REQUEST_TIMEOUT);
        String accessKey = setting("petrel.accessKey", "PETREL_ACCESS_KEY");
        String secretKey = setting("petrel.secretKey", "PETREL_SECRET_KEY");
        if (accessKey != null && secretKey != null) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(accessKey, secretKey));
        }
        this.config = builder.build();
    }

    /** Runs one bench scenario and returns the process's exit status. */
    static int run(String endpoint, String scenario, String[] a) {
        final boolean produce;
        switch (scenario) {
            case "bench-produce":
                if (a.length != 4 && a.length != 5) {
                    return usage("expected: ENDPOINT bench-produce TOPIC THREADS SECONDS BODY_BYTES [RATE_PER_SECOND]");
                }
                produce = true;
                break;
            case "bench-consume":
                if (a.length != 4) {
                    return usage("expected: ENDPOINT bench-consume TOPIC GROUP SECONDS THREADS");
                }
                produce = false;
                break;
            default:
                return usage("unknown scenario " + scenario);
        }
        final int seconds = positive(a[2], "SECONDS");
        final int threads = positive(produce ? a[1] : a[3], "THREADS");
        final int bodyBytes = produce ? positive(a[3], "BODY_BYTES") : 0;
        final double rate = produce && a.length == 5 ? rate(a[4]) : 0;
        if (seconds < 0 || threads < 0 || bodyBytes < 0 || rate < 0) {
            return 2;
        }
        final long warmup = Long.getLong("petrel.bench.warmupSeconds", 0L);
        if (warmup < 0 || warmup >= seconds) {
            return usage("-Dpetrel.bench.warmupSeconds must be at least 0 and less than SECONDS (" + seconds
                + "), got " + warmup);
        }
        // The run's own bound, in place of Main's 60 s scenario limit: its length plus a minute
        // for starting and closing clients.
        startWatchdog(scenario, seconds + 60L);

        Bench bench = new Bench(endpoint);
        int status;
        try {
            status = produce
                ? bench.produce(a[0], threads, seconds, (int) warmup, bodyBytes, rate)
                : bench.consume(a[0], a[1], seconds, (int) warmup, threads);
        } catch (Throwable t) {
            System.out.println("FAIL: " + scenario + ": " + describe(t));
            status = 1;
        }
        System.out.flush();
        bench.closeAll(10_000L);
        return status;
    }

    // ---------------------------------------------------------------- bench-produce

    private int produce(String topic, int threads, int seconds, int warmup, int bodyBytes, double rate)
        throws Exception {
        info("starting the producer (topic " + topic + ", " + threads + " threads, " + bodyBytes + " B bodies, "
            + (rate > 0 ? "open loop at " + rate + " sends/s" : "closed loop") + ")");
        // Naming the topic up front makes the producer fetch its route now, outside the clock.
        Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
        opened.add(producer);
        final byte[] body = new byte[bodyBytes];
        Arrays.fill(body, (byte) 'x');

        final Clock clock = new Clock(seconds, warmup);
        final Histogram[] histograms = new Histogram[threads];
        final long[] errors = new long[threads];
        final long intervalNs = rate > 0 ? Math.max(1L, Math.round(1e9 * threads / rate)) : 0L;
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            final int index = i;
            final Histogram histogram = new Histogram();
            histograms[i] = histogram;
            workers[i] = new Thread(() -> {
                // Open loop: threads start spread over one interval so their sends do not bunch up.
                long next = clock.startNs + intervalNs * index / threads;
                while (true) {
                    long startNs;
                    if (intervalNs > 0) {
                        if (next >= clock.endNs) {
                            break;
                        }
                        parkUntil(next);
                        startNs = next;
                        next += intervalNs;
                        // Until the measured window opens, a thread that fell behind (the JIT
                        // still compiling the SDK) drops what it owes instead of catching up:
                        // the backlog would otherwise be charged to the window's first sends.
                        long nowNs = System.nanoTime();
                        if (nowNs < clock.measureFromNs && next < nowNs) {
                            next = nowNs;
                        }
                    } else {
                        startNs = System.nanoTime();
                        if (startNs >= clock.endNs) {
                            break;
                        }
                    }
                    boolean ok;
                    try {
                        producer.send(provider.newMessageBuilder().setTopic(topic).setBody(body).build());
                        ok = true;
                    } catch (Throwable t) {
                        ok = false;
                        showError("send", t);
                    }
                    long doneNs = System.nanoTime();
                    if (ok) {
                        clock.tick(doneNs);
                    }
                    if (clock.measured(doneNs)) {
                        if (ok) {
                            histogram.record((doneNs - startNs) / 1_000L);
                        } else {
                            errors[index]++;
                        }
                    }
                }
            }, "bench-producer-" + i);
        }
        clock.start(workers);

        Histogram all = new Histogram();
        long errorCount = 0;
        for (int i = 0; i < threads; i++) {
            all.add(histograms[i]);
            errorCount += errors[i];
        }
        long sends = all.count();
        System.out.println("result sends=" + sends + " errors=" + errorCount
            + " tps=" + String.format("%.1f", sends / (double) clock.windowSeconds())
            + " p50_us=" + all.percentile(0.50) + " p99_us=" + all.percentile(0.99)
            + " p9999_us=" + all.percentile(0.9999) + " max_us=" + all.max());
        return sends > 0 ? 0 : 1;
    }

    // ---------------------------------------------------------------- bench-consume

    private int consume(String topic, String group, int seconds, int warmup, int threads) throws Exception {
        info("starting " + threads + " SimpleConsumers in group " + group + " on " + topic);
        List<SimpleConsumer> consumers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
                .setClientConfiguration(config)
                .setConsumerGroup(group)
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
                .setAwaitDuration(AWAIT)
                .build();
            opened.add(consumer);
            consumers.add(consumer);
        }

        final Clock clock = new Clock(seconds, warmup);
        final LongAdder received = new LongAdder();
        final LongAdder errors = new LongAdder();
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            final SimpleConsumer consumer = consumers.get(i);
            workers[i] = new Thread(() -> {
                while (System.nanoTime() < clock.endNs) {
                    List<MessageView> views;
                    try {
                        views = consumer.receive(RECEIVE_BATCH, INVISIBLE);
                    } catch (Throwable t) {
                        showError("receive", t);
                        if (clock.measured(System.nanoTime())) {
                            errors.increment();
                        }
                        continue;
                    }
                    // The batch's acks go out together; each counts when its answer arrives.
                    CompletableFuture<?>[] acks = new CompletableFuture<?>[views.size()];
                    for (int j = 0; j < acks.length; j++) {
                        acks[j] = consumer.ackAsync(views.get(j)).whenComplete((ignored, t) -> {
                            long doneNs = System.nanoTime();
                            if (t == null) {
                                clock.tick(doneNs);
                                if (clock.measured(doneNs)) {
                                    received.increment();
                                }
                            } else {
                                showError("ack", t);
                                if (clock.measured(doneNs)) {
                                    errors.increment();
                                }
                            }
                        });
                    }
                    try {
                        CompletableFuture.allOf(acks).join();
                    } catch (Throwable ignored) {
                        // each failure was counted where it completed
                    }
                }
            }, "bench-consumer-" + i);
        }
        clock.start(workers);

        long n = received.sum();
        System.out.println("result received=" + n + " tps="
            + String.format("%.1f", n / (double) clock.windowSeconds()) + " errors=" + errors.sum());
        return 0;
    }

    // ---------------------------------------------------------------- timing

    /**
     * The run's clock: second 0 starts when the workers start; the window measured runs from the
     * warm-up's end to the last second's end. A daemon ticker prints the per-second counts and the
     * window's edges.
     */
    private static final class Clock {
        final int seconds;
        final int warmup;
        final LongAdder[] perSecond;
        volatile long startNs;
        volatile long measureFromNs;
        volatile long endNs;

        Clock(int seconds, int warmup) {
            this.seconds = seconds;
            this.warmup = warmup;
            this.perSecond = new LongAdder[seconds];
            for (int i = 0; i < seconds; i++) {
                perSecond[i] = new LongAdder();
            }
            // Provisional, so nothing runs or counts before start() sets the real instants.
            this.startNs = System.nanoTime();
            this.measureFromNs = Long.MAX_VALUE;
            this.endNs = this.startNs;
        }

        int windowSeconds() {
            return seconds - warmup;
        }

        boolean measured(long ns) {
            return ns >= measureFromNs && ns < endNs;
        }

        void tick(long ns) {
            long second = (ns - startNs) / 1_000_000_000L;
            if (second >= 0 && second < seconds) {
                perSecond[(int) second].increment();
            }
        }

        /** Starts the workers and the ticker, then waits for all of them. */
        void start(Thread[] workers) throws InterruptedException {
            long now = System.nanoTime();
            startNs = now;
            measureFromNs = now + warmup * 1_000_000_000L;
            endNs = now + seconds * 1_000_000_000L;
            Thread ticker = new Thread(this::tickerLoop, "bench-ticker");
            ticker.setDaemon(true);
            ticker.start();
            for (Thread worker : workers) {
                worker.start();
            }
            for (Thread worker : workers) {
                worker.join();
            }
            ticker.join();
        }

        private void tickerLoop() {
            if (warmup == 0) {
                line("window start");
            }
            for (int i = 0; i < seconds; i++) {
                long boundary = startNs + (i + 1) * 1_000_000_000L;
                parkUntil(boundary);
                if (i + 1 == warmup) {
                    line("window start");
                }
                if (i + 1 == seconds) {
                    line("window end");
                }
                parkUntil(boundary + TICK_GRACE_NS);
                line("tick " + i + " " + perSecond[i].sum());
            }
        }

        private static void line(String text) {
            System.out.println(text);
            System.out.flush();
        }
    }

    private static void parkUntil(long deadlineNs) {
        long left;
        while ((left = deadlineNs - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    // ---------------------------------------------------------------- histogram

    /**
     * Latencies in microseconds, log-linear: values below 256 each have their own bucket; above,
     * every power of two is cut into 128 equal buckets, so a bucket is at most 1/128 (0.8%) of its
     * values wide. Values past 100 s count in the last bucket; the exact maximum is kept apart.
     * One thread records into it; others read it only after that thread has ended.
     */
    static final class Histogram {
        private static final int SUB_BITS = 7;
        private static final int SUB = 1 << SUB_BITS;
        private static final long LIMIT_US = 100_000_000L;
        private static final int TOP_EXPONENT = 63 - Long.numberOfLeadingZeros(LIMIT_US);
        private static final int BUCKETS = 2 * SUB + (TOP_EXPONENT - SUB_BITS) * SUB;

        private final long[] counts = new long[BUCKETS];
        private long total;
        private long max;

        void record(long us) {
            long v = Math.max(0L, us);
            max = Math.max(max, v);
            counts[index(Math.min(v, LIMIT_US))]++;
            total++;
        }

        void add(Histogram other) {
            for (int i = 0; i < BUCKETS; i++) {
                counts[i] += other.counts[i];
            }
            total += other.total;
            max = Math.max(max, other.max);
        }

        long count() {
            return total;
        }

        long max() {
            return max;
        }

        /**
         * The highest value of the bucket holding the q-th quantile (never above the maximum seen;
         * the maximum itself for the last bucket); 0 if empty.
         */
        long percentile(double q) {
            if (total == 0) {
                return 0;
            }
            long rank = Math.max(1L, (long) Math.ceil(q * total));
            long seen = 0;
            for (int i = 0; i < BUCKETS; i++) {
                seen += counts[i];
                if (seen >= rank) {
                    // The last bucket also holds everything past the limit: only the maximum is known there.
                    return i == index(LIMIT_US) ? max : Math.min(highest(i), max);
                }
            }
            return max;
        }

        static int index(long v) {
            if (v < 2 * SUB) {
                return (int) v;
            }
            int exponent = 63 - Long.numberOfLeadingZeros(v);
            int shift = exponent - SUB_BITS;
            int mantissa = (int) (v >>> shift) - SUB;
            return 2 * SUB + (exponent - SUB_BITS - 1) * SUB + mantissa;
        }

        static long highest(int index) {
            if (index < 2 * SUB) {
                return index;
            }
            int j = index - 2 * SUB;
            int shift = j / SUB + 1;
            long low = (long) (SUB + j % SUB) << shift;
            return low + (1L << shift) - 1;
        }
    }

    // ---------------------------------------------------------------- helpers

    private void showError(String what, Throwable t) {
        if (errorsShown.incrementAndGet() <= ERRORS_SHOWN) {
            info(what + " failed: " + describe(t));
        }
    }

    /** Closes every client, newest first, giving up after {@code maxMs}. */
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
        }, "bench-closer");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(maxMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void startWatchdog(String scenario, long limitSeconds) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(limitSeconds * 1000L);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("FAIL: " + scenario + ": no result within " + limitSeconds + " s");
            System.out.flush();
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }, "bench-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    private static String describe(Throwable t) {
        StringBuilder out = new StringBuilder();
        int depth = 0;
        for (Throwable c = t; c != null && depth < 8; c = c.getCause(), depth++) {
            if (out.length() > 0) {
                out.append(" <- caused by ");
            }
            out.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return out.toString();
    }

    private static String setting(String property, String env) {
        String value = System.getProperty(property);
        if (value == null || value.isEmpty()) {
            value = System.getenv(env);
        }
        return value == null || value.isEmpty() ? null : value;
    }

    /** The number, or -1 after reporting a usage error. */
    private static int positive(String text, String name) {
        try {
            int n = Integer.parseInt(text);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        usage(name + " must be a positive whole number, got " + text);
        return -1;
    }

    /** The rate, or -1 after reporting a usage error. */
    private static double rate(String text) {
        try {
            double r = Double.parseDouble(text);
            if (r > 0 && !Double.isInfinite(r)) {
                return r;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        usage("RATE_PER_SECOND must be a positive number, got " + text);
        return -1;
    }

    private static int usage(String why) {
        System.err.println("usage: java -jar grpc-java-test.jar ENDPOINT bench-produce TOPIC THREADS SECONDS BODY_BYTES"
            + " [RATE_PER_SECOND]\n"
            + "       java -jar grpc-java-test.jar ENDPOINT bench-consume TOPIC GROUP SECONDS THREADS\n"
            + "  (-Dpetrel.bench.warmupSeconds=N: the first N s are not measured)");
        System.out.println("FAIL: usage: " + why);
        System.out.flush();
        return 2;
    }

    private static void info(String text) {
        System.err.println("info: " + text);
    }
}
