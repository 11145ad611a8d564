// redis-rl/express-rate-limit inside real Express apps, on express-rate-limit 7 and 8,
// next to the library's stock Redis store (rate-limit-redis) on the same server.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import rateLimit8 from 'express-rate-limit';
import rateLimit7 from 'express-rate-limit-7';
import { RedisStore as StockStore6 } from 'rate-limit-redis';
import { RedisStore as StockStore4 } from 'rate-limit-redis-4';
import { Registry } from 'prom-client';
import { RedisRlStore } from 'redis-rl/express-rate-limit';
import { ioredisClient, standalone } from './support/clients.js';
import { decisionsOf } from './support/metrics.js';
import { assertNothingLost, sharedServer, SLOW_OK, BURST_WINDOW_MS, listen, restartUnderTraffic, steppedTime, burstResults, admitting } from './support/adapters.js';
import { freePort, startServer } from './support/servers.js';

const T = 1718609340000;
const quiet = { error() {}, warn() {} };

// express-rate-limit 7 has no logger option: it reports store errors on console.error.
async function withoutConsoleError(fn) {
  const original = console.error;
  console.error = () => {};
  try {
    return await fn();
  } finally {
    console.error = original;
  }
}

const shared = sharedServer();
const freshId = shared.freshId;

// An Express app: one rate-limited route that answers 200, or 500 on /fail.
async function app(rateLimit, options) {
  const a = express();
  a.use(rateLimit({ keyGenerator: (req) => req.headers['x-id'], validate: false, ...options }));
  a.get('/', (req, res) => res.send('ok'));
  const server = await listen(http.createServer(a));
  return {
    ...server,
    hit: async (id) => {
      const res = await fetch(server.base, { headers: { 'x-id': id } });
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
  };
}

for (const [version, rateLimit, StockStore] of [['8', rateLimit8, StockStore6], ['7', rateLimit7, StockStore4]]) {
  describe(`express-rate-limit ${version}`, () => {
    it('the limit holds exactly; RateLimit, X-RateLimit-*, Retry-After and the 429 come from the module\'s reply', async () => {
      const time = steppedTime(T);
      const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'slidelog', clock: time.clock });
      const srv = await app(rateLimit, { windowMs: 10_000, limit: 3, standardHeaders: 'draft-7', legacyHeaders: true, store });
      const id = freshId();
      try {
        const seen = [];
        for (const ms of [0, 1000, 2000, 3000]) {
          await time.at(ms);
          const r = await srv.hit(id);
          seen.push([r.status, r.headers.ratelimit, r.headers['x-ratelimit-remaining'], r.headers['retry-after']]);
        }
        assert.deepEqual(seen, [
          [200, 'limit=3, remaining=2, reset=10', '2', undefined],
          [200, 'limit=3, remaining=1, reset=10', '1', undefined],
          [200, 'limit=3, remaining=0, reset=10', '0', undefined],
          // The first hit leaves the sliding log 7 s later: that is the wait, not the window.
          [429, 'limit=3, remaining=0, reset=7', '0', '7'],
        ]);
        // Exactly when the first hit ages out, one more passes, and only one.
        await time.at(10_001);
        assert.equal((await srv.hit(id)).status, 200);
        assert.equal((await srv.hit(id)).status, 429);
        // The library's own getKey/resetKey go to the store (PEEK, RESET).
        const { status, body } = await srv.hit(id);
        assert.equal(status, 429);
        assert.match(body, /Too many requests/);
      } finally {
        await srv.close();
      }
    });

    it('get, resetKey and decrement (skipFailedRequests) reach the module', async () => {
      const time = steppedTime(T);
      const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock });
      const a = express();
      const limiter = rateLimit({ keyGenerator: (req) => req.headers['x-id'], validate: false, windowMs: 60_000, limit: 2, skipFailedRequests: true, store });
      a.get('/fail', limiter, (req, res) => res.status(500).send('no'));
      a.get('/', limiter, (req, res) => res.send('ok'));
      const srv = await listen(http.createServer(a));
      const id = freshId();
      const hit = (path) => fetch(srv.base + path, { headers: { 'x-id': id } }).then((r) => r.status);
      try {
        assert.equal(await limiter.getKey(id), undefined);
        // Failed requests are given back (REFUND) once the response is sent.
        for (let i = 0; i < 3; i++) assert.equal(await hit('/fail'), 500);
        await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(await hit('/'), 200);
        assert.equal((await limiter.getKey(id)).totalHits, 1);
        assert.deepEqual([await hit('/'), await hit('/')], [200, 429]);
        await limiter.resetKey(id);
        assert.equal(await limiter.getKey(id), undefined);
        assert.equal(await hit('/'), 200);
      } finally {
        await srv.close();
      }
    });

    for (const algorithm of [undefined, 'slidelog', 'gcra']) {
      it(`skipFailedRequests: the decrement after a 429 gives nothing back, the client stays limited (${algorithm ?? 'default'})`, async () => {
        const time = steppedTime(T);
        const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock, ...(algorithm && { algorithm }) });
        const srv = await app(rateLimit, { windowMs: 60_000, limit: 2, skipFailedRequests: true, store });
        const id = freshId();
        try {
          const seen = [];
          for (let i = 0; i < 6; i++) {
            seen.push((await srv.hit(id)).status);
            await new Promise((r) => setTimeout(r, 30)); // the decrement runs once the 429 is sent
          }
          // The module spent nothing on a 429, so its decrement must refund nothing.
          assert.deepEqual(seen, [200, 200, 429, 429, 429, 429]);
        } finally {
          await srv.close();
        }
      });
    }

    it('the boundary burst: the stock store admits 16, the module\'s sliding windows about half', async (t) => {
      // The stock store counts on the server's clock (PEXPIRE): real time.
      const results = await burstResults({
        freshId,
        start: T,
        stock: async () => admitting(await app(rateLimit, {
          windowMs: BURST_WINDOW_MS, limit: 8, store: new StockStore({ sendCommand: (...args) => shared.conn.client.call(...args), prefix: 'stock-erl:' }),
        })),
        ours: async (algorithm, clock) => admitting(await app(rateLimit, { windowMs: BURST_WINDOW_MS, limit: 8, store: new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm, clock }) })),
        counter: true,
      });
      t.diagnostic(`boundary burst, admitted of 16: ${JSON.stringify(results)}`);
      assert.equal(results.stock, 16);
      // 8 before the boundary; after it only what the sliding window freed: the first
      // hit aged out (slidelog), the previous window's weight fell by 1/8 (slidecount).
      assert.equal(results.slidelog, 9);
      assert.equal(results.slidecount, 9);
      // GCRA refills at one per 250 ms: 650 ms after the 8th request, 3 more fit.
      assert.equal(results.gcra, 11);
      // The control: the module's fixed window on a window-aligned start bursts too.
      assert.equal(results.fixed, 16);
      // counter is the stock store's own window (from the first hit): its burst, on purpose.
      assert.equal(results.counter, 16);
    });

    it('shadow: a would-be denial passes, is reported and counted; the headers show the real state', async () => {
      const reported = [];
      const time = steppedTime(T);
      const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, shadow: true, clock: time.clock, onShadow: (d, info) => reported.push(info.keys) });
      const srv = await app(rateLimit, { windowMs: 10_000, limit: 2, standardHeaders: 'draft-7', store });
      const id = freshId();
      try {
        const statuses = [];
        for (let i = 0; i < 4; i++) statuses.push((await srv.hit(id)).status);
        assert.deepEqual(statuses, [200, 200, 200, 200]);
        assert.equal(store.shadowDenials, 2);
        assert.deepEqual(reported, [[`rl:erl:{${id}}`], [`rl:erl:{${id}}`]]);
        const last = await srv.hit(id);
        assert.match(last.headers.ratelimit, /^limit=2, remaining=0, reset=\d+$/);
        assert.equal(last.headers['retry-after'], undefined);
      } finally {
        await srv.close();
      }
    });

    it('metrics: allowed, denied, shadow_denied, and passOnStoreError\'s failure_open / failure_closed', () => withoutConsoleError(async () => {
      const registry = new Registry();
      const time = steppedTime(T);
      const store = (options) => new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock, metrics: registry, ...options });
      const { default: Redis } = await import('ioredis');
      const { ioredisOptions } = await import('redis-rl');
      const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
      dead.on('error', () => {});
      const apps = [
        await app(rateLimit, { windowMs: 10_000, limit: 2, store: store() }),
        await app(rateLimit, { windowMs: 10_000, limit: 1, store: store({ shadow: true, onShadow: () => {} }) }),
        await app(rateLimit, { windowMs: 10_000, limit: 2, passOnStoreError: true, store: store({ client: dead, onError: () => {} }), logger: quiet }),
        await app(rateLimit, { windowMs: 10_000, limit: 2, passOnStoreError: false, store: store({ client: dead, onError: () => {} }), logger: quiet }),
      ];
      try {
        const [enforced, shadow, open, closed] = apps;
        // Each app its own identity: the stores share the key prefix.
        const [e, s] = [freshId(), freshId()];
        const statuses = [];
        for (const [a, id] of [[enforced, e], [enforced, e], [enforced, e], [shadow, s], [shadow, s], [open, e], [closed, e]]) statuses.push((await a.hit(id)).status);
        assert.deepEqual(statuses, [200, 200, 429, 200, 200, 200, 500]);
        assert.deepEqual(await decisionsOf(registry, 'erl'), {
          outcomes: { allowed: 3, denied: 1, shadow_denied: 1, failure_open: 1, failure_closed: 1 },
          timed: 7,
        });
      } finally {
        for (const a of apps) await a.close();
        dead.disconnect();
      }
      // With a limit function the library compares, not the module: nothing the kit could count.
      assert.throws(() => store().init({ limit: () => 5, windowMs: 1000 }), /metrics need a numeric limit/);
    }));

    it('a dead Redis: passOnStoreError decides (true allows, false errors), every failure reported, fast', () => withoutConsoleError(async () => {
      const { default: Redis } = await import('ioredis');
      const { ioredisOptions } = await import('redis-rl');
      const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
      dead.on('error', () => {});
      const reported = [];
      try {
        for (const passOnStoreError of [true, false]) {
          const store = new RedisRlStore({ client: dead, onError: (err, info) => reported.push(info) });
          const srv = await app(rateLimit, { windowMs: 10_000, limit: 2, passOnStoreError, store, logger: quiet });
          try {
            const started = performance.now();
            const r = await srv.hit('someone');
            assert.ok(performance.now() - started < 1500);
            assert.equal(r.status, passOnStoreError ? 200 : 500);
            assert.equal(r.headers.ratelimit, undefined);
          } finally {
            await srv.close();
          }
        }
        assert.deepEqual(reported.map((i) => [i.command, i.failure]), [['RL.SLIDECOUNT', 'library'], ['RL.SLIDECOUNT', 'library']]);
      } finally {
        dead.disconnect();
      }
    }));

    it('a restart under traffic loses nothing and needs no script (no NOSCRIPT)', () => withoutConsoleError(async () => {
      const server = await startServer({ persist: true });
      const c = await ioredisClient(server.port);
      const errors = [];
      const store = new RedisRlStore({ client: c.client, timeout: SLOW_OK, clock: () => T, onError: (err) => errors.push(err.message) });
      const srv = await app(rateLimit, { windowMs: 60_000, limit: 12, passOnStoreError: true, standardHeaders: 'draft-7', store, logger: quiet });
      try {
        const counts = await restartUnderTraffic(server, async () => {
          const r = await srv.hit('steady');
          if (r.status === 429) return 'denied';
          return r.headers.ratelimit ? 'admitted' : 'failure';
        });
        assertNothingLost(counts, errors, 12);
      } finally {
        await srv.close();
        await c.close();
        await server.stop();
      }
    }));

    it('getKey reports the state\'s own reset (PEEK\'s reset_after_ms), not that of a request made now', async () => {
      const time = steppedTime(T);
      const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'slidelog', clock: time.clock });
      const limiter = rateLimit({ keyGenerator: (req) => req.headers['x-id'], validate: false, windowMs: 2000, limit: 3, store });
      const a = express();
      a.get('/', limiter, (req, res) => res.send('ok'));
      const srv = await listen(http.createServer(a));
      const id = freshId();
      try {
        await time.at(0);
        assert.equal(await limiter.getKey(id), undefined);
        assert.equal((await fetch(srv.base, { headers: { 'x-id': id } })).status, 200);
        await time.at(503);
        const { totalHits, resetTime } = await limiter.getKey(id);
        // The hit at 0 leaves the log at 2000: 1497 ms from now (a request now would say 2000).
        const left = resetTime.getTime() - Date.now();
        assert.equal(totalHits, 1);
        assert.ok(left > 1400 && left <= 1497, `reset in ${left} ms`);
      } finally {
        await srv.close();
      }
    });

    it('limit as a function of the request, and limit 0: the module counts, the library compares (as stock does)', async () => {
      const time = steppedTime(T);
      const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock, algorithm: 'slidelog' });
      // Premium callers get 3, the rest 1; the function is asked after the store has counted.
      const srv = await app(rateLimit, { windowMs: 10_000, limit: async (req) => (req.headers['x-id'].startsWith('vip') ? 3 : 1), standardHeaders: 'draft-7', store });
      const zero = await app(rateLimit, { windowMs: 10_000, limit: 0, store: new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock }) });
      const vip = `vip-${freshId()}`;
      const plain = freshId();
      try {
        await time.at(0);
        const vipSeen = [];
        for (let i = 0; i < 4; i++) vipSeen.push((await srv.hit(vip)).status);
        assert.deepEqual(vipSeen, [200, 200, 200, 429]);
        assert.deepEqual([(await srv.hit(plain)).status, (await srv.hit(plain)).status], [200, 429]);
        // The window is the module's: 10 s after the first hits, a caller is admitted again.
        await time.at(10_001);
        const again = await srv.hit(plain);
        assert.equal(again.status, 200);
        assert.equal(again.headers.ratelimit, 'limit=1, remaining=0, reset=10');
        // limit: 0 denies everything, as express-rate-limit does.
        assert.deepEqual([(await zero.hit(plain)).status, (await zero.hit(plain)).status], [429, 429]);
      } finally {
        await srv.close();
        await zero.close();
      }
    });
  });
}

