#!/usr/bin/env python3
"""Drives Petrel's gRPC endpoint (RocketMQ 5's gRPC protocol) with the official RocketMQ 5
Python SDK (rocketmq-python-client 5.1.2), unchanged.

    python3 test.py ENDPOINT SCENARIO TOPIC GROUP

    normal  NORMAL topic: 10 tagged, keyed messages sent; a SimpleConsumer filtering on the tag
            receives and acks all of them, and receives nothing more for about 4 s afterwards.
    delay   DELAY topic: one message with a delivery time 3 s ahead arrives no sooner than
            2.5 s and no later than 20 s after it was sent.
    fifo    FIFO topic, orderly group: two message groups of 5 messages each arrive, each group
            in the order it was sent, all within 40 s.

ENDPOINT is host:port of the gRPC listener, reached without TLS, signed with PETREL_ACCESS_KEY /
PETREL_SECRET_KEY from the environment when set (an authenticating broker). A run
prints exactly one verdict line on stdout, "ok: python SCENARIO: ..." (exit 0) or
"FAIL: python SCENARIO: ..." (exit 1; 2 for a usage error); progress goes to stderr as
"info: ...". A run never takes longer than 60 s. The SDK's own log goes under
$TMPDIR/petrel-grpc-python-test-logs (or PETREL_SDK_LOG_DIR) at level warning.
"""

import logging
import math
import os
import sys
import tempfile
import threading
import time

LANG = "python"
TAG = "TagA"
HARD_LIMIT_S = 60.0
AWAIT_S = 5  # long polling of a receive; the SDK sends whole seconds
INVISIBLE_S = 20  # invisible duration of received messages; whole seconds as well
START_LIMIT_S = 15.0
SDK_LOGGER = "rocketmq-python-client"

STARTED_AT = time.monotonic()
# Every wait inside a scenario ends by this instant; the watchdog enforces HARD_LIMIT_S.
WORK_DEADLINE = STARTED_AT + HARD_LIMIT_S - 8.0

_state = threading.Lock()
_phase = "starting"
_decided = False
_exit_code = 1
_closers = []
_scenario = sys.argv[2] if len(sys.argv) > 2 else "?"


class Failure(Exception):
    """A scenario expectation that did not hold."""


def expect(condition, text):
    if not condition:
        raise Failure(text)


def verdict(ok, text):
    """Prints the run's one verdict line; later calls are ignored."""
    global _decided, _exit_code
    with _state:
        if _decided:
            return
        _decided = True
        _exit_code = 0 if ok else 1
        sys.stdout.write(("ok: " if ok else "FAIL: ") + LANG + " " + _scenario + ": " + text + "\n")
        sys.stdout.flush()


def info(text):
    sys.stderr.write("info: " + text + "\n")
    sys.stderr.flush()


def step(what):
    global _phase
    with _state:
        _phase = what
    info("%s +%d ms: %s" % (_scenario, int((time.monotonic() - STARTED_AT) * 1000), what))


def current_phase():
    with _state:
        return _phase


def _import_sdk():
    """Imports the SDK with its file log moved to a temp folder.

    On import the SDK creates ~/logs/rocketmq_python/rocketmq_client.log (the path comes from
    expanduser, with no setting for it), so HOME points at the temp folder for the import only;
    afterwards its logger is turned down to warnings.
    """
    log_home = os.environ.get("PETREL_SDK_LOG_DIR") or os.path.join(
        tempfile.gettempdir(), "petrel-grpc-python-test-logs")
    os.makedirs(log_home, exist_ok=True)
    saved_home = os.environ.get("HOME")
    os.environ["HOME"] = log_home
    try:
        import rocketmq
    finally:
        if saved_home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved_home
    logging.getLogger(SDK_LOGGER).setLevel(logging.WARNING)
    return rocketmq


# ---------------------------------------------------------------- clients

def config(sdk, endpoint):
    # Signed with PETREL_ACCESS_KEY / PETREL_SECRET_KEY when set (an authenticating broker);
    # otherwise empty credentials: the SDK still signs (with an empty key), and the server
    # ignores it.
    access_key = os.environ.get("PETREL_ACCESS_KEY", "")
    secret_key = os.environ.get("PETREL_SECRET_KEY", "")
    return sdk.ClientConfiguration(endpoint, sdk.Credentials(access_key, secret_key))


