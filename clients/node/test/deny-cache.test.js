// The opt-in deny cache, held against the server's own answer at the same instant:
// whenever the kit denies from its cache, a PEEK at that NOW must deny too.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter } from '../index.js';
import { nodeRedisClient, raw } from './support/clients.js';
import { features, NO_ALL, NO_REFUND_RESET, startServer } from './support/servers.js';

const T = 1718609340000;

let server;
let conn;
let feats;
before(async () => {
  server = await startServer();
  conn = await nodeRedisClient(server.port);
  feats = await features(server.port);
});
after(async () => {
  await conn?.close();
  await server?.stop();
});

// The kit's time is this variable: every call goes out with NOW = clock().
function steppedLimiter(options = {}) {
  const time = { now: T };
  const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => time.now, denyCache: true, ...options });
  return { rl, time };
}

// What the server says about this request at this instant, without spending.
async function serverAdmits(limits, keys, nowMs, costs) {
  const spec = (l, i) => [l.algorithm.toUpperCase(), keys[i], l.limit, l.window,
    ...(l.burst ? ['BURST', l.burst] : []), 'COST', costs[i]];
  const args = limits.length === 1
    ? [`RL.${limits[0].algorithm.toUpperCase()}`, ...spec(limits[0], 0).slice(1)]
    : ['RL.ALL', limits.length, ...limits.flatMap(spec)];
  const reply = await raw(conn.client, ...args, 'NOW', nowMs * 1000, 'PEEK');
  return reply[0] === 1;
}

// Deterministic pseudo-random steps, so a failure replays the same way.
function* steps(seed, count, maxMs) {
  let x = seed;
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    yield 1 + (x % maxMs);
  }
}

const scenarios = [
  { name: 'fixed', limits: [{ name: 'f', algorithm: 'fixed', limit: 3, window: 2 }] },
  { name: 'slidecount', limits: [{ name: 's', algorithm: 'slidecount', limit: 3, window: 2 }] },
  { name: 'slidelog', limits: [{ name: 'l', algorithm: 'slidelog', limit: 3, window: 2 }] },
  { name: 'gcra', limits: [{ name: 'g', algorithm: 'gcra', limit: 3, window: 2, burst: 2 }] },
  {
    name: 'RL.ALL',
    all: true,
    limits: [{ name: 'a1', algorithm: 'gcra', limit: 5, window: 2 }, { name: 'a2', algorithm: 'slidelog', limit: 4, window: 3 }],
  },
];