describe('algorithm counter: rate-limit-redis\'s counting', () => {
  // RL.COUNTER's window ends at the key's expiry on the server clock: no clock here,
  // and the tests shorten a TTL in Redis rather than wait.
  it('every request is counted, the 429 too, so skipFailedRequests gives back what the 429 spent', async () => {
    const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'counter', prefix: 'erl-count:' });
    const a = express();
    a.get('/', rateLimit8({ keyGenerator: (req) => req.headers['x-id'], validate: false, windowMs: 60_000, limit: 2, skipFailedRequests: true, store }), (req, res) => res.send('ok'));
    const srv = await listen(http.createServer(a));
    const id = freshId();
    const hit = () => fetch(srv.base, { headers: { 'x-id': id } }).then((r) => r.status);
    try {
      const seen = [];
      for (let i = 0; i < 4; i++) {
        seen.push(await hit());
        await new Promise((r) => setTimeout(r, 30)); // the decrement runs once the 429 is sent
      }
      // A 429 counted and given back leaves the count at the limit: still denied.
      assert.deepEqual(seen, [200, 200, 429, 429]);
      assert.equal(await shared.conn.client.get(`erl-count:{${id}}`), '2');
    } finally {
      await srv.close();
    }
  });

  it('resetExpiryOnChange: every request, a denied one too, restarts the window', async () => {
    const store = new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'counter', prefix: 'erl-renew:', resetExpiryOnChange: true });
    store.init({ limit: 1, windowMs: 60_000 });
    const id = freshId();
    const key = `erl-renew:{${id}}`;
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const { totalHits, resetTime } = await store.increment(id);
      seen.push([totalHits, await shared.conn.client.get(key), Math.round((resetTime - Date.now()) / 1000)]);
      const ttl = await shared.conn.client.pttl(key);
      assert.ok(ttl > 59_000 && ttl <= 60_000, `a whole window after request ${i + 1}: PTTL ${ttl}`);
      await shared.conn.client.pexpire(key, 5000); // as if 55 s had passed since it
    }
    // Counted, denied ones too, and each reports the restarted window as its reset.
    assert.deepEqual(seen, [[1, '1', 60], [2, '2', 60], [2, '3', 60]]);
  });
});

