// redis-rl/nestjs inside a real NestJS app (a small module with ThrottlerModule and the
// global ThrottlerGuard, over HTTP), next to @nest-lab/throttler-storage-redis, the
// Redis storage Nest's docs point to, on the same server.
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { Registry } from 'prom-client';
import { RedisRlThrottlerStorage, redisRlThrottlerGuard } from 'redis-rl/nestjs';
import { ioredisClient, raw } from './support/clients.js';
import { decisionsOf } from './support/metrics.js';
import { assertNothingLost, sharedServer, SLOW_OK, BURST_WINDOW_MS, restartUnderTraffic, steppedTime, burstResults, admitting } from './support/adapters.js';
import { freePort, noBlock, startServer } from './support/servers.js';

const T = 1718609340000;

const shared = sharedServer();
const freshId = shared.freshId;

// The app, written as the Nest docs write it, with the decorators applied by hand
// (plain JavaScript has no decorator syntax).
async function app(throttlers, storage, guard = ThrottlerGuard) {
  class AppController {
    hello() {
      return 'ok';
    }
  }
  Controller()(AppController);
  Get()(AppController.prototype, 'hello', Object.getOwnPropertyDescriptor(AppController.prototype, 'hello'));
  class AppModule {}
  Module({
    imports: [ThrottlerModule.forRoot({ throttlers, storage, getTracker: (req) => req.headers['x-id'] })],
    controllers: [AppController],
    providers: [{ provide: APP_GUARD, useClass: guard }],
  })(AppModule);
  const nest = await NestFactory.create(AppModule, { logger: false });
  await nest.listen(0, '127.0.0.1');
  const base = await nest.getUrl();
  return {
    hit: async (id) => {
      const res = await fetch(base, { headers: { 'x-id': id } });
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
    close: () => nest.close(),
  };
}

describe('@nestjs/throttler 6', () => {
  it('the limit holds exactly; X-RateLimit-*, Retry-After and the 429 come from the module\'s reply', async () => {
    const time = steppedTime(T);
    const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', algorithm: 'slidelog', clock: time.clock });
    const srv = await app([{ ttl: 10_000, limit: 3 }], storage);
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
        // No blockDuration is the guard's blockDuration = ttl: blocked 10 s from the
        // denial, as the stock storages do, not the 7 s until the first hit leaves the log.
        [429, undefined, undefined, undefined, '10'],
      ]);
      assert.deepEqual(JSON.parse((await srv.hit(id)).body), { statusCode: 429, message: 'ThrottlerException: Too Many Requests' });
      await time.at(10_001);
      assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).headers['retry-after']], [429, '3']);
      // The block cleared the log: a full budget again at its end.
      await time.at(13_000);
      assert.deepEqual([(await srv.hit(id)).status, (await srv.hit(id)).status, (await srv.hit(id)).status, (await srv.hit(id)).status], [200, 200, 200, 429]);
    } finally {
      await srv.close();
    }
  });

  it('named throttlers: each one limits, with its own suffixed headers', async () => {
    const time = steppedTime(T);
    const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', algorithm: 'slidelog', clock: time.clock });
    const srv = await app([{ name: 'short', ttl: 1000, limit: 2 }, { name: 'long', ttl: 60_000, limit: 3 }], storage);
    const id = freshId();
    try {
      const a = await srv.hit(id);
      assert.deepEqual([a.status, a.headers['x-ratelimit-remaining-short'], a.headers['x-ratelimit-remaining-long']], [200, '1', '2']);
      assert.equal((await srv.hit(id)).status, 200);
      const c = await srv.hit(id);
      assert.deepEqual([c.status, c.headers['retry-after-short']], [429, '1']);
      await time.at(2000);
      assert.equal((await srv.hit(id)).status, 200);
      const e = await srv.hit(id);
      assert.equal(e.status, 429);
      assert.ok(Number(e.headers['retry-after-long']) > 50);
    } finally {
      await srv.close();
    }
  });

  it('RedisRlThrottlerGuard: the throttlers are one RL.ALL; the stock guard spends on the ones before a denial', async () => {
    const throttlers = [{ name: 'wide', ttl: 60_000, limit: 10 }, { name: 'narrow', ttl: 60_000, limit: 2 }];
    const counts = {};
    for (const [name, guard] of [['stock guard', ThrottlerGuard], ['RedisRlThrottlerGuard', redisRlThrottlerGuard()]]) {
      const prefix = `rl:nest-${name.length}:`;
      const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', algorithm: 'slidelog', prefix, clock: () => T });
      const srv = await app(throttlers, storage, guard);
      try {
        const seen = [];
        for (let i = 0; i < 5; i++) {
          const r = await srv.hit('all-or-nothing');
          seen.push([r.status, r.headers['x-ratelimit-remaining-wide'] ?? null, r.headers['retry-after-narrow'] ?? null]);
        }
        assert.deepEqual(seen.slice(0, 2), [[200, '9', null], [200, '8', null]], name);
        assert.deepEqual(seen.slice(2).map((x) => x[0]), [429, 429, 429], name);
        const [, keys] = await raw(shared.conn.client, 'SCAN', '0', 'MATCH', `${prefix}*`, 'COUNT', '1000');
        const logs = keys.filter((k) => !k.endsWith(':block'));
        counts[name] = [(await Promise.all(logs.map((k) => raw(shared.conn.client, 'ZCARD', k)))).sort(), keys.length - logs.length];
      } finally {
        await srv.close();
      }
    }
    // Three denied requests: the stock guard's loop had already spent 'wide' on them.
    // 'narrow' denied, so it is blocked (its default blockDuration, the ttl), its log cleared.
    assert.deepEqual(counts, { 'stock guard': [[5], 1], RedisRlThrottlerGuard: [[2], 1] });
  });

  it('blockDuration other than the ttl: after a denial the tracker is blocked that long, as the stock storage does (429 with its Retry-After, then 200)', async (t) => {
    const skip = await noBlock();
    if (skip) return t.skip(skip);
    const time = steppedTime(T);
    const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', clock: time.clock, algorithm: 'slidelog' });
    const srv = await app([{ ttl: 10_000, limit: 2, blockDuration: 30_000 }], storage);
    const id = freshId();
    try {
      const seen = [];
      for (const ms of [0, 0, 0, 11_000, 29_999, 30_001, 30_002, 30_003]) {
        await time.at(ms);
        const r = await srv.hit(id);
        seen.push([ms, r.status, r.headers['retry-after']]);
      }
      assert.deepEqual(seen, [
        [0, 200, undefined],
        [0, 200, undefined],
        // The denial starts a 30 s block: Retry-After is the block, not the window's 10 s.
        [0, 429, '30'],
        // The window has slid past both hits, but the block holds.
        [11_000, 429, '19'],
        [29_999, 429, '1'],
        // A blocked request spent nothing: after the block the window is empty again.
        [30_001, 200, undefined],
        [30_002, 200, undefined],
        [30_003, 429, '30'],
      ]);
    } finally {
      await srv.close();
    }
    // With RedisRlThrottlerGuard (RL.ALL), a blocked throttler answers before the module is asked.
    const time2 = steppedTime(T);
    const storage2 = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', clock: time2.clock });
    const srv2 = await app([{ name: 'short', ttl: 10_000, limit: 1, blockDuration: 20_000 }, { name: 'long', ttl: 60_000, limit: 100 }], storage2, redisRlThrottlerGuard());
    const id2 = freshId();
    try {
      await time2.at(0);
      assert.deepEqual([(await srv2.hit(id2)).status, (await srv2.hit(id2)).status], [200, 429]);
      await time2.at(15_000);
      const blocked = await srv2.hit(id2);
      assert.deepEqual([blocked.status, blocked.headers['retry-after-short']], [429, '5']);
      await time2.at(20_001);
      assert.equal((await srv2.hit(id2)).status, 200);
    } finally {
      await srv2.close();
    }
  });

  it('refused when built, or when the throttler is first used, with the option\'s name', async () => {
    const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed' });
    await assert.rejects(storage.increment('k', 1000, 2, -5, 'default'), /blockDuration must be a positive number of milliseconds/);
    assert.throws(() => new RedisRlThrottlerStorage({ client: shared.conn.client }), /choose a failure policy/);
  });

  it('the boundary burst: the stock Redis storage admits 16, the module\'s sliding windows about half', async (t) => {
    const results = await burstResults({
      freshId,
      start: T,
      stock: async () => admitting(await app([{ ttl: BURST_WINDOW_MS, limit: 8 }], new ThrottlerStorageRedisService(shared.conn.client))),
      ours: async (algorithm, clock) => admitting(await app([{ ttl: BURST_WINDOW_MS, limit: 8 }], new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', algorithm, clock }))),
    });
    t.diagnostic(`boundary burst, admitted of 16: ${JSON.stringify(results)}`);
    assert.deepEqual(results, { stock: 16, slidecount: 9, slidelog: 9, gcra: 11, fixed: 16 });
  });

  for (const [name, guard] of [['ThrottlerGuard', ThrottlerGuard], ['RedisRlThrottlerGuard', redisRlThrottlerGuard()]]) {
    it(`shadow (${name}): a would-be denial passes, is reported and counted; the headers show the real state`, async () => {
      const reported = [];
      const storage = new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', shadow: true, clock: () => T, onShadow: () => reported.push(1) });
      const srv = await app([{ ttl: 10_000, limit: 2 }], storage, guard);
      const id = freshId();
      try {
        const seen = [];
        for (let i = 0; i < 4; i++) {
          const r = await srv.hit(id);
          seen.push([r.status, r.headers['x-ratelimit-remaining']]);
        }
        assert.deepEqual(seen, [[200, '1'], [200, '0'], [200, '0'], [200, '0']]);
        assert.equal(storage.shadowDenials, 2);
        assert.equal(reported.length, 2);
      } finally {
        await srv.close();
      }
    });
  }

  for (const [name, guard] of [['ThrottlerGuard', ThrottlerGuard], ['RedisRlThrottlerGuard', redisRlThrottlerGuard()]]) {
    it(`metrics (${name}): allowed, denied, shadow_denied, failure_open, failure_closed by throttler name`, async () => {
      const registry = new Registry();
      const storage = (options) => new RedisRlThrottlerStorage({ client: shared.conn.client, timeout: SLOW_OK, failure: 'closed', clock: () => T, metrics: registry, ...options });
      const { default: Redis } = await import('ioredis');
      const { ioredisOptions } = await import('redis-rl');
      const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
      dead.on('error', () => {});
      const throttlers = (limit) => [{ name: 'short', ttl: 10_000, limit }];
      const apps = [
        await app(throttlers(2), storage(), guard),
        await app(throttlers(1), storage({ shadow: true, onShadow: () => {} }), guard),
        await app(throttlers(2), storage({ client: dead, failure: 'open', onError: () => {} }), guard),
        await app(throttlers(2), storage({ client: dead, failure: 'closed', onError: () => {} }), guard),
      ];
      try {
        const [enforced, shadow, open, closed] = apps;
        // Each app its own identity: the storages share the key prefix.
        const [e, s] = [freshId(), freshId()];
        const statuses = [];
        for (const [a, id] of [[enforced, e], [enforced, e], [enforced, e], [shadow, s], [shadow, s], [open, e], [closed, e]]) statuses.push((await a.hit(id)).status);
        assert.deepEqual(statuses, [200, 200, 429, 200, 200, 200, 503]);
        assert.deepEqual(await decisionsOf(registry, 'short'), {
          outcomes: { allowed: 3, denied: 1, shadow_denied: 1, failure_open: 1, failure_closed: 1 },
          timed: 7,
        });
      } finally {
        for (const a of apps) await a.close();
        dead.disconnect();
      }
    });
  }

  it('a dead Redis: failure open admits, closed answers 503; every failure reported, fast', async () => {
    const { default: Redis } = await import('ioredis');
    const { ioredisOptions } = await import('redis-rl');
    const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
    dead.on('error', () => {});
    const reported = [];
    try {
      for (const guard of [ThrottlerGuard, redisRlThrottlerGuard()]) {
        for (const failure of ['open', 'closed']) {
          const srv = await app([{ ttl: 10_000, limit: 2 }], new RedisRlThrottlerStorage({ client: dead, failure, onError: (err, info) => reported.push(info.failure) }), guard);
          try {
            const started = performance.now();
            const r = await srv.hit('someone');
            assert.ok(performance.now() - started < 1500);
            assert.equal(r.status, failure === 'open' ? 200 : 503);
            if (failure === 'closed') assert.equal(r.headers['x-ratelimit-limit'], undefined);
          } finally {
            await srv.close();
          }
        }
      }
      assert.deepEqual(reported, ['open', 'closed', 'open', 'closed']);
    } finally {
      dead.disconnect();
    }
  });

  it('a restart under traffic loses nothing and needs no script (no NOSCRIPT)', async () => {
    const server = await startServer({ persist: true });
    const c = await ioredisClient(server.port);
    const errors = [];
    const storage = new RedisRlThrottlerStorage({ client: c.client, timeout: SLOW_OK, failure: 'open', clock: () => T, onError: (err) => errors.push(err.message) });
    const srv = await app([{ ttl: 60_000, limit: 12 }], storage);
    try {
      const counts = await restartUnderTraffic(server, async () => {
        const r = await srv.hit('steady');
        if (r.status === 429) return 'denied';
        // Fail open: admitted with the full budget shown.
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
