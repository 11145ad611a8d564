// The kit's metrics (docs/metrics.md) in a real prom-client registry: a known sequence of
// calls against a real module-enabled server, then the registry's text output scraped
// and every series checked to the unit.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { createClient } from 'redis';
import { Registry, register as defaultRegistry } from 'prom-client';
import { createRateLimiter, nodeRedisOptions, RateLimitConfigError, RedisCommandError } from '../index.js';
import { BACKENDS, BUCKETS, DECISIONS, DURATION, limitLabel, OUTCOMES } from '../src/metrics.js';
import { nodeRedisClient } from './support/clients.js';
import { decision, only, scrape } from './support/metrics.js';
import { BACKEND, freePort, startServer } from './support/servers.js';

const docs = readFileSync(resolve(dirname(fileURLToPath(import.meta.url)), '../../../docs/metrics.md'), 'utf8');

/** The fenced blocks of docs/metrics.md by their info string: ```metrics, ```labels, ```buckets. */
function block(kind) {
  const m = new RegExp('```' + kind + '\\n([\\s\\S]*?)```').exec(docs);
  assert.ok(m, `docs/metrics.md has a \`\`\`${kind} block`);
  return m[1].trim().split('\n').map((line) => line.trim().split(/\s+/));
}

const quiet = () => {};
const T = 1_800_000_000_000; // a multiple of 60 s: the fixed windows start here

let server;
let conn;
before(async () => {
  server = await startServer();
  conn = await nodeRedisClient(server.port);
});
after(async () => {
  await conn?.close();
  await server?.stop();
});

describe('the names, labels and buckets are the documented ones', () => {
  it('metrics, outcome and backend values, buckets', () => {
    const names = Object.fromEntries(block('metrics'));
    assert.equal(names[DECISIONS], 'counter');
    assert.equal(names[DURATION], 'histogram');
    const labels = Object.fromEntries(block('labels').map(([label, ...values]) => [label, values]));
    assert.deepEqual(labels.outcome, OUTCOMES);
    assert.deepEqual(labels.backend, BACKENDS);
    assert.deepEqual(block('buckets')[0].map(Number), BUCKETS);
  });

  it('the default limit label is <algorithm>:<limit>/<window>', () => {
    assert.equal(limitLabel({ algorithm: 'fixed', limit: 100, window: 60 }), 'fixed:100/60s');
    assert.equal(limitLabel({ algorithm: 'GCRA', limit: 10, window: '1000ms' }), 'gcra:10/1s');
    assert.equal(limitLabel({ algorithm: 'slidelog', limit: 3, window: '1500ms' }), 'slidelog:3/1500ms');
    assert.equal(limitLabel({ name: 'api', algorithm: 'fixed', limit: 1, window: 1 }), 'api');
  });
});