def start_within(what, start):
    """Runs a client's startup, failing the scenario when it has not returned in time."""
    outcome = {}

    def run():
        try:
            start()
            outcome["ok"] = True
        except BaseException as e:  # reported below
            outcome["error"] = e

    t = threading.Thread(target=run, name="start-" + what.replace(" ", "-"), daemon=True)
    t.start()
    limit = max(0.5, min(START_LIMIT_S, WORK_DEADLINE - time.monotonic()))
    t.join(limit)
    if t.is_alive():
        raise Failure("starting %s did not finish within %.1f s" % (what, limit))
    if "error" in outcome:
        raise Failure("starting %s failed: %s" % (what, describe_error(outcome["error"])))


def start_producer(sdk, endpoint, topic):
    step("starting the producer")
    producer = sdk.Producer(config(sdk, endpoint), (topic,))
    start_within("the producer", producer.startup)
    with _state:
        _closers.append(producer.shutdown)
    return producer


def start_consumer(sdk, endpoint, group, topic, expression):
    step("starting the simple consumer")
    consumer = sdk.SimpleConsumer(config(sdk, endpoint), group, {topic: sdk.FilterExpression(expression)},
                                  await_duration=AWAIT_S)
    start_within("the simple consumer", consumer.startup)
    with _state:
        _closers.append(consumer.shutdown)
    return consumer


def new_message(sdk, topic, body):
    m = sdk.Message()
    m.topic = topic
    m.body = body.encode("utf-8")
    m.tag = TAG
    return m


def send(producer, message, body):
    try:
        receipt = producer.send(message)
    except Exception as e:
        raise Failure("sending %s failed: %s" % (body, describe_error(e)))
    expect(receipt is not None and receipt.message_id, "the send receipt for %s has no message id" % body)
    return receipt.message_id


def receive(consumer):
    """Asks for up to 16 messages; the SDK answers MESSAGE_NOT_FOUND with an empty list."""
    try:
        return list(consumer.receive(16, INVISIBLE_S) or [])
    except Exception as e:
        raise Failure("%s: receive failed: %s" % (current_phase(), describe_error(e)))


def ack(consumer, message):
    try:
        consumer.ack(message)
    except Exception as e:
        raise Failure("acking %s failed: %s" % (body_of(message), describe_error(e)))


def close_all(deadline):
    """Shuts every client down, newest first, giving up at the deadline."""
    with _state:
        closers = list(_closers)

    def run():
        for close in reversed(closers):
            try:
                close()
            except Exception as e:
                info("closing a client failed: " + describe_error(e))

    t = threading.Thread(target=run, name="client-closer", daemon=True)
    t.start()
    t.join(max(0.1, deadline - time.monotonic()))
    if t.is_alive():
        info("clients still closing; exiting anyway")


# ---------------------------------------------------------------- scenarios

