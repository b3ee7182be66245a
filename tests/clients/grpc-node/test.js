'use strict';
/**
 * Drives Petrel's gRPC endpoint (RocketMQ 5's gRPC protocol) with the official RocketMQ 5
 * Node.js SDK (rocketmq-client-nodejs 1.0.8), unchanged.
 *
 *   node test.js ENDPOINT SCENARIO TOPIC GROUP
 *
 *   normal  NORMAL topic: 10 tagged, keyed messages sent; a SimpleConsumer filtering on the tag
 *           receives and acks all of them, and receives nothing more for about 4 s afterwards.
 *   delay   DELAY topic: one message with a delivery time 3 s ahead arrives no sooner than
 *           2.5 s and no later than 20 s after it was sent.
 *   fifo    FIFO topic, orderly group: two message groups of 5 messages each arrive, each group
 *           in the order it was sent, all within 40 s.
 *
 * ENDPOINT is host:port of the gRPC listener, reached without TLS and without credentials. A run
 * prints exactly one verdict line on stdout, "ok: node SCENARIO: ..." (exit 0) or
 * "FAIL: node SCENARIO: ..." (exit 1; 2 for a usage error); progress goes to stderr as
 * "info: ...". A run never takes longer than 60 s. The SDK's warnings and errors go to
 * $TMPDIR/petrel-grpc-node-test-logs/rocketmq_client_nodejs.log (or PETREL_SDK_LOG_DIR); its
 * info lines are dropped.
 */

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');
const { performance } = require('node:perf_hooks');

const LANG = 'node';
const TAG = 'TagA';
const HARD_LIMIT_MS = 60000;
const AWAIT_MS = 5000;
const INVISIBLE_MS = 20000;
const START_LIMIT_MS = 15000;
const REQUEST_TIMEOUT_MS = 3000;

const startedAt = performance.now();
// Every wait inside a scenario ends by this instant; the watchdog enforces HARD_LIMIT_MS.
const workDeadline = startedAt + HARD_LIMIT_MS - 8000;

const scenario = process.argv[3] || '?';
let phase = 'starting';
let decided = false;
let exitCode = 1;
const closers = [];

/** A scenario expectation that did not hold. */
class Failure extends Error {}

function expect(condition, text) {
  if (!condition) {
    throw new Failure(text);
  }
}

function now() {
  return performance.now();
}

function info(text) {
  fs.writeSync(2, `info: ${text}\n`);
}

function step(what) {
  phase = what;
  info(`${scenario} +${Math.round(now() - startedAt)} ms: ${what}`);
}

/** Prints the run's one verdict line; later calls are ignored. */
function verdict(ok, text) {
  if (decided) {
    return;
  }
  decided = true;
  exitCode = ok ? 0 : 1;
  fs.writeSync(1, `${ok ? 'ok: ' : 'FAIL: '}${LANG} ${scenario}: ${text}\n`);
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, Math.max(0, ms)));
}

/**
 * The SDK logs through an object it is given (by default a file under ~/logs/rocketmq). This
 * one keeps warnings and errors in a temp folder and drops the rest.
 */
function sdkLogger() {
  const dir = process.env.PETREL_SDK_LOG_DIR || path.join(os.tmpdir(), 'petrel-grpc-node-test-logs');
  const file = path.join(dir, 'rocketmq_client_nodejs.log');
  let usable = true;
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (e) {
    usable = false;
  }
  const write = (level, args) => {
    if (!usable) {
      return;
    }
    try {
      fs.appendFileSync(file, `${new Date().toISOString()} ${level} ${util.format(...args)}\n`);
    } catch (e) {
      usable = false;
    }
  };
  return {
    debug() {},
    info() {},
    warn(...args) { write('WARN', args); },
    error(...args) { write('ERROR', args); },
    close() {},
  };
}

// ---------------------------------------------------------------- clients

function clientOptions(endpoint) {
  // No sessionCredentials: this SDK then sends no authorization header. TLS is off unless
  // sslEnabled is true.
  return {
    endpoints: endpoint,
    namespace: '',
    requestTimeout: REQUEST_TIMEOUT_MS,
    logger: sdkLogger(),
  };
}