describe('a known sequence, scraped', () => {
  const registry = new Registry();
  let text;
  let series;
  let closedServer;

  before(async () => {
    const time = { now: T };
    const rl = createRateLimiter({ client: conn.client, failure: 'open', clock: () => time.now, denyCache: true, metrics: registry, onShadow: quiet });
    const api = { name: 'api', algorithm: 'fixed', limit: 2, window: 60 };

    // api: allowed, allowed, denied (Redis), then the same request from the deny cache.
    assert.deepEqual((await Promise.all([0, 1].map(() => rl.check(api, 'u1')))).map((d) => d.allowed), [true, true]);
    assert.equal((await rl.check(api, 'u1')).source, 'redis');
    assert.equal((await rl.check(api, 'u1')).source, 'cache');
    // Not decisions: a peek (here answered by the cache too), a refund, a reset.
    await rl.peek(api, 'u9');
    assert.equal((await rl.peek(api, 'u1')).source, 'cache');
    await rl.refund(api, 'u9');
    await rl.reset(api, 'u8');

    // Shadow: Redis denies, the caller lets it pass.
    await rl.check(api, 'u2');
    await rl.check(api, 'u2');
    const shadowed = await rl.check(api, 'u2', { shadow: true });
    assert.equal(shadowed.allowed, false);

    // RL.ALL: one decision counted for each limit it names, with the call's outcome.
    const login = { name: 'login', algorithm: 'fixed', limit: 1, window: 60 };
    const burst = { algorithm: 'gcra', limit: 10, window: 1 };
    assert.equal((await rl.check([login, burst], 'u3')).allowed, true);
    const all = await rl.check([login, burst], 'u3');
    assert.equal(all.allowed, false);
    assert.equal(all.limits[1].allowed, true, 'the gcra limit alone would have admitted it');

    // A batch: two decisions in one round trip.
    await rl.batch([{ limits: api, identity: 'u4' }, { limits: api, identity: 'u4', mode: 'PEEK' }]);

    // RL.THROTTLE: allowed, denied; quantity 0 only reports.
    const spec = { maxBurst: 0, count: 1, period: 60 };
    assert.equal((await rl.throttle('t1', spec)).allowed, true);
    assert.equal((await rl.throttle('t1', spec)).allowed, false);
    await rl.throttle('t1', { ...spec, quantity: 0 });

    // Caller mistakes are raised, not counted nor timed.
    await assert.rejects(rl.check(api, 'u5', { cost: 0 }), RateLimitConfigError);
    await conn.client.hSet('{nl}:hash', 'f', 'v');
    await assert.rejects(rl.check({ ...api, algorithm: 'gcra', key: '{nl}:hash' }), RedisCommandError);
    await assert.rejects(rl.throttle('{nl}:hash', spec), RedisCommandError);

    // failure_open: nothing listens on the port; the kit's timeout bounds the call.
    const dead = createClient({ ...nodeRedisOptions(), url: `redis://127.0.0.1:${await freePort()}` });
    dead.on('error', quiet);
    dead.connect().catch(quiet);
    const open = createRateLimiter({ client: dead, failure: 'open', timeout: 200, onError: quiet, metrics: registry });
    assert.equal((await open.check(api, 'u1')).source, 'failure');
    dead.destroy();

    // failure_closed: a server that answered once, then stopped. Same registry, so the
    // second limiter reuses the first one's metrics.
    closedServer = await startServer();
    const other = await nodeRedisClient(closedServer.port);
    const closed = createRateLimiter({ client: other.client, failure: 'closed', timeout: 200, onError: quiet, metrics: registry });
    const strict = { name: 'strict', algorithm: 'slidecount', limit: 5, window: 60 };
    assert.equal((await closed.check(strict, 'u1')).allowed, true);
    await closedServer.stop();
    const refused = await closed.check(strict, 'u1');
    assert.deepEqual([refused.source, refused.allowed], ['failure', false]);
    await other.close();

    text = await registry.metrics();
    series = scrape(text);
  });
  after(async () => { await closedServer?.stop(); });

  it('counts every outcome exactly, per limit and backend', () => {
    assert.deepEqual(only(series, DECISIONS), {
      [decision('api', 'allowed')]: 5, // u1 ×2, u2 ×2, u4
      [decision('api', 'denied')]: 1,
      [decision('api', 'cache_denied')]: 1,
      [decision('api', 'shadow_denied')]: 1,
      [decision('api', 'failure_open', 'module')]: 1, // no answer yet: 'module' until one comes
      [decision('login', 'allowed')]: 1,
      [decision('login', 'denied')]: 1,
      [decision('gcra:10/1s', 'allowed')]: 1,
      [decision('gcra:10/1s', 'denied')]: 1,
      [decision('throttle:1/60s', 'allowed')]: 1,
      [decision('throttle:1/60s', 'denied')]: 1,
      [decision('strict', 'allowed')]: 1,
      // A call without an answer makes auto ask the module again: the label is 'module' until one answers.
      [decision('strict', 'failure_closed', 'module')]: 1,
    }, text);
  });

  it('times every call but the deny-cache hits: _count = decisions - cache_denied', () => {
    const counts = only(series, `${DURATION}_count`);
    assert.deepEqual(counts, {
      [`${DURATION}_count{limit="api"}`]: 8,
      [`${DURATION}_count{limit="login"}`]: 2,
      [`${DURATION}_count{limit="gcra:10/1s"}`]: 2,
      [`${DURATION}_count{limit="throttle:1/60s"}`]: 2,
      [`${DURATION}_count{limit="strict"}`]: 2,
    }, text);
    for (const [key, count] of Object.entries(counts)) {
      const limit = /limit="([^"]*)"/.exec(key)[1];
      const decided = Object.entries(only(series, DECISIONS))
        .filter(([k]) => k.includes(`limit="${limit}"`) && !k.includes('cache_denied'))
        .reduce((sum, [, v]) => sum + v, 0);
      assert.equal(count, decided, limit);
    }
  });

  it('has exactly the documented buckets, cumulative, a failure as slow as the timeout', () => {
    const les = [...text.matchAll(new RegExp(`^${DURATION}_bucket\\{le="([^"]+)",limit="api"\\}`, 'gm'))].map((m) => m[1]);
    assert.deepEqual(les, [...block('buckets')[0], '+Inf'], text);
    const bucket = (le, limit) => series[`${DURATION}_bucket{le="${le}",limit="${limit}"}`];
    assert.equal(bucket('+Inf', 'api'), 8);
    // The calls to dead servers ended by the 200 ms timeout at the latest.
    assert.equal(bucket('0.25', 'strict'), 2, text);
    assert.ok(series[`${DURATION}_sum{limit="api"}`] > 0);
    for (let i = 1; i < BUCKETS.length; i++) assert.ok(bucket(BUCKETS[i], 'api') >= bucket(BUCKETS[i - 1], 'api'));
  });

  it('has the documented types and no other metric', () => {
    const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]);
    assert.deepEqual(types, [[DECISIONS, 'counter'], [DURATION, 'histogram']]);
    const documented = new Set(block('labels').flatMap(([, ...values]) => values));
    for (const key of Object.keys(only(series, DECISIONS))) {
      for (const [, label, value] of key.matchAll(/(outcome|backend)="([^"]*)"/g)) assert.ok(documented.has(value), `${label}=${value}`);
    }
  });
});