describe('resetAll: every client\'s limit, and only the keys this store named', () => {
  // Every key on the (standalone) shared server that matches a glob, in one SCAN page.
  const scanAll = async (glob) => (await shared.conn.client.call('SCAN', '0', 'MATCH', glob, 'COUNT', '100000'))[1].sort();

  for (const [lib, connect] of Object.entries(standalone)) {
    it(`through ${lib}: two exhausted clients are admitted again; another store (one whose prefix starts with this one's too) and other keys are untouched`, async () => {
      const conn = await connect(shared.redis.port);
      const time = steppedTime(T);
      const prefix = `erl-all-${lib}:`;
      const store = new RedisRlStore({ client: conn.client, timeout: SLOW_OK, clock: time.clock, prefix });
      const nested = new RedisRlStore({ client: conn.client, timeout: SLOW_OK, clock: time.clock, prefix: `${prefix}nested:` });
      const srv = await app(rateLimit8, { windowMs: 60_000, limit: 2, store });
      const other = await app(rateLimit8, { windowMs: 60_000, limit: 2, store: nested });
      const [a, b, c] = [freshId(), freshId(), freshId()];
      // Under the prefix's text but not a key the store names, and outside it.
      const foreign = [`${prefix}plain`, `outside-${lib}`];
      try {
        for (const k of foreign) await shared.conn.client.set(k, '1');
        const statuses = async (s, id) => [(await s.hit(id)).status, (await s.hit(id)).status, (await s.hit(id)).status];
        assert.deepEqual([await statuses(srv, a), await statuses(srv, b), await statuses(other, c)], [[200, 200, 429], [200, 200, 429], [200, 200, 429]]);
        // The sliding counter's keys are derived ones, <prefix>{id}:<window>.
        const ours = await scanAll(`${prefix}{*`);
        assert.equal(ours.length, 2);
        for (const k of ours) assert.match(k, new RegExp(`^${prefix}\\{(${a}|${b})\\}:\\d+$`));
        assert.equal(await store.resetAll(), undefined);
        assert.deepEqual(await scanAll(`${prefix}{*`), []);
        assert.deepEqual([(await srv.hit(a)).status, (await srv.hit(b)).status], [200, 200]);
        assert.equal((await other.hit(c)).status, 429);
        assert.equal(await shared.conn.client.exists(...foreign), foreign.length);
      } finally {
        await srv.close();
        await other.close();
        await shared.conn.client.del(...foreign);
        await conn.close();
      }
    });
  }

  it('a prefix with glob characters (*?[]\\) resets its own keys only, not those its unescaped glob would match', async () => {
    const time = steppedTime(T);
    const store = (prefix) => new RedisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock, prefix });
    const globby = store('erl:[x]*?\\:');
    // Unescaped, 'erl:[x]*?\:{*' would match 'erl:xab:{…}'.
    const srv = await app(rateLimit8, { windowMs: 60_000, limit: 1, store: globby });
    const decoy = await app(rateLimit8, { windowMs: 60_000, limit: 1, store: store('erl:xab:') });
    const id = freshId();
    try {
      assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).status, (await decoy.hit(id)).status, (await decoy.hit(id)).status], [200, 429, 200, 429]);
      await globby.resetAll();
      assert.deepEqual([(await srv.hit(id)).status, (await decoy.hit(id)).status], [200, 429]);
    } finally {
      await srv.close();
      await decoy.close();
    }
  });

  it('goes through every SCAN page: 3,000 keys, none left', async () => {
    const prefix = 'erl-many:';
    const keys = Array.from({ length: 3000 }, (_, i) => `${prefix}{k${i}}:${i % 2}`);
    const p = shared.conn.client.pipeline();
    for (const k of keys) p.set(k, '1');
    await p.exec();
    assert.equal(await shared.conn.client.exists(...keys), keys.length);
    await new RedisRlStore({ client: shared.conn.client, prefix }).resetAll();
    assert.equal(await shared.conn.client.exists(...keys), 0);
  });

  it('a Redis failure rejects (there is no request to decide, so no failure policy)', async () => {
    const { default: Redis } = await import('ioredis');
    const { ioredisOptions } = await import('redis-rl');
    const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
    dead.on('error', () => {});
    try {
      await assert.rejects(new RedisRlStore({ client: dead }).resetAll());
    } finally {
      dead.disconnect();
    }
  });
});