def normal(sdk, endpoint, topic, group):
    total = 10
    consumer = start_consumer(sdk, endpoint, group, topic, TAG)
    producer = start_producer(sdk, endpoint, topic)

    step("sending %d messages" % total)
    id_by_body = {}
    for i in range(total):
        body = "%s-%d" % (LANG, i)
        m = new_message(sdk, topic, body)
        m.keys = "k%d" % i
        id_by_body[body] = send(producer, m, body)

    step("receiving the %d messages" % total)
    receive_start = time.monotonic()
    until = min(receive_start + 30.0, WORK_DEADLINE)
    seen = set()
    receives = 0
    while len(seen) < total and time.monotonic() < until:
        views = receive(consumer)
        receives += 1
        for m in views:
            b = body_of(m)
            expect(b in id_by_body, "received a message this run did not send: " + describe(m))
            expect(b not in seen, "received %s twice before its %d s invisible duration ran out: %s"
                   % (b, INVISIBLE_S, describe(m)))
            expect(m.tag == TAG, "%s came back with tag %s, expected %s" % (b, m.tag, TAG))
            expect(m.message_id == id_by_body[b], "%s came back with message id %r, its send receipt said %r"
                   % (b, m.message_id, id_by_body[b]))
            key = "k" + b[len(LANG) + 1:]
            expect(key in (m.keys or ()), "%s came back with keys %s, expected %s" % (b, sorted(m.keys or ()), key))
            expect(m.delivery_attempt == 1, "%s came back with deliveryAttempt %s on its first delivery, expected 1"
                   % (b, m.delivery_attempt))
            ack(consumer, m)
            seen.add(b)
    receive_took = time.monotonic() - receive_start
    expect(len(seen) == total, "received %d of %d messages in %.1f s; missing %s"
           % (len(seen), total, receive_took, sorted(set(id_by_body) - seen)))

    step("checking acked messages stay gone")
    quiet_start = time.monotonic()
    quiet_until = min(quiet_start + 4.0, WORK_DEADLINE)
    quiet_receives = 0
    while quiet_receives == 0 or time.monotonic() < quiet_until:
        again = receive(consumer)
        quiet_receives += 1
        expect(not again, "a receive after all %d acks returned %d message(s), first %s"
               % (total, len(again), describe(again[0]) if again else ""))
    return ("%d messages sent, each send receipt carrying a message id; all %d received through tag filter %s"
            " in %d receive(s) over %.1f s with their ids, keys and deliveryAttempt 1, and acked;"
            " %d receive(s) over the next %.1f s returned nothing"
            % (total, total, TAG, receives, receive_took, quiet_receives, time.monotonic() - quiet_start))


def delay(sdk, endpoint, topic, group):
    earliest_ms, latest_ms = 2500, 20000
    consumer = start_consumer(sdk, endpoint, group, topic, "*")
    producer = start_producer(sdk, endpoint, topic)

    step("sending one message with a delivery time 3 s ahead")
    body = LANG + "-delay"
    m = new_message(sdk, topic, body)
    m.keys = "kdelay"
    sent_wall = time.time()
    sent_at = time.monotonic()
    # This SDK puts the value into the protobuf Timestamp's seconds field as it is, so it takes
    # whole epoch seconds; rounding up keeps the delivery time at least 3 s ahead.
    deliver_at = math.ceil(sent_wall + 3.0)
    ahead_ms = int((deliver_at - sent_wall) * 1000)
    m.delivery_timestamp = deliver_at
    message_id = send(producer, m, body)

    step("waiting for the delayed message")
    until = min(sent_at + latest_ms / 1000.0, WORK_DEADLINE)
    got_ms = None
    receives = 0
    while got_ms is None and time.monotonic() < until:
        views = receive(consumer)
        receives += 1
        after_ms = int((time.monotonic() - sent_at) * 1000)
        for v in views:
            expect(body_of(v) == body, "waiting for %s, received %s" % (body, describe(v)))
            expect(got_ms is None, "received %s twice in one receive" % body)
            expect(v.message_id == message_id, "%s came back with message id %r, its send receipt said %r"
                   % (body, v.message_id, message_id))
            expect(after_ms >= earliest_ms, "%s arrived %d ms after the send, before its delivery time (+%d ms;"
                   " earliest allowed %d ms)" % (body, after_ms, ahead_ms, earliest_ms))
            ack(consumer, v)
            got_ms = after_ms
    expect(got_ms is not None, "%s was not received within %.1f s of its send (%d receives)"
           % (body, time.monotonic() - sent_at, receives))
    return ("a message with a delivery time %d ms ahead (whole seconds in this SDK) was received %d ms after the"
            " send (allowed %d..%d ms) with its message id, and acked" % (ahead_ms, got_ms, earliest_ms, latest_ms))