describe('deny cache', () => {
  for (const { name, limits, all } of scenarios) {
    it(`${name}: never denies what the server would admit, and saves round trips`, async (t) => {
      if (all && !feats.all) return t.skip(NO_ALL);
      const { rl, time } = steppedLimiter();
      const identity = `walk-${name}`;
      const keys = limits.map((l) => `rl:{${identity}}:${l.name}`);
      const counts = { cache: 0, redis: 0, deniedByRedis: 0 };
      for (const step of steps(name.length * 7919, 300, 120)) {
        time.now += step;
        const costs = limits.map(() => 1 + (step % 2));
        const admits = await serverAdmits(limits, keys, time.now, costs);
        const d = await rl.check(limits, identity, { cost: Object.fromEntries(limits.map((l, i) => [l.name, costs[i]])) });
        counts[d.source] += 1;
        if (d.source === 'cache') {
          assert.equal(admits, false, `cached denial at +${time.now - T} ms, but the server admits`);
          assert.ok(d.retryAfter > 0 && !d.allowed);
        } else {
          assert.equal(d.allowed, admits, `at +${time.now - T} ms`);
          if (!d.allowed) counts.deniedByRedis += 1;
        }
      }
      assert.ok(counts.cache > 20, `the cache answered only ${counts.cache} times`);
      assert.ok(counts.deniedByRedis > 0);
    });
  }

  it('denies until exactly the retry time, then asks the server again', async () => {
    const { rl, time } = steppedLimiter();
    const limit = { name: 'edge', algorithm: 'gcra', limit: 3, window: 3, burst: 1 };
    assert.equal((await rl.check(limit, 'edge')).allowed, true);
    const denied = await rl.check(limit, 'edge');
    assert.deepEqual([denied.allowed, denied.source, denied.retryAfter], [false, 'redis', 1000]);

    time.now += 999;
    const cached = await rl.check(limit, 'edge');
    assert.deepEqual([cached.allowed, cached.source, cached.retryAfter], [false, 'cache', 1]);
    assert.equal(await serverAdmits([limit], ['rl:{edge}:edge'], time.now, [1]), false);

    time.now += 1;
    const again = await rl.check(limit, 'edge');
    assert.deepEqual([again.allowed, again.source], [true, 'redis']);
  });

  it('a cheaper request is not denied by a costlier one\'s entry', async () => {
    const { rl } = steppedLimiter();
    const limit = { name: 'cost', algorithm: 'fixed', limit: 3, window: 10 };
    await rl.check(limit, 'cost', { cost: 2 });
    const big = await rl.check(limit, 'cost', { cost: 2 });
    assert.deepEqual([big.allowed, big.source], [false, 'redis']);
    assert.equal((await rl.check(limit, 'cost', { cost: 2 })).source, 'cache');
    assert.equal((await rl.check(limit, 'cost', { cost: 3 })).source, 'cache');
    const small = await rl.check(limit, 'cost', { cost: 1 });
    assert.deepEqual([small.allowed, small.source], [true, 'redis']);
  });

  it('a never-admissible request is not cached (there is no time to cache it until)', async () => {
    const { rl } = steppedLimiter();
    const limit = { name: 'never', algorithm: 'fixed', limit: 3, window: 10 };
    for (let i = 0; i < 2; i++) assert.equal((await rl.check(limit, 'never', { cost: 4 })).source, 'redis');
  });

  it('this process\'s reset ends its cached denials', async (t) => {
    if (!feats.refundReset) return t.skip(NO_REFUND_RESET);
    const { rl } = steppedLimiter();
    const limit = { name: 'reset', algorithm: 'fixed', limit: 1, window: 10 };
    await rl.check(limit, 'r');
    assert.equal((await rl.check(limit, 'r')).source, 'redis');
    assert.equal((await rl.check(limit, 'r')).source, 'cache');
    await rl.reset(limit, 'r');
    const after = await rl.check(limit, 'r');
    assert.deepEqual([after.allowed, after.source], [true, 'redis']);
  });

  it('never answers for a counter that counts its denials (countAll, escalate): each reaches Redis', async () => {
    const { rl } = steppedLimiter();
    const sources = async (limit, key) => {
      const seen = [];
      for (let i = 0; i < 3; i++) seen.push((await rl.check(limit, key)).source);
      return seen;
    };
    const counted = { name: 'all', algorithm: 'counter', limit: 1, window: 10, countAll: true };
    assert.deepEqual(await sources(counted, 'counted'), ['redis', 'redis', 'redis']);
    assert.equal(await raw(conn.client, 'GET', 'rl:{counted}:all'), '3');
    const escalated = { name: 'esc', algorithm: 'counter', limit: 1, window: 10, escalate: true };
    assert.deepEqual(await sources(escalated, 'escalated'), ['redis', 'redis', 'redis']);
    const plain = { name: 'plain', algorithm: 'counter', limit: 1, window: 10 };
    assert.deepEqual(await sources(plain, 'plain'), ['redis', 'redis', 'cache']);
  });

  it('is off unless asked for', async () => {
    const { rl } = steppedLimiter({ denyCache: false });
    const limit = { name: 'off', algorithm: 'fixed', limit: 1, window: 10 };
    const sources = [];
    for (let i = 0; i < 3; i++) sources.push((await rl.check(limit, 'off')).source);
    assert.deepEqual(sources, ['redis', 'redis', 'redis']);
  });
});