it('refused when built, with the option\'s name: failure (the policy is passOnStoreError), resetExpiryOnChange, rate-limit-redis\'s sendCommand, unknown options', () => {
  const client = shared.conn.client;
  assert.throws(() => new RedisRlStore({ client, timeout: SLOW_OK, failure: 'open' }), /passOnStoreError/);
  assert.throws(() => new RedisRlStore({ client, timeout: SLOW_OK, algorithm: 'leaky' }), /unknown algorithm/);
  // resetExpiryOnChange is the stock store's own window re-armed: algorithm 'counter' only.
  assert.throws(() => new RedisRlStore({ client, resetExpiryOnChange: true }), /option 'resetExpiryOnChange' \(rate-limit-redis 4's: every request, denied ones included, restarts the window\) needs algorithm 'counter'/);
  assert.throws(() => new RedisRlStore({ client, algorithm: 'gcra', resetExpiryOnChange: true }), /needs algorithm 'counter'/);
  assert.throws(() => new RedisRlStore({ client, algorithm: 'counter', resetExpiryOnChange: 'yes' }), /resetExpiryOnChange must be true or false/);
  assert.throws(() => new RedisRlStore({ client, sendCommand: () => {} }), /'sendCommand' is rate-limit-redis's; pass the connection as `client`/);
  assert.throws(() => new RedisRlStore({ client, windowMs: 1000 }), /unknown option 'windowMs'/);
  // A limit the library would refuse, and shadow mode with a limit the library decides.
  assert.throws(() => rateLimit7({ limit: 1.5, store: new RedisRlStore({ client }), validate: false }), /limit must be a whole number/);
  assert.throws(() => rateLimit7({ limit: () => 5, store: new RedisRlStore({ client, shadow: true }), validate: false }), /shadow mode needs a numeric limit/);
});