def fifo(sdk, endpoint, topic, group):
    per_group, within_s = 5, 40.0
    groups = ["g0", "g1"]
    total = per_group * len(groups)
    consumer = start_consumer(sdk, endpoint, group, topic, "*")
    producer = start_producer(sdk, endpoint, topic)

    step("sending %d messages in message groups %s" % (total, groups))
    send_start = time.monotonic()
    id_by_body = {}
    for n in range(per_group):
        for g in groups:
            body = "%s-%d" % (g, n)
            m = new_message(sdk, topic, body)
            m.message_group = g
            id_by_body[body] = send(producer, m, body)

    step("receiving the message groups in order")
    until = min(send_start + within_s, WORK_DEADLINE)
    following = {g: 0 for g in groups}
    arrivals = []
    receives = 0
    while len(arrivals) < total and time.monotonic() < until:
        views = receive(consumer)
        receives += 1
        for v in views:
            b = body_of(v)
            expect(b in id_by_body, "received a message this run did not send: " + describe(v))
            g, n = b.rsplit("-", 1)
            n = int(n)
            expect(v.message_group == g, "%s came back with message group %s, expected %s" % (b, v.message_group, g))
            expect(v.message_id == id_by_body[b], "%s came back with message id %r, its send receipt said %r"
                   % (b, v.message_id, id_by_body[b]))
            expect(n == following[g], "message group %s: received %s when %s-%d was due (arrivals so far: %s)"
                   % (g, b, g, following[g], arrivals))
            ack(consumer, v)
            following[g] += 1
            arrivals.append(b)
    took = time.monotonic() - send_start
    expect(len(arrivals) == total, "received %d of %d messages within %.1f s of the first send (arrivals: %s)"
           % (len(arrivals), total, took, arrivals))
    return ("%d message groups x %d messages sent with their group; all %d received and acked %.1f s after the first"
            " send in %d receive(s), each group in order 0..%d (arrival order %s)"
            % (len(groups), per_group, total, took, receives, per_group - 1, " ".join(arrivals)))


SCENARIOS = {"normal": normal, "delay": delay, "fifo": fifo}


# ---------------------------------------------------------------- helpers

def body_of(message):
    body = message.body
    if isinstance(body, (bytes, bytearray)):
        return bytes(body).decode("utf-8", "replace")
    return str(body)


def describe(message):
    body = body_of(message)
    if len(body) > 64:
        body = "%s...(%d bytes)" % (body[:64], len(body))
    return "{id=%s, topic=%s, body=%s, tag=%s, keys=%s, group=%s, deliveryAttempt=%s}" % (
        message.message_id, message.topic, body, message.tag, sorted(message.keys or ()),
        message.message_group, message.delivery_attempt)


def describe_error(e):
    code = getattr(e, "code", None)
    if callable(code):  # grpc errors expose code() and details()
        try:
            return "%s: %s %s" % (type(e).__name__, code(), e.details())
        except Exception:
            pass
    return "%s: %s" % (type(e).__name__, e)


def usage(why):
    sys.stderr.write("usage: python3 test.py ENDPOINT normal|delay|fifo TOPIC GROUP\n")
    sys.stdout.write("FAIL: %s usage: %s\n" % (LANG, why))
    sys.stdout.flush()
    os._exit(2)


def on_time_limit():
    verdict(False, "no verdict within %d s (last step: %s)" % (HARD_LIMIT_S, current_phase()))
    sys.stdout.flush()
    sys.stderr.flush()
    with _state:
        code = _exit_code
    os._exit(code)


def main():
    if len(sys.argv) != 5:
        usage("expected 4 arguments, got %d" % (len(sys.argv) - 1))
    endpoint, scenario, topic, group = sys.argv[1:5]
    if scenario not in SCENARIOS:
        usage("unknown scenario " + scenario)

    watchdog = threading.Timer(max(1.0, HARD_LIMIT_S - (time.monotonic() - STARTED_AT)), on_time_limit)
    watchdog.daemon = True
    watchdog.start()

    try:
        step("loading the SDK")
        sdk = _import_sdk()
        verdict(True, SCENARIOS[scenario](sdk, endpoint, topic, group))
    except Failure as f:
        verdict(False, str(f))
    except BaseException as e:
        verdict(False, "%s: %s" % (current_phase(), describe_error(e)))
    close_all(min(time.monotonic() + 10.0, STARTED_AT + HARD_LIMIT_S - 1.0))
    sys.stdout.flush()
    sys.stderr.flush()
    with _state:
        code = _exit_code
    # The SDK leaves non-daemon threads behind; leave without waiting for them.
    os._exit(code)


if __name__ == "__main__":
    main()