/** Awaits a client's startup (which waits for the server's Settings), failing when it is late. */
async function startWithin(what, start) {
  const limit = Math.max(500, Math.min(START_LIMIT_MS, workDeadline - now()));
  let timer;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Failure(`starting ${what} did not finish within ${limit} ms`
      + ' (it waits for the server\'s Settings over Telemetry)')), limit);
  });
  try {
    await Promise.race([ start(), late ]);
  } catch (e) {
    if (e instanceof Failure) {
      throw e;
    }
    throw new Failure(`starting ${what} failed: ${describeError(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

async function startProducer(sdk, endpoint, topic) {
  step('starting the producer');
  const producer = new sdk.Producer({ ...clientOptions(endpoint), topics: [ topic ] });
  await startWithin('the producer', () => producer.startup());
  closers.push(() => producer.shutdown());
  return producer;
}

async function startConsumer(sdk, endpoint, group, topic, expression) {
  step('starting the simple consumer');
  const consumer = new sdk.SimpleConsumer({
    ...clientOptions(endpoint),
    consumerGroup: group,
    subscriptions: new Map([[ topic, new sdk.FilterExpression(expression) ]]),
    awaitDuration: AWAIT_MS,
  });
  await startWithin('the simple consumer', () => consumer.startup());
  closers.push(() => consumer.shutdown());
  return consumer;
}

async function send(producer, message, body) {
  let receipt;
  try {
    receipt = await producer.send(message);
  } catch (e) {
    throw new Failure(`sending ${body} failed: ${describeError(e)}`);
  }
  expect(receipt && receipt.messageId, `the send receipt for ${body} has no message id`);
  return receipt.messageId;
}

/** Asks for up to 16 messages; the SDK answers MESSAGE_NOT_FOUND with an empty list. */
async function receive(consumer) {
  try {
    return (await consumer.receive(16, INVISIBLE_MS)) || [];
  } catch (e) {
    throw new Failure(`${phase}: receive failed: ${describeError(e)}`);
  }
}

async function ack(consumer, view) {
  try {
    await consumer.ack(view);
  } catch (e) {
    throw new Failure(`acking ${bodyOf(view)} failed: ${describeError(e)}`);
  }
}

/** Shuts every client down, newest first, giving up at the deadline. */
async function closeAll(deadline) {
  const closing = (async () => {
    for (const close of closers.slice().reverse()) {
      try {
        await close();
      } catch (e) {
        info(`closing a client failed: ${describeError(e)}`);
      }
    }
    return true;
  })();
  const done = await Promise.race([ closing, sleep(deadline - now()).then(() => false) ]);
  if (!done) {
    info('clients still closing; exiting anyway');
  }
}

// ---------------------------------------------------------------- scenarios

async function normal(sdk, endpoint, topic, group) {
  const total = 10;
  const consumer = await startConsumer(sdk, endpoint, group, topic, TAG);
  const producer = await startProducer(sdk, endpoint, topic);

  step(`sending ${total} messages`);
  const idByBody = new Map();
  for (let i = 0; i < total; i++) {
    const body = `${LANG}-${i}`;
    idByBody.set(body, await send(producer, { topic, tag: TAG, keys: [ `k${i}` ], body: Buffer.from(body) }, body));
  }

  step(`receiving the ${total} messages`);
  const receiveStart = now();
  const until = Math.min(receiveStart + 30000, workDeadline);
  const seen = new Set();
  let receives = 0;
  while (seen.size < total && now() < until) {
    const views = await receive(consumer);
    receives++;
    for (const v of views) {
      const b = bodyOf(v);
      expect(idByBody.has(b), `received a message this run did not send: ${describe(v)}`);
      expect(!seen.has(b), `received ${b} twice before its ${INVISIBLE_MS / 1000} s invisible duration ran out: ${describe(v)}`);
      expect(v.tag === TAG, `${b} came back with tag ${v.tag || '<none>'}, expected ${TAG}`);
      expect(v.messageId === idByBody.get(b), `${b} came back with message id ${JSON.stringify(v.messageId)}, `
        + `its send receipt said ${JSON.stringify(idByBody.get(b))}`);
      const key = `k${b.slice(LANG.length + 1)}`;
      expect((v.keys || []).includes(key), `${b} came back with keys ${JSON.stringify(v.keys)}, expected ${key}`);
      expect(v.deliveryAttempt === 1, `${b} came back with deliveryAttempt ${v.deliveryAttempt} on its first delivery, expected 1`);
      await ack(consumer, v);
      seen.add(b);
    }
  }
  const receiveTook = (now() - receiveStart) / 1000;
  const missing = [ ...idByBody.keys() ].filter(b => !seen.has(b));
  expect(seen.size === total, `received ${seen.size} of ${total} messages in ${receiveTook.toFixed(1)} s; `
    + `missing ${JSON.stringify(missing)}`);

  step('checking acked messages stay gone');
  const quietStart = now();
  const quietUntil = Math.min(quietStart + 4000, workDeadline);
  let quietReceives = 0;
  while (quietReceives === 0 || now() < quietUntil) {
    const again = await receive(consumer);
    quietReceives++;
    expect(again.length === 0, `a receive after all ${total} acks returned ${again.length} message(s), `
      + `first ${again.length ? describe(again[0]) : ''}`);
  }
  return `${total} messages sent, each send receipt carrying a message id; all ${total} received through tag filter ${TAG}`
    + ` in ${receives} receive(s) over ${receiveTook.toFixed(1)} s with their ids, keys and deliveryAttempt 1, and acked;`
    + ` ${quietReceives} receive(s) over the next ${((now() - quietStart) / 1000).toFixed(1)} s returned nothing`;
}

async function delay(sdk, endpoint, topic, group) {
  const aheadMs = 3000;
  const earliestMs = 2500;
  const latestMs = 20000;
  const consumer = await startConsumer(sdk, endpoint, group, topic, '*');
  const producer = await startProducer(sdk, endpoint, topic);

  step('sending one message with a delivery time 3 s ahead');
  const body = `${LANG}-delay`;
  const sentAt = now();
  const deliveryTimestamp = new Date(Date.now() + aheadMs);
  const messageId = await send(producer, { topic, tag: TAG, keys: [ 'kdelay' ], body: Buffer.from(body), deliveryTimestamp }, body);

  step('waiting for the delayed message');
  const until = Math.min(sentAt + latestMs, workDeadline);
  let gotMs = -1;
  let receives = 0;
  while (gotMs < 0 && now() < until) {
    const views = await receive(consumer);
    receives++;
    const afterMs = Math.round(now() - sentAt);
    for (const v of views) {
      expect(bodyOf(v) === body, `waiting for ${body}, received ${describe(v)}`);
      expect(gotMs < 0, `received ${body} twice in one receive`);
      expect(v.messageId === messageId, `${body} came back with message id ${JSON.stringify(v.messageId)}, `
        + `its send receipt said ${JSON.stringify(messageId)}`);
      expect(afterMs >= earliestMs, `${body} arrived ${afterMs} ms after the send, before its delivery time `
        + `(+${aheadMs} ms; earliest allowed ${earliestMs} ms)`);
      await ack(consumer, v);
      gotMs = afterMs;
    }
  }
  expect(gotMs >= 0, `${body} was not received within ${((now() - sentAt) / 1000).toFixed(1)} s of its send (${receives} receives)`);
  return `a message with a delivery time ${aheadMs} ms ahead was received ${gotMs} ms after the send`
    + ` (allowed ${earliestMs}..${latestMs} ms) with its message id, and acked`;
}

async function fifo(sdk, endpoint, topic, group) {
  const perGroup = 5;
  const withinMs = 40000;
  const groups = [ 'g0', 'g1' ];
  const total = perGroup * groups.length;
  const consumer = await startConsumer(sdk, endpoint, group, topic, '*');
  const producer = await startProducer(sdk, endpoint, topic);

  step(`sending ${total} messages in message groups ${groups.join(', ')}`);
  const sendStart = now();
  const idByBody = new Map();
  for (let n = 0; n < perGroup; n++) {
    for (const g of groups) {
      const body = `${g}-${n}`;
      idByBody.set(body, await send(producer, { topic, tag: TAG, messageGroup: g, body: Buffer.from(body) }, body));
    }
  }

  step('receiving the message groups in order');
  const until = Math.min(sendStart + withinMs, workDeadline);
  const following = new Map(groups.map(g => [ g, 0 ]));
  const arrivals = [];
  let receives = 0;
  while (arrivals.length < total && now() < until) {
    const views = await receive(consumer);
    receives++;
    for (const v of views) {
      const b = bodyOf(v);
      expect(idByBody.has(b), `received a message this run did not send: ${describe(v)}`);
      const dash = b.lastIndexOf('-');
      const g = b.slice(0, dash);
      const n = Number(b.slice(dash + 1));
      expect(v.messageGroup === g, `${b} came back with message group ${v.messageGroup || '<none>'}, expected ${g}`);
      expect(v.messageId === idByBody.get(b), `${b} came back with message id ${JSON.stringify(v.messageId)}, `
        + `its send receipt said ${JSON.stringify(idByBody.get(b))}`);
      expect(n === following.get(g), `message group ${g}: received ${b} when ${g}-${following.get(g)} was due `
        + `(arrivals so far: ${arrivals.join(' ')})`);
      await ack(consumer, v);
      following.set(g, n + 1);
      arrivals.push(b);
    }
  }
  const took = (now() - sendStart) / 1000;
  expect(arrivals.length === total, `received ${arrivals.length} of ${total} messages within ${took.toFixed(1)} s `
    + `of the first send (arrivals: ${arrivals.join(' ')})`);
  return `${groups.length} message groups x ${perGroup} messages sent with their group; all ${total} received and acked`
    + ` ${took.toFixed(1)} s after the first send in ${receives} receive(s), each group in order 0..${perGroup - 1}`
    + ` (arrival order ${arrivals.join(' ')})`;
}

const SCENARIOS = { normal, delay, fifo };

// ---------------------------------------------------------------- helpers

function bodyOf(view) {
  return Buffer.from(view.body).toString('utf8');
}

function describe(view) {
  let body = bodyOf(view);
  if (body.length > 64) {
    body = `${body.slice(0, 64)}...(${body.length} bytes)`;
  }
  return `{id=${view.messageId}, topic=${view.topic}, body=${body}, tag=${view.tag || ''}, keys=${JSON.stringify(view.keys)},`
    + ` group=${view.messageGroup || ''}, deliveryAttempt=${view.deliveryAttempt}}`;
}

function describeError(e) {
  if (!(e instanceof Error)) {
    return String(e);
  }
  let text = `${e.name}: ${e.message}`;
  if (e.code !== undefined) {
    text += ` (code ${e.code})`;
  }
  if (e.cause) {
    text += ` <- caused by ${describeError(e.cause)}`;
  }
  return text;
}

function usage(why) {
  fs.writeSync(2, 'usage: node test.js ENDPOINT normal|delay|fifo TOPIC GROUP\n');
  fs.writeSync(1, `FAIL: ${LANG} usage: ${why}\n`);
  process.exit(2);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length !== 4) {
    usage(`expected 4 arguments, got ${args.length}`);
  }
  const [ endpoint, name, topic, group ] = args;
  if (!Object.prototype.hasOwnProperty.call(SCENARIOS, name)) {
    usage(`unknown scenario ${name}`);
  }

  setTimeout(() => {
    verdict(false, `no verdict within ${HARD_LIMIT_MS / 1000} s (last step: ${phase})`);
    process.exit(exitCode);
  }, Math.max(1000, HARD_LIMIT_MS - (now() - startedAt)));
  // The SDK runs timers and streams of its own; a stray rejection is noted, not fatal.
  process.on('unhandledRejection', e => info(`unhandled rejection during "${phase}": ${describeError(e)}`));
  process.on('uncaughtException', e => {
    verdict(false, `${phase}: uncaught ${describeError(e)}`);
    process.exit(exitCode);
  });

  try {
    step('loading the SDK');
    const sdk = require('rocketmq-client-nodejs');
    verdict(true, await SCENARIOS[name](sdk, endpoint, topic, group));
  } catch (e) {
    verdict(false, e instanceof Failure ? e.message : `${phase}: ${describeError(e)}`);
  }
  await closeAll(Math.min(now() + 10000, startedAt + HARD_LIMIT_MS - 1000));
  process.exit(exitCode);
}

main();
