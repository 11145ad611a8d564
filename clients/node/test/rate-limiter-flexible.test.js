// redis-rl/rate-limiter-flexible: RateLimiterRedisRl in the library's documented
// Express middleware, inside its RateLimiterUnion, BurstyRateLimiter and
// RLWrapperBlackAndWhite, next to the library's RateLimiterRedis on the same server.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import {
  BurstyRateLimiter, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, RateLimiterUnion, RLWrapperBlackAndWhite,
} from 'rate-limiter-flexible';
import { RateLimiterRedisRl, RateLimiterUnionRl } from 'redis-rl/rate-limiter-flexible';
import { ioredisClient, raw, standalone } from './support/clients.js';
import { assertNothingLost, sharedServer, SLOW_OK, BURST_WINDOW_MS, listen, restartUnderTraffic, steppedTime, burstResults } from './support/adapters.js';
import { freePort, noBlock, startServer } from './support/servers.js';

const T = 1718609340000;

const shared = sharedServer();
const freshId = shared.freshId;
const settle = (p) => p.then((res) => ({ ok: true, res }), (res) => ({ ok: false, res }));

// The middleware of the library's README ("Express middleware"), headers included.
async function app(limiter) {
  const a = express();
  a.use((req, res, next) => {
    limiter.consume(req.headers['x-id'])
      .then((r) => {
        res.set({ 'X-RateLimit-Limit': limiter.points, 'X-RateLimit-Remaining': r.remainingPoints });
        next();
      })
      .catch((r) => {
        if (!(r instanceof RateLimiterRes)) return res.status(503).send('limiter unavailable');
        res.set({ 'Retry-After': Math.ceil(r.msBeforeNext / 1000), 'X-RateLimit-Limit': limiter.points, 'X-RateLimit-Remaining': r.remainingPoints });
        return res.status(429).send('Too Many Requests');
      });
  });
  a.get('/', (req, res) => res.send('ok'));
  const srv = await listen(http.createServer(a));
  return {
    ...srv,
    hit: async (id) => {
      const res = await fetch(srv.base, { headers: { 'x-id': id } });
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
  };
}

describe('rate-limiter-flexible', () => {
  it('the limit holds exactly; consume\'s RateLimiterRes and the app\'s 429 come from the module\'s reply', async () => {
    const time = steppedTime(T);
    const limiter = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 3, duration: 10, keyPrefix: 'api', algorithm: 'slidelog', clock: time.clock });
    const srv = await app(limiter);
    const id = freshId();
    try {
      const seen = [];
      for (const ms of [0, 1000, 2000, 3000]) {
        await time.at(ms);
        const r = await srv.hit(id);
        seen.push([r.status, r.headers['x-ratelimit-remaining'], r.headers['retry-after']]);
      }
      assert.deepEqual(seen, [[200, '2', undefined], [200, '1', undefined], [200, '0', undefined], [429, '0', '7']]);
      const denied = await settle(limiter.consume(id));
      assert.ok(denied.res instanceof RateLimiterRes);
      assert.deepEqual([denied.ok, denied.res.remainingPoints, denied.res.msBeforeNext, denied.res.consumedPoints], [false, 0, 7000, 4]);
      await time.at(10_001);
      assert.equal((await srv.hit(id)).status, 200);
      assert.equal((await srv.hit(id)).status, 429);
      // The key is the library's keyPrefix:key, with the key as the cluster hash tag.
      assert.equal(await raw(shared.conn.client, 'ZCARD', `api:{${id}}`), 3);
    } finally {
      await srv.close();
    }
  });

  it('get, reward, penalty and delete', async () => {
    const limiter = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 5, duration: 60, keyPrefix: 'ops', clock: () => T });
    const id = freshId();
    assert.equal(await limiter.get(id), null);
    await limiter.consume(id, 2);
    assert.deepEqual([(await limiter.get(id)).consumedPoints, (await limiter.get(id)).remainingPoints], [2, 3]);
    assert.equal((await limiter.reward(id, 1)).consumedPoints, 1);
    // A penalty past the limit reports the count as RateLimiterRedis does (1 + 10); the
    // module spends what is left, so the key is then exhausted.
    assert.equal((await limiter.penalty(id, 10)).consumedPoints, 11);
    assert.equal((await limiter.get(id)).remainingPoints, 0);
    assert.equal((await settle(limiter.consume(id))).ok, false);
    assert.equal(await limiter.delete(id), true);
    assert.equal(await limiter.delete(id), false);
    assert.equal((await limiter.consume(id)).remainingPoints, 4);
  });

  it('inside RateLimiterUnion, BurstyRateLimiter and RLWrapperBlackAndWhite', async () => {
    const time = steppedTime(T);
    const perSecond = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 2, duration: 1, keyPrefix: 'sec', clock: time.clock });
    const perMinute = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 3, duration: 60, keyPrefix: 'min', clock: time.clock });
    const id = freshId();

    const union = new RateLimiterUnion(perSecond, perMinute);
    const u1 = await union.consume(id);
    assert.deepEqual([u1.sec.remainingPoints, u1.min.remainingPoints], [1, 2]);
    await union.consume(id);
    const u3 = await settle(union.consume(id));
    assert.deepEqual([u3.ok, Object.keys(u3.res)], [false, ['sec']]);

    const burst = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 10, keyPrefix: 'burst', clock: time.clock });
    const bursty = new BurstyRateLimiter(new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 1, keyPrefix: 'base', clock: time.clock }), burst);
    const b = [];
    for (let i = 0; i < 3; i++) b.push((await settle(bursty.consume(id))).ok);
    assert.deepEqual(b, [true, true, false]);

    const wrapped = new RLWrapperBlackAndWhite({ limiter: perMinute, whiteList: ['friend'], blackList: ['foe'] });
    assert.equal((await settle(wrapped.consume('friend'))).ok, true);
    assert.equal((await settle(wrapped.consume('foe'))).ok, false);
    const w = await settle(wrapped.consume(freshId()));
    assert.deepEqual([w.ok, w.res.remainingPoints], [true, 2]);
  });

  it('RateLimiterUnionRl: the limiters are one RL.ALL, where RateLimiterUnion spends the ones that admitted', async () => {
    const make = (prefix) => [
      new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 10, duration: 1, keyPrefix: `${prefix}-sec`, clock: () => T }),
      new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 2, duration: 60, keyPrefix: `${prefix}-min`, clock: () => T }),
    ];
    const id = freshId();
    const [libSec, libMin] = make('lib');
    const [ourSec, ourMin] = make('ours');
    const lib = new RateLimiterUnion(libSec, libMin);
    const ours = new RateLimiterUnionRl(ourSec, ourMin);
    for (let i = 0; i < 5; i++) {
      await settle(lib.consume(id));
      await settle(ours.consume(id));
    }
    // Three denials each: the library's union still spent its per-second budget on them.
    assert.equal((await libSec.get(id)).consumedPoints, 5);
    assert.equal((await ourSec.get(id)).consumedPoints, 2);
    const denied = await settle(ours.consume(id));
    assert.deepEqual([denied.ok, Object.keys(denied.res), denied.res['ours-min'].msBeforeNext > 0], [false, ['ours-min'], true]);
  });

  it('refused when built: a custom script that is not text or with shadow, node-redis 3, a failure option, metrics, a bad duration', () => {
    for (const [opt, message] of [
      [{ customIncrTtlLuaScript: 42 }, /text of a Lua script/], [{ customIncrTtlLuaScript: 'return 1', shadow: true }, /no shadow mode/],
      [{ useRedis3AndLowerPackage: true }, /node-redis 3/],
      [{ failure: 'open' }, /insuranceLimiter/], [{ metrics: true }, /records no metrics/], [{ duration: -1 }, /duration must be/],
    ]) {
      assert.throws(() => new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 5, duration: 1, ...opt }), message);
    }
  });

  // The library's wiki script: each time the count passes another multiple of points,
  // the window grows by one duration (a ban that doubles, triples, ...).
  const MULTIPLY_DELAY = `local ok = redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
else
  local maxPoints = tonumber(ARGV[3])
  if maxPoints > 0 and (consumed-1) % maxPoints == 0 and not ok then
    local expireTime = ttl + tonumber(ARGV[4]) * 1000
    redis.call('pexpire', KEYS[1], expireTime)
    return {consumed, expireTime}
  end
end
return {consumed, ttl}`;

  for (const [clientName, connect] of Object.entries(standalone)) {
    it(`customIncrTtlLuaScript (${clientName}): the app's script decides, exactly as RateLimiterRedis with it, on its key`, async () => {
      const conn = await connect(shared.redis.port);
      try {
        const common = { storeClient: conn.client, points: 2, duration: 5, customIncrTtlLuaScript: MULTIPLY_DELAY, useRedisPackage: clientName === 'node-redis' };
        const stock = new RateLimiterRedis({ ...common, keyPrefix: `cs-stock-${clientName}` });
        const ours = new RateLimiterRedisRl({ ...common, timeout: SLOW_OK, keyPrefix: `cs-ours-${clientName}` });
        const id = freshId();
        const seen = async (limiter) => {
          const out = [];
          for (let i = 0; i < 5; i += 1) {
            const r = await settle(limiter.consume(id));
            // Whole seconds: the two keys' TTLs are read a few ms apart.
            out.push([r.ok, r.res.consumedPoints, r.res.remainingPoints, r.res.isFirstInDuration, Math.ceil(r.res.msBeforeNext / 1000)]);
          }
          return out;
        };
        const mine = await seen(ours);
        assert.deepEqual(mine, await seen(stock));
        // The script's own numbers: the third and fifth hits each add a duration.
        assert.deepEqual(mine.map((r) => r[4]), [5, 5, 10, 10, 15]);
        // RateLimiterRedis's layout: the count at getKey(key), nothing the module wrote.
        assert.equal(await raw(conn.client, 'GET', `cs-ours-${clientName}:${id}`), '5');
        assert.equal((await ours.get(id)).consumedPoints, 5);
        assert.equal(await ours.delete(id), true);
        assert.equal(await ours.get(id), null);
        assert.equal((await ours.consume(id)).consumedPoints, 1);
      } finally {
        await conn.close();
      }
    });
  }

  it('customIncrTtlLuaScript: blockDuration, a reply that is not {consumed, ttl} (to the caller), the insuranceLimiter (Redis down), no RateLimiterUnionRl', async () => {
    const insurance = new RateLimiterMemory({ points: 100, duration: 60 });
    const blocking = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 5, blockDuration: 60, keyPrefix: 'cs-blk', customIncrTtlLuaScript: MULTIPLY_DELAY, insuranceLimiter: insurance });
    const id = freshId();
    await blocking.consume(id);
    const denied = await settle(blocking.consume(id));
    assert.deepEqual([denied.ok, denied.res.consumedPoints], [false, 2]);
    // The library's block, written on the script's key as RateLimiterRedis writes it.
    assert.ok(Number(await raw(shared.conn.client, 'PTTL', `cs-blk:${id}`)) > 55000);
    assert.ok((await settle(blocking.consume(id))).res.msBeforeNext > 55000);

    const wrong = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 5, keyPrefix: 'cs-bad', customIncrTtlLuaScript: 'return 1', insuranceLimiter: insurance });
    const bad = await settle(wrong.consume(id));
    assert.equal(bad.ok, false);
    assert.match(bad.res.message, /must return \{consumed, ttl_ms\}, got 1/);
    assert.equal(await insurance.get(id), null);

    const { default: Redis } = await import('ioredis');
    const { ioredisOptions } = await import('redis-rl');
    const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
    dead.on('error', () => {});
    try {
      const insured = new RateLimiterRedisRl({ storeClient: dead, points: 5, duration: 5, customIncrTtlLuaScript: MULTIPLY_DELAY, insuranceLimiter: new RateLimiterMemory({ points: 1, duration: 10 }) });
      const [a, b] = [await settle(insured.consume('x')), await settle(insured.consume('x'))];
      assert.deepEqual([a.ok, b.ok, b.res instanceof RateLimiterRes], [true, false, true]);
    } finally {
      dead.disconnect();
    }
    assert.throws(() => new RateLimiterUnionRl(blocking), /no customIncrTtlLuaScript/);
  });

  it("points as the library takes them: '5' spends 5, '1.5' and 1.1 are refused before Redis, never sent to the insuranceLimiter", async () => {
    const insurance = new RateLimiterMemory({ points: 100, duration: 60 });
    const rl = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 3, duration: 60, keyPrefix: 'pts', insuranceLimiter: insurance });
    const id = freshId();
    const denied = await settle(rl.consume(id, '5'));
    assert.equal(denied.ok, false);
    assert.equal(denied.res.consumedPoints, 5);
    // A cost that can never fit: the honest wait is the window, not 0.
    assert.equal(denied.res.msBeforeNext, 60000);
    assert.equal((await rl.consume(id, '2')).consumedPoints, 2);
    for (const bad of ['1.5', 1.1, 'x']) {
      const r = await settle(rl.consume(id, bad));
      assert.equal(r.ok, false);
      assert.match(r.res.message, /not supported by this package/);
    }
    assert.equal(await insurance.get(id), null);
    // The atomic union takes the same points: '2' is 2 on every limiter, '1.5' is refused.
    const union = new RateLimiterUnionRl(
      new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 3, duration: 60, keyPrefix: 'u-a' }),
      new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 5, duration: 60, keyPrefix: 'u-b' }),
    );
    const both = await union.consume(id, '2');
    assert.deepEqual([both['u-a'].remainingPoints, both['u-b'].remainingPoints], [1, 3]);
    await assert.rejects(union.consume(id, '1.5'), /not supported by this package/);
  });

  it('blockDuration and block(): denied until the block ends, then the module decides again', async (t) => {
    const skip = await noBlock();
    if (skip) return t.skip(skip);
    const insurance = new RateLimiterMemory({ points: 1, duration: 60 });
    const rl = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 60, blockDuration: 120, keyPrefix: 'blk', insuranceLimiter: insurance });
    // The library copies blockDuration into the insurance limiter, so an outage blocks alike.
    assert.equal(insurance.blockDuration, 120);
    const id = freshId();
    await rl.consume(id);
    const first = await settle(rl.consume(id));
    assert.equal(first.ok, false);
    assert.equal(first.res.msBeforeNext, 120000);
    const again = await settle(rl.consume(id));
    assert.ok(again.res.msBeforeNext > 60000, `still blocked: ${again.res.msBeforeNext}`);
    // The module's own block (BLOCK), not the emulation key.
    assert.equal(await raw(shared.conn.client, 'EXISTS', `blk:{${id}}:block`), 1);
    assert.equal(await raw(shared.conn.client, 'EXISTS', `blk:{${id}}:set`), 0);
    assert.equal(await rl.delete(id), true);
    assert.equal((await rl.consume(id)).remainingPoints, 0);
    const other = freshId();
    await rl.block(other, 30);
    const blocked = await settle(rl.consume(other));
    assert.equal(blocked.ok, false);
    assert.ok(blocked.res.msBeforeNext > 29000 && blocked.res.msBeforeNext <= 30000);
    assert.equal((await rl.get(other)).consumedPoints, 3);
  });

  it('inMemoryBlockOnConsumed: blocked in the process without asking Redis; deleteInMemoryBlockedAll (the library\'s) lifts every such block', async () => {
    const rl = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 2, duration: 60, keyPrefix: 'mem', algorithm: 'slidelog', clock: () => T, inMemoryBlockOnConsumed: 3, inMemoryBlockDuration: 30 });
    const ids = [freshId(), freshId()];
    for (const id of ids) {
      await rl.consume(id);
      await rl.consume(id);
      // The denial reaches 3 consumed: the library blocks the key in memory for 30 s.
      const denied = (await settle(rl.consume(id))).res;
      assert.deepEqual([denied.consumedPoints, denied.msBeforeNext], [3, 30_000]);
      // Refused from memory: the library's RateLimiterRes(0, ms), Redis not asked.
      const inMemory = (await settle(rl.consume(id))).res;
      assert.equal(inMemory.consumedPoints, 0);
      assert.ok(inMemory.msBeforeNext <= 30_000 && inMemory.msBeforeNext > 29_000, `the in-memory block: ${inMemory.msBeforeNext}`);
    }
    rl.deleteInMemoryBlockedAll();
    // Both keys are asked of the module again (consumed 3: its log still holds two hits),
    // and its denial blocks them in memory anew.
    for (const id of ids) {
      const again = (await settle(rl.consume(id))).res;
      assert.deepEqual([again.consumedPoints, again.msBeforeNext], [3, 30_000]);
    }
  });

  it('algorithm counter counts as RateLimiterRedis: denied consumes too, in consumedPoints, get() and inMemoryBlockOnConsumed; RateLimiterUnionRl spends nothing on a denial', async () => {
    // RL.COUNTER's window is the key's on the server clock: no clock here.
    const opts = { storeClient: shared.conn.client, timeout: SLOW_OK, points: 2, duration: 60, algorithm: 'counter' };
    const ours = new RateLimiterRedisRl({ ...opts, keyPrefix: 'count-ours' });
    const stock = new RateLimiterRedis({ ...opts, keyPrefix: 'count-stock' });
    const id = freshId();
    const seen = { ours: [], stock: [] };
    for (const [name, limiter] of [['ours', ours], ['stock', stock]]) {
      for (let i = 0; i < 4; i++) {
        const r = await settle(limiter.consume(id));
        seen[name].push([r.ok, r.res.consumedPoints, r.res.remainingPoints]);
      }
      seen[name].push((await limiter.get(id)).consumedPoints);
    }
    assert.deepEqual(seen.ours, [[true, 1, 1], [true, 2, 0], [false, 3, 0], [false, 4, 0], 4]);
    assert.deepEqual(seen.ours, seen.stock);
    // The library's in-memory block past points + cost is reached, as on the stock store.
    const mem = new RateLimiterRedisRl({ ...opts, keyPrefix: 'count-mem', inMemoryBlockOnConsumed: 4, inMemoryBlockDuration: 30 });
    for (let i = 0; i < 4; i++) await settle(mem.consume(id));
    // Refused from memory: the library's RateLimiterRes(0, ms), Redis not asked.
    assert.equal((await settle(mem.consume(id))).res.consumedPoints, 0);
    // All or nothing: a union one limiter denies spends on neither.
    const a = new RateLimiterRedisRl({ ...opts, points: 1, keyPrefix: 'count-a' });
    const b = new RateLimiterRedisRl({ ...opts, points: 5, keyPrefix: 'count-b' });
    const union = new RateLimiterUnionRl(a, b);
    await union.consume(id);
    await settle(union.consume(id));
    assert.deepEqual([(await a.get(id)).consumedPoints, (await b.get(id)).consumedPoints], [1, 1]);
    // While set() holds the key's state, the counter is not spent, by a denied call either.
    const held = new RateLimiterRedisRl({ ...opts, points: 1, keyPrefix: 'count-set' });
    await held.consume(id);
    await held.set(id, 0, 60);
    await held.consume(id);
    await shared.conn.client.del(`count-set:{${id}}:set`);
    assert.equal((await held.get(id)).consumedPoints, 1);
  });

  it('the boundary burst: RateLimiterRedis admits 16, the module\'s sliding windows about half', async (t) => {
    const consuming = (limiter) => ({ admit: async (id) => (await settle(limiter.consume(id))).ok });
    const results = await burstResults({
      freshId,
      start: T,
      stock: async () => consuming(new RateLimiterRedis({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 8, duration: BURST_WINDOW_MS / 1000, keyPrefix: 'stock-rlf' })),
      ours: async (algorithm, clock) => consuming(new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 8, duration: BURST_WINDOW_MS / 1000, keyPrefix: `ours-${algorithm}`, algorithm, clock })),
      counter: true,
    });
    t.diagnostic(`boundary burst, admitted of 16: ${JSON.stringify(results)}`);
    // counter is RateLimiterRedis's own window (from the first hit): the stock burst, on purpose.
    assert.deepEqual(results, { stock: 16, slidecount: 9, slidelog: 9, gcra: 11, fixed: 16, counter: 16 });
  });

  it('shadow: a would-be denial resolves, is reported and counted; the result shows the real state', async () => {
    const reported = [];
    const limiter = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 2, duration: 10, keyPrefix: 'shadow', shadow: true, clock: () => T, onShadow: (d, info) => reported.push(info.keys) });
    const id = freshId();
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const r = await settle(limiter.consume(id));
      seen.push([r.ok, r.res.remainingPoints, r.res.consumedPoints]);
    }
    assert.deepEqual(seen, [[true, 1, 1], [true, 0, 2], [true, 0, 2], [true, 0, 2]]);
    assert.equal(limiter.shadowDenials, 2);
    assert.deepEqual(reported, [[`shadow:{${id}}`], [`shadow:{${id}}`]]);

    // The atomic union: shadowed as a whole (its first limiter's setting), nothing spent.
    const first = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 1, duration: 10, keyPrefix: 'shadow-a', shadow: true, clock: () => T, onShadow: (d, info) => reported.push(info.keys) });
    const second = new RateLimiterRedisRl({ storeClient: shared.conn.client, timeout: SLOW_OK, points: 5, duration: 10, keyPrefix: 'shadow-b', clock: () => T });
    const union = new RateLimiterUnionRl(first, second);
    const u = [await settle(union.consume(id)), await settle(union.consume(id))];
    assert.deepEqual(u.map((r) => [r.ok, r.res['shadow-a'].remainingPoints]), [[true, 0], [true, 0]]);
    assert.equal(first.shadowDenials, 1);
    assert.equal((await second.get(id)).consumedPoints, 1);
  });

  it('a dead Redis: insuranceLimiter decides when set, else the promise rejects with the error; reported, fast', async () => {
    const { default: Redis } = await import('ioredis');
    const { ioredisOptions } = await import('redis-rl');
    const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
    dead.on('error', () => {});
    const reported = [];
    try {
      const insured = new RateLimiterRedisRl({
        storeClient: dead, points: 2, duration: 10, onError: (err, info) => reported.push(info.command),
        insuranceLimiter: new RateLimiterMemory({ points: 1, duration: 10 }),
      });
      const started = performance.now();
      const [a, b] = [await settle(insured.consume('x')), await settle(insured.consume('x'))];
      assert.ok(performance.now() - started < 1500);
      // The insurance limiter's own budget (1), not ours (2).
      assert.deepEqual([a.ok, b.ok, b.res instanceof RateLimiterRes], [true, false, true]);

      const bare = new RateLimiterRedisRl({ storeClient: dead, points: 2, duration: 10, onError: (err, info) => reported.push(info.command) });
      const c = await settle(bare.consume('x'));
      assert.deepEqual([c.ok, c.res instanceof Error], [false, true]);
      const srv = await app(bare);
      try {
        assert.equal((await srv.hit('x')).status, 503);
      } finally {
        await srv.close();
      }
      // The atomic union falls back to a union of the insurance limiters.
      const union = new RateLimiterUnionRl(
        new RateLimiterRedisRl({ storeClient: dead, points: 5, duration: 1, keyPrefix: 's', insuranceLimiter: new RateLimiterMemory({ keyPrefix: 's', points: 1, duration: 1 }) }),
        new RateLimiterRedisRl({ storeClient: dead, points: 5, duration: 60, keyPrefix: 'm', insuranceLimiter: new RateLimiterMemory({ keyPrefix: 'm', points: 5, duration: 60 }) }),
      );
      const [u1, u2] = [await settle(union.consume('y')), await settle(union.consume('y'))];
      assert.deepEqual([u1.ok, Object.keys(u1.res).sort(), u2.ok, Object.keys(u2.res)], [true, ['m', 's'], false, ['s']]);
      assert.equal(reported.length, 4);
    } finally {
      dead.disconnect();
    }
  });

  it('a restart under traffic loses nothing and needs no script (no NOSCRIPT)', async () => {
    const server = await startServer({ persist: true });
    const c = await ioredisClient(server.port);
    const errors = [];
    const limiter = new RateLimiterRedisRl({ storeClient: c.client, timeout: SLOW_OK, points: 12, duration: 60, clock: () => T, onError: (err) => errors.push(err.message) });
    try {
      const counts = await restartUnderTraffic(server, async () => {
        const r = await settle(limiter.consume('steady'));
        if (r.ok) return 'admitted';
        return r.res instanceof RateLimiterRes ? 'denied' : 'failure';
      });
      assertNothingLost(counts, errors, 12);
    } finally {
      await c.close();
      await server.stop();
    }
  });
});
