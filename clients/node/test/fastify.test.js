// redis-rl/fastify inside real Fastify apps (driven by fastify.inject), on
// @fastify/rate-limit 10 and 11, next to the plugin's own Redis store on the same server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import rateLimit11 from '@fastify/rate-limit';
import rateLimit10 from 'fastify-rate-limit-10';
import { Registry } from 'prom-client';
import { redisRlStore } from 'redis-rl/fastify';
import { ioredisClient } from './support/clients.js';
import { decisionsOf } from './support/metrics.js';
import { assertNothingLost, sharedServer, SLOW_OK, BURST_WINDOW_MS, restartUnderTraffic, steppedTime, burstResults, admitting } from './support/adapters.js';
import { freePort, noBlock, startServer } from './support/servers.js';

const T = 1718609340000;

const shared = sharedServer();
const freshId = shared.freshId;

async function app(plugin, options, routes = (f) => f.get('/', async () => 'ok')) {
  const f = Fastify();
  await f.register(plugin, { keyGenerator: (req) => req.headers['x-id'], ...options });
  routes(f);
  await f.ready();
  return {
    hit: async (id, url = '/') => {
      const r = await f.inject({ method: 'GET', url, headers: { 'x-id': id } });
      return { status: r.statusCode, headers: r.headers, body: r.body };
    },
    close: () => f.close(),
  };
}

