// Every framework adapter on a real 3-node cluster, through node-redis and ioredis:
// each request's keys share a hash tag and reach the right node first time (MOVED
// counted on the servers).
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import rateLimit from 'express-rate-limit';
import Fastify from 'fastify';
import fastifyRateLimit from '@fastify/rate-limit';
import { RedisRlStore } from 'redis-rl/express-rate-limit';
import { redisRlStore } from 'redis-rl/fastify';
import { RedisRlThrottlerStorage } from 'redis-rl/nestjs';
import { RateLimiterRedisRl, RateLimiterUnionRl } from 'redis-rl/rate-limiter-flexible';
import { clusters } from './support/clients.js';
import { listen, SLOW_OK } from './support/adapters.js';
import calculateSlot from 'cluster-key-slot';
import { features, movedCount, NO_ALL, rawCommand, startCluster } from './support/servers.js';

const T = 1718609340000;
const ids = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

let cluster;
let feats;
before(async () => {
  cluster = await startCluster();
  feats = await features(cluster.nodes[0].port);
});
after(() => cluster?.stop());

for (const [lib, connect] of Object.entries(clusters)) {
  describe(`adapters on a cluster through ${lib}`, () => {
    let conn;
    const errors = [];
    const onError = (err, info) => errors.push(`${info.command}: ${err.message}`);
    before(async () => {
      conn = await connect(cluster.nodes.map((n) => n.port));
    });
    after(() => conn?.close());

    const zeroMoved = async (run) => {
      errors.length = 0;
      const start = await movedCount(cluster.nodes);
      await run();
      assert.deepEqual(errors, []);
      assert.equal(await movedCount(cluster.nodes) - start, 0);
    };

    it('express-rate-limit: 30 identities, each decided, zero MOVED', () => zeroMoved(async () => {
      const a = express();
      a.use(rateLimit({ windowMs: 60_000, limit: 1, validate: false, keyGenerator: (req) => req.headers['x-id'], store: new RedisRlStore({ client: conn.client, timeout: SLOW_OK, clock: () => T, onError }) }));
      a.get('/', (req, res) => res.send('ok'));
      const srv = await listen(http.createServer(a));
      try {
        for (const id of ids(`erl-${lib}-`, 30)) {
          const statuses = [];
          for (let i = 0; i < 2; i++) statuses.push((await fetch(srv.base, { headers: { 'x-id': id } })).status);
          assert.deepEqual(statuses, [200, 429]);
        }
      } finally {
        await srv.close();
      }
    }));

    it('express-rate-limit: resetAll reaches every primary, and leaves other keys', () => zeroMoved(async () => {
      const prefix = `erl-all-${lib}:`;
      const store = new RedisRlStore({ client: conn.client, timeout: SLOW_OK, clock: () => T, onError, prefix });
      const a = express();
      a.use(rateLimit({ windowMs: 60_000, limit: 1, validate: false, keyGenerator: (req) => req.headers['x-id'], store }));
      a.get('/', (req, res) => res.send('ok'));
      const srv = await listen(http.createServer(a));
      const hit = async (id) => (await fetch(srv.base, { headers: { 'x-id': id } })).status;
      const outside = `outside-{${lib}}`;
      try {
        await conn.client.set(outside, '1');
        const all = ids(`${lib}-`, 30);
        for (const id of all) assert.deepEqual([await hit(id), await hit(id)], [200, 429]);
        // The identities' keys are on every primary (CLUSTER COUNTKEYSINSLOT counts a node's own).
        const holding = new Set();
        for (const n of cluster.nodes) {
          for (const id of all) {
            if (await rawCommand(n.port, `CLUSTER COUNTKEYSINSLOT ${calculateSlot(`${prefix}{${id}}`)}`) !== ':0\r\n') holding.add(n.port);
          }
        }
        assert.equal(holding.size, cluster.nodes.length);
        await store.resetAll();
        for (const id of all) assert.equal(await hit(id), 200, id);
        assert.equal(await conn.client.get(outside), '1');
      } finally {
        await conn.client.del(outside);
        await srv.close();
      }
    }));

    it('@fastify/rate-limit: 30 identities on a route store, each decided, zero MOVED', () => zeroMoved(async () => {
      const f = Fastify();
      await f.register(fastifyRateLimit, { max: 5, timeWindow: 60_000, keyGenerator: (req) => req.headers['x-id'], store: redisRlStore({ client: conn.client, timeout: SLOW_OK, algorithm: 'fixed', clock: () => T, onError }) });
      f.get('/r', { config: { rateLimit: { max: 1, timeWindow: 60_000 } } }, async () => 'ok');
      await f.ready();
      try {
        for (const id of ids(`fastify-${lib}-`, 30)) {
          const statuses = [];
          for (let i = 0; i < 2; i++) statuses.push((await f.inject({ url: '/r', headers: { 'x-id': id } })).statusCode);
          assert.deepEqual(statuses, [200, 429]);
        }
      } finally {
        await f.close();
      }
    }));

    it('@nestjs/throttler storage: 30 keys, as the guard calls it, zero MOVED', () => zeroMoved(async () => {
      const storage = new RedisRlThrottlerStorage({ client: conn.client, timeout: SLOW_OK, failure: 'closed', clock: () => T, onError });
      for (const id of ids(`nest-${lib}-`, 30)) {
        const records = [];
        for (let i = 0; i < 2; i++) records.push((await storage.increment(id, 60_000, 1, 60_000, 'default')).isBlocked);
        assert.deepEqual(records, [false, true]);
        // RedisRlThrottlerGuard's one RL.ALL over two throttlers: one slot, no CROSSSLOT.
        const both = await storage._incrementAll([[`${id}-a`, 60_000, 5, 60_000, 'a'], [`${id}-b`, 1000, 1, 1000, 'b']]);
        assert.deepEqual(both.map((r) => r.isBlocked), [false, false]);
      }
    }));

    it('rate-limiter-flexible: 30 keys, and RateLimiterUnionRl as one RL.ALL, zero MOVED', async (t) => {
      if (!feats.all) return t.skip(NO_ALL);
      return zeroMoved(async () => {
        const opts = { storeClient: conn.client, timeout: SLOW_OK, clock: () => T, onError };
        const perSecond = new RateLimiterRedisRl({ ...opts, points: 5, duration: 1, keyPrefix: `sec-${lib}` });
        const perMinute = new RateLimiterRedisRl({ ...opts, points: 1, duration: 60, keyPrefix: `min-${lib}`, algorithm: 'slidelog' });
        const union = new RateLimiterUnionRl(perSecond, perMinute);
        for (const id of ids(`rlf-${lib}-`, 30)) {
          const first = await union.consume(id);
          assert.equal(first[`min-${lib}`].remainingPoints, 0);
          await assert.rejects(union.consume(id), (res) => Object.keys(res).join() === `min-${lib}`);
          assert.equal((await perSecond.consume(id)).remainingPoints, 3);
        }
      });
    });
  });
}