describe('turning them on', () => {
  const api = { name: 'api', algorithm: 'fixed', limit: 1, window: 60 };

  it('is off by default: nothing is registered, even in the default registry', async () => {
    const rl = createRateLimiter({ client: conn.client, failure: 'open' });
    await rl.check(api, 'off');
    assert.equal(defaultRegistry.getSingleMetric(DECISIONS), undefined);
    assert.equal(defaultRegistry.getSingleMetric(DURATION), undefined);
  });

  it("metrics: true records in prom-client's default registry", async (t) => {
    t.after(() => defaultRegistry.clear());
    const rl = createRateLimiter({ client: conn.client, failure: 'open', metrics: true });
    await rl.check(api, 'default-registry');
    assert.equal(scrape(await defaultRegistry.metrics())[decision('api', 'allowed')], 1);
  });

  it('anything else than true or a Registry is refused', () => {
    assert.throws(() => createRateLimiter({ client: conn.client, failure: 'open', metrics: {} }), /metrics is true .* or a prom-client Registry/);
  });

  it('the backend label is the one the limiter runs on', async () => {
    const registry = new Registry();
    const rl = createRateLimiter({ client: conn.client, failure: 'open', metrics: registry });
    await rl.check(api, 'b1');
    Object.defineProperty(rl, 'activeBackend', { value: BACKEND === 'module' ? 'scripts' : 'module' });
    await rl.check(api, 'b2');
    const series = only(scrape(await registry.metrics()), DECISIONS);
    const other = BACKEND === 'module' ? 'scripts' : 'module';
    assert.deepEqual(series, { [decision('api', 'allowed')]: 1, [decision('api', 'allowed', other)]: 1 });
  });
});

describe('the middleware', () => {
  async function serve(middleware) {
    const srv = http.createServer((req, res) => middleware(req, res, (err) => {
      res.statusCode = err ? 500 : 200;
      res.end();
    }));
    await new Promise((ok) => srv.listen(0, '127.0.0.1', ok));
    const url = `http://127.0.0.1:${srv.address().port}/`;
    const get = async () => {
      const r = await fetch(url);
      await r.arrayBuffer();
      return r.status;
    };
    return { get, close: () => new Promise((ok) => srv.close(ok)) };
  }

  it('counts shadow mode as shadow_denied, and a failure to identify as the policy', async () => {
    const registry = new Registry();
    const time = { now: T };
    const rl = createRateLimiter({ client: conn.client, failure: 'open', clock: () => time.now, metrics: registry, onShadow: quiet, onError: quiet });
    const limit = { name: 'web', algorithm: 'fixed', limit: 2, window: 60 };
    const shadow = await serve(rl.middleware({ limits: limit, identify: () => 'm1', shadow: true }));
    const failing = await serve(rl.middleware({ limits: limit, identify: () => { throw new Error('no identity'); } }));
    try {
      assert.deepEqual([await shadow.get(), await shadow.get(), await shadow.get()], [200, 200, 200]);
      assert.equal(await failing.get(), 200);
    } finally {
      await shadow.close();
      await failing.close();
    }
    const series = scrape(await registry.metrics());
    assert.deepEqual(only(series, DECISIONS), {
      [decision('web', 'allowed')]: 2,
      [decision('web', 'shadow_denied')]: 1,
      [decision('web', 'failure_open')]: 1,
    });
    assert.equal(series[`${DURATION}_count{limit="web"}`], 4);
  });
});