for (const [version, plugin] of [['11', rateLimit11], ['10', rateLimit10]]) {
  describe(`@fastify/rate-limit ${version}`, () => {
    it('algorithm counter counts as the plugin\'s RedisStore: the 429s too, on the route\'s key', async () => {
      // RL.COUNTER's window is the key's on the server clock: no clock here.
      const srv = await app(plugin, { max: 2, timeWindow: 60_000, store: redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'counter', nameSpace: `count-${version}:` }) });
      const id = freshId();
      try {
        const seen = [];
        for (let i = 0; i < 4; i++) seen.push((await srv.hit(id)).status);
        assert.deepEqual(seen, [200, 200, 429, 429]);
        assert.equal(await shared.conn.client.get(`count-${version}:{${id}}:`), '4');
      } finally {
        await srv.close();
      }
    });

    it('the limit holds exactly; x-ratelimit-*, retry-after and the 429 come from the module\'s reply', async () => {
      const time = steppedTime(T);
      const srv = await app(plugin, { max: 3, timeWindow: 10_000, store: redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'slidelog', clock: time.clock }) });
      const id = freshId();
      try {
        const seen = [];
        for (const ms of [0, 1000, 2000, 3000]) {
          await time.at(ms);
          const r = await srv.hit(id);
          seen.push([r.status, r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining'], r.headers['x-ratelimit-reset'], r.headers['retry-after']]);
        }
        assert.deepEqual(seen, [
          [200, '3', '2', '10', undefined],
          [200, '3', '1', '10', undefined],
          [200, '3', '0', '10', undefined],
          [429, '3', '0', '7', '7'],
        ]);
        const denied = await srv.hit(id);
        assert.equal(JSON.parse(denied.body).message, 'Rate limit exceeded, retry in 7 seconds');
        await time.at(10_001);
        assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).status], [200, 429]);
      } finally {
        await srv.close();
      }
    });

    it('a route\'s own config gets a child store with its own key and limit', async () => {
      const time = steppedTime(T);
      const srv = await app(plugin, { max: 5, timeWindow: 10_000, store: redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock }) }, (f) => {
        f.get('/', async () => 'ok');
        // The same window as the global limit, so a shared key would show in the counts.
        f.get('/strict', { config: { rateLimit: { max: 1, timeWindow: '10 seconds' } } }, async () => 'ok');
      });
      const id = freshId();
      try {
        assert.deepEqual([(await srv.hit(id, '/strict')).status, (await srv.hit(id, '/strict')).status], [200, 429]);
        const r = await srv.hit(id, '/');
        assert.deepEqual([r.status, r.headers['x-ratelimit-remaining']], [200, '4']);
      } finally {
        await srv.close();
      }
    });

    it('ban, continueExceeding and exponentialBackoff are the module\'s penalty box (BLOCK), with the plugin\'s numbers', async (t) => {
      const skip = await noBlock();
      if (skip) return t.skip(skip);
      const client = shared.conn.client;
      const run = async (options, steps) => {
        const time = steppedTime(T);
        const srv = await app(plugin, { max: 2, timeWindow: 10_000, ...options, store: redisRlStore({ client, timeout: SLOW_OK, algorithm: 'slidelog', clock: time.clock }) });
        const id = freshId();
        const seen = [];
        try {
          for (const ms of steps) {
            await time.at(ms);
            const r = await srv.hit(id);
            seen.push([ms, r.status, r.headers['retry-after']]);
          }
        } finally {
          await srv.close();
        }
        return seen;
      };
      // ban: 1: the first denial is a 429, the second past max a 403 (current - max > ban).
      assert.deepEqual(await run({ ban: 1 }, [0, 0, 0, 0, 0]).then((s) => s.map((x) => x[1])), [200, 200, 429, 403, 403]);
      // continueExceeding: each denied request restarts the 10 s; after 10 s of quiet, 200.
      assert.deepEqual(await run({ continueExceeding: true }, [0, 0, 0, 8000, 17_000, 27_001]), [
        [0, 200, undefined], [0, 200, undefined], [0, 429, '10'], [8000, 429, '10'], [17_000, 429, '10'], [27_001, 200, undefined],
      ]);
      // exponentialBackoff: the k-th denial waits 10 s × 2^(k-1).
      assert.deepEqual(await run({ exponentialBackoff: true }, [0, 0, 0, 0, 0]).then((s) => s.map((x) => x[2])), [undefined, undefined, '10', '20', '40']);
      // A global continueExceeding that a route overrides: accepted, as stock does.
      const time = steppedTime(T);
      const srv = await app(plugin, { max: 1, timeWindow: 10_000, continueExceeding: true, store: redisRlStore({ client, timeout: SLOW_OK, clock: time.clock }) },
        (f) => f.get('/', { config: { rateLimit: { max: 1, timeWindow: 10_000, continueExceeding: false } } }, async () => 'ok'));
      try {
        assert.equal((await srv.hit(freshId())).status, 200);
      } finally {
        await srv.close();
      }
      assert.throws(() => redisRlStore({ client, timeout: SLOW_OK, failure: 'open' }), /skipOnError/);
    });

    it('on algorithm counter exponentialBackoff is RL.COUNTER\'s ESCALATE: the plugin\'s RedisStore\'s TTLs, statuses and 285,421 years', async () => {
      const client = shared.conn.client;
      // On the server clock (RL.COUNTER's window is the key's TTL): no clock here.
      const run = async (store, key) => {
        const srv = await app(plugin, { max: 2, timeWindow: 10_000, exponentialBackoff: true, ...store });
        const id = freshId();
        const seen = [];
        try {
          for (let i = 0; i < 6; i++) {
            const r = await srv.hit(id);
            // The TTL the request left on the server, to the second (both stores' keys).
            const ttl = await client.pttl(key(id));
            seen.push([r.status, r.headers['retry-after'], Math.round(ttl / 1000)]);
          }
        } finally {
          await srv.close();
        }
        return seen;
      };
      const stock = await run({ redis: client, nameSpace: `esc-stock-${version}-` }, (id) => `esc-stock-${version}-${id}`);
      const ours = await run({ store: redisRlStore({ client, timeout: SLOW_OK, algorithm: 'counter', nameSpace: `esc-${version}:` }) }, (id) => `esc-${version}:{${id}}:`);
      assert.deepEqual(ours, [
        [200, undefined, 10], [200, undefined, 10], [429, '10', 10], [429, '20', 20], [429, '40', 40], [429, '80', 80],
      ]);
      assert.deepEqual(ours, stock);
      // The plugin's own test: a route of 285,421 years, past the block's ten years.
      const srv = await app(plugin, { max: 2, timeWindow: 500, exponentialBackoff: true, store: redisRlStore({ client, timeout: SLOW_OK, algorithm: 'counter', nameSpace: `years-${version}:` }) },
        (f) => f.get('/', { config: { rateLimit: { max: 2, timeWindow: '285421 years' } } }, async () => 'ok'));
      try {
        const id = freshId();
        assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).status], [200, 200]);
        const denied = await srv.hit(id);
        assert.deepEqual([denied.status, JSON.parse(denied.body).message], [429, 'Rate limit exceeded, retry in 285421 years']);
        assert.equal(await client.pttl(`years-${version}:{${id}}:GET/`) > 2 ** 53 - 2000, true);
      } finally {
        await srv.close();
      }
    });

    it('the boundary burst: the plugin\'s Redis store admits 16, the module\'s sliding windows about half', async (t) => {
      const results = await burstResults({
        freshId,
        start: T,
        stock: async () => admitting(await app(plugin, { max: 8, timeWindow: BURST_WINDOW_MS, redis: shared.conn.client, nameSpace: `stock-fastify-${version}-` })),
        ours: async (algorithm, clock) => admitting(await app(plugin, { max: 8, timeWindow: BURST_WINDOW_MS, store: redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm, clock }) })),
        counter: true,
      });
      t.diagnostic(`boundary burst, admitted of 16: ${JSON.stringify(results)}`);
      // counter is the plugin's own window (from the first hit): the stock burst, on purpose.
      assert.deepEqual(results, { stock: 16, slidecount: 9, slidelog: 9, gcra: 11, fixed: 16, counter: 16 });
    });

    it('a numeric timeWindow the module cannot take is refused at registration, with its name, never per request', async () => {
      const store = () => redisRlStore({ client: shared.conn.client, timeout: SLOW_OK });
      const refused = /redis-rl\/fastify: (route GET\/long: )?timeWindow must be 1 ms to ten years \(315360000000 ms\), got /;
      // Global: the plugin builds the store when it registers.
      await assert.rejects(app(plugin, { max: 2, timeWindow: '285421 years', store: store() }), refused);
      await assert.rejects(app(plugin, { max: 2, timeWindow: 0, store: store() }), refused);
      // A route's: its store is built when the route is added.
      await assert.rejects(app(plugin, { max: 2, timeWindow: 1000, store: store() },
        (f) => f.get('/long', { config: { rateLimit: { timeWindow: 315_360_000_001 } } }, async () => 'ok')), /route GET\/long: timeWindow .* got 315360000001 ms/);
      // On algorithm counter a window may be 285,421 years, but not a block's (ban).
      const counter = () => redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, algorithm: 'counter' });
      (await app(plugin, { max: 2, timeWindow: '285421 years', store: counter() })).close();
      await assert.rejects(app(plugin, { max: 2, timeWindow: '285421 years', ban: 1, store: counter() }), refused);
      await assert.rejects(app(plugin, { max: 2, timeWindow: 2 ** 63, store: counter() }),
        /timeWindow must be 1 ms to about 292,000 years \(9223372036854775 ms\), got /);
      // Ten years is the longest window, and a function is only known per request.
      const srv = await app(plugin, { max: 1, timeWindow: 315_360_000_000, store: store() },
        (f) => {
          f.get('/', async () => 'ok');
          f.get('/f', { config: { rateLimit: { timeWindow: () => 1000 } } }, async () => 'ok');
        });
      try {
        const id = freshId();
        assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).status, (await srv.hit(id, '/f')).status], [200, 429, 200]);
      } finally {
        await srv.close();
      }
    });

    it('shadow: a would-be denial passes, is reported and counted; the headers show the real state', async () => {
      const reported = [];
      const Store = redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, shadow: true, clock: () => T, onShadow: (d, info) => reported.push(info.keys) });
      const srv = await app(plugin, { max: 2, timeWindow: 10_000, store: Store });
      const id = freshId();
      try {
        const seen = [];
        for (let i = 0; i < 4; i++) {
          const r = await srv.hit(id);
          seen.push([r.status, r.headers['x-ratelimit-remaining']]);
        }
        assert.deepEqual(seen, [[200, '1'], [200, '0'], [200, '0'], [200, '0']]);
        assert.equal(Store.shadowDenials, 2);
        assert.deepEqual(reported, [[`rl:fastify:{${id}}:`], [`rl:fastify:{${id}}:`]]);
      } finally {
        await srv.close();
      }
    });

    it('metrics: allowed, denied, shadow_denied, and skipOnError\'s failure_open / failure_closed', async () => {
      const registry = new Registry();
      const time = steppedTime(T);
      const store = (options) => redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock, metrics: registry, ...options });
      const { default: Redis } = await import('ioredis');
      const { ioredisOptions } = await import('redis-rl');
      const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
      dead.on('error', () => {});
      const apps = [
        await app(plugin, { max: 2, timeWindow: 10_000, store: store() }),
        await app(plugin, { max: 1, timeWindow: 10_000, store: store({ shadow: true, onShadow: () => {} }) }),
        await app(plugin, { max: 2, timeWindow: 10_000, skipOnError: true, store: store({ client: dead, onError: () => {} }) }),
        await app(plugin, { max: 2, timeWindow: 10_000, skipOnError: false, store: store({ client: dead, onError: () => {} }) }),
      ];
      try {
        const [enforced, shadow, open, closed] = apps;
        // Each app its own identity: the stores share the key prefix.
        const [e, s] = [freshId(), freshId()];
        const statuses = [];
        for (const [a, id] of [[enforced, e], [enforced, e], [enforced, e], [shadow, s], [shadow, s], [open, e], [closed, e]]) statuses.push((await a.hit(id)).status);
        assert.deepEqual(statuses, [200, 200, 429, 200, 200, 200, 500]);
        assert.deepEqual(await decisionsOf(registry, 'fastify'), {
          outcomes: { allowed: 3, denied: 1, shadow_denied: 1, failure_open: 1, failure_closed: 1 },
          timed: 7,
        });
      } finally {
        for (const a of apps) await a.close();
        dead.disconnect();
      }
    });

    it('a dead Redis: skipOnError decides (true allows, false errors), every failure reported, fast', async () => {
      const { default: Redis } = await import('ioredis');
      const { ioredisOptions } = await import('redis-rl');
      const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
      dead.on('error', () => {});
      const reported = [];
      try {
        for (const skipOnError of [true, false]) {
          const srv = await app(plugin, { max: 2, timeWindow: 10_000, skipOnError, store: redisRlStore({ client: dead, onError: (err, info) => reported.push(info.command) }) });
          try {
            const started = performance.now();
            const r = await srv.hit('someone');
            assert.ok(performance.now() - started < 1500);
            assert.equal(r.status, skipOnError ? 200 : 500);
          } finally {
            await srv.close();
          }
        }
        assert.deepEqual(reported, ['RL.SLIDECOUNT', 'RL.SLIDECOUNT']);
      } finally {
        dead.disconnect();
      }
    });

    it('a restart under traffic loses nothing and needs no script (no NOSCRIPT)', async () => {
      const server = await startServer({ persist: true });
      const c = await ioredisClient(server.port);
      const errors = [];
      const srv = await app(plugin, { max: 12, timeWindow: 60_000, skipOnError: true, store: redisRlStore({ client: c.client, timeout: SLOW_OK, clock: () => T, onError: (err) => errors.push(err.message) }) });
      try {
        const counts = await restartUnderTraffic(server, async () => {
          const r = await srv.hit('steady');
          if (r.status === 429) return 'denied';
          // skipOnError: the plugin admits with the full budget left.
          return r.headers['x-ratelimit-remaining'] === '12' ? 'failure' : 'admitted';
        });
        assertNothingLost(counts, errors, 12);
      } finally {
        await srv.close();
        await c.close();
        await server.stop();
      }
    });
  });
}

it('@fastify/rate-limit 11: { increment: false } reads the state without spending', async () => {
  const time = steppedTime(T);
  const f = Fastify();
  await f.register(rateLimit11, { global: false, store: redisRlStore({ client: shared.conn.client, timeout: SLOW_OK, clock: time.clock }) });
  await f.ready();
  try {
    const check = f.createRateLimit({ max: 3, timeWindow: 10_000, keyGenerator: () => 'reader' });
    const req = { ip: '127.0.0.1', routeOptions: { config: {} }, headers: {} };
    assert.equal((await check(req, { increment: false })).remaining, 3);
    assert.equal((await check(req)).remaining, 2);
    assert.equal((await check(req, { increment: false })).remaining, 2);
    assert.equal((await check(req, { increment: false })).remaining, 2);
  } finally {
    await f.close();
  }
});
