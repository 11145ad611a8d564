// The middleware's shadow mode, its concurrency option in a real Express app (handlers
// that finish, throw and hang), and the typed RL.CONCURRENCY / RL.THROTTLE calls.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import { createRateLimiter } from '../index.js';
import { ioredisClient, raw } from './support/clients.js';
import { listen } from './support/adapters.js';
import { freePort, ON_SCRIPTS, rawCommand, startServer } from './support/servers.js';

const T = 1718609340000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const NO_CONCURRENCY = 'the module at RL_MODULE has no RL.CONCURRENCY yet (branch issue-16)';
const NO_THROTTLE = 'the module at RL_MODULE has no RL.THROTTLE yet (branch issue-16)';

let redis;
let conn;
let has;
before(async () => {
  redis = await startServer();
  conn = await ioredisClient(redis.port);
  const unknown = async (line) => (await rawCommand(redis.port, line)).startsWith('-ERR unknown command');
  // The scripts have every command (a bare server knows no RL.* at all).
  has = ON_SCRIPTS ? { concurrency: true, throttle: true }
    : { concurrency: !(await unknown('RL.CONCURRENCY {probe}c 1 1 PEEK')), throttle: !(await unknown('RL.THROTTLE {probe}t 1 1 1 0')) };
});
after(async () => {
  await conn?.close();
  await redis?.stop();
});

describe('shadow mode in the middleware', () => {
  it('a would-be denial passes, is reported and counted; the headers still show the real state', async () => {
    const reported = [];
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T, onShadow: (d, info) => reported.push([d.allowed, info.keys]) });
    const limit = { name: 'new-limit', algorithm: 'fixed', limit: 2, window: 10 };
    const a = express();
    a.get('/', rl.middleware({ limits: limit, identify: () => 'shadowed', shadow: true }), (req, res) => res.send('ok'));
    const srv = await listen(http.createServer(a));
    try {
      const seen = [];
      for (let i = 0; i < 4; i++) {
        const r = await srv.get();
        seen.push([r.status, r.headers.ratelimit, r.headers['retry-after']]);
      }
      assert.deepEqual(seen, [
        [200, '"new-limit";r=1;t=10', undefined],
        [200, '"new-limit";r=0;t=10', undefined],
        [200, '"new-limit";r=0;t=10', undefined],
        [200, '"new-limit";r=0;t=10', undefined],
      ]);
      assert.equal(rl.shadowDenials, 2);
      assert.deepEqual(reported, [[false, ['rl:{shadowed}:new-limit']], [false, ['rl:{shadowed}:new-limit']]]);
      // The real state: the same limit enforced denies now.
      assert.equal((await rl.check(limit, 'shadowed')).allowed, false);
    } finally {
      await srv.close();
    }
  });
});

describe('the middleware\'s concurrency option (RL.CONCURRENCY leases)', () => {
  // An app whose handlers wait for the test to let them finish, throw, or never answer.
  async function app(rl, options) {
    const gates = [];
    const a = express();
    const mw = rl.middleware({ identify: () => options.identity, ...options });
    a.get('/slow', mw, (req, res) => { gates.push(() => res.send('done')); });
    a.get('/throw', mw, () => { throw new Error('handler failed'); });
    a.get('/hang', mw, () => {});
    a.get('/lease', mw, (req, res) => res.send(res.rateLimitLease));
    a.use((err, req, res, next) => res.status(500).send(err.message)); // eslint-disable-line no-unused-vars
    const srv = await listen(http.createServer(a));
    const started = [];
    return {
      ...srv,
      start: (path) => {
        const c = new AbortController();
        const p = fetch(srv.base + path, { signal: c.signal }).then(async (r) => ({ status: r.status, headers: Object.fromEntries(r.headers), body: await r.text() }), () => ({ status: 'aborted' }));
        started.push(c);
        return p;
      },
      waitGates: async (n) => { while (gates.length < n) await new Promise((r) => setTimeout(r, 5)); },
      open: () => gates.shift()(),
      abortAll: () => started.forEach((c) => c.abort()),
    };
  }
  const held = (key) => raw(conn.client, 'ZCARD', key);

  it('at most `limit` in flight; 429 when full; the slot is back once the response is sent', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T });
    const srv = await app(rl, { identity: 'c1', concurrency: { limit: 2, ttl: 30 } });
    try {
      const first = srv.start('/slow');
      const second = srv.start('/slow');
      await srv.waitGates(2);
      assert.equal(await held('rl:{c1}:concurrency'), 2);
      const full = await srv.get('/lease');
      assert.equal(full.status, 429);
      assert.ok(Number(full.headers['retry-after']) >= 1);
      // In flight is no quota per window: no RateLimit item for it.
      assert.deepEqual([full.headers.ratelimit, full.headers['ratelimit-policy']], [undefined, undefined]);
      srv.open();
      assert.equal((await first).status, 200);
      await new Promise((r) => setTimeout(r, 50));
      const lease = await srv.get('/lease');
      assert.equal(lease.status, 200);
      assert.match(lease.body, UUID); // named by the request id the middleware made
      srv.open();
      await second;
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(await held('rl:{c1}:concurrency'), 0);
    } finally {
      srv.abortAll();
      await srv.close();
    }
  });

  it('a handler that throws gives its slot back', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T });
    const srv = await app(rl, { identity: 'c2', concurrency: { limit: 1, ttl: 30 } });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await srv.get('/throw')).status, 500);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(await held('rl:{c2}:concurrency'), 0);
      assert.equal((await srv.get('/lease')).status, 200);
    } finally {
      await srv.close();
    }
  });

  it('a handler that hangs past the ttl does not keep its slot: the lease expires', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const time = { now: T };
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => time.now });
    const srv = await app(rl, { identity: 'c3', concurrency: { limit: 1, ttl: 30 } });
    try {
      srv.start('/hang');
      await new Promise((r) => setTimeout(r, 100));
      assert.equal((await srv.get('/lease')).status, 429);
      time.now += 29_999;
      assert.equal((await srv.get('/lease')).status, 429);
      time.now += 1;
      assert.equal((await srv.get('/lease')).status, 200);
    } finally {
      srv.abortAll();
      await srv.close();
    }
  });

  it('with rate limits: one RL.ALL; a full concurrency limit spends no rate budget', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T });
    const perMinute = { name: 'per-minute', algorithm: 'slidelog', limit: 100, window: 60 };
    const srv = await app(rl, { identity: 'c4', limits: perMinute, concurrency: { limit: 1, ttl: 30 } });
    try {
      const slow = srv.start('/slow');
      await srv.waitGates(1);
      for (let i = 0; i < 3; i++) {
        const r = await srv.get('/lease');
        assert.deepEqual([r.status, r.headers['ratelimit-policy']], [429, '"per-minute";q=100;w=60']);
      }
      assert.equal(await raw(conn.client, 'ZCARD', 'rl:{c4}:per-minute'), 1);
      srv.open();
      await slow;
    } finally {
      srv.abortAll();
      await srv.close();
    }
  });
});

describe('typed calls', () => {
  it('acquire, heartbeat and release', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const time = { now: T };
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => time.now });
    const jobs = { name: 'jobs', algorithm: 'concurrency', limit: 2, window: 10 };
    assert.deepEqual([(await rl.acquire(jobs, 'typed', 'a')).remaining, (await rl.acquire(jobs, 'typed', 'a')).remaining], [1, 1]);
    assert.equal((await rl.acquire(jobs, 'typed', 'b')).remaining, 0);
    const full = await rl.acquire(jobs, 'typed', 'c');
    assert.deepEqual([full.allowed, full.retryAfter], [false, 10_000]);
    time.now += 9000;
    assert.equal((await rl.heartbeat(jobs, 'typed', 'a')).allowed, true);
    time.now += 1000;
    // b expired at 10 s; a was renewed until 19 s.
    assert.equal((await rl.heartbeat(jobs, 'typed', 'b')).allowed, false);
    assert.equal((await rl.acquire(jobs, 'typed', 'c')).allowed, true);
    await rl.release(jobs, 'typed', 'a');
    assert.equal((await rl.acquire(jobs, 'typed', 'd')).allowed, true);
    await assert.rejects(rl.acquire(jobs, 'typed'), /needs a lease id/);
  });

  it('a full concurrency limit is never held in the deny cache: a release frees the slot at once', async (t) => {
    if (!has.concurrency) return t.skip(NO_CONCURRENCY);
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T, denyCache: true });
    const one = { name: 'one', algorithm: 'concurrency', limit: 1, window: 60 };
    assert.equal((await rl.acquire(one, 'cached', 'a')).allowed, true);
    assert.equal((await rl.acquire(one, 'cached', 'b')).allowed, false);
    // Released by another process (straight to Redis), as a worker elsewhere would.
    await raw(conn.client, 'RL.CONCURRENCY', 'rl:{cached}:one', '1', '60', 'RELEASE', 'a');
    assert.equal((await rl.acquire(one, 'cached', 'b')).allowed, true);
  });

  it('throttle: redis-cell\'s reply shape', async (t) => {
    if (!has.throttle) return t.skip(NO_THROTTLE);
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => T });
    const spec = { maxBurst: 1, count: 1, period: 10 };
    assert.deepEqual(await rl.throttle('cell', spec), { allowed: true, limit: 2, remaining: 1, retryAfter: -1, resetAfter: 10, source: 'redis' });
    assert.equal((await rl.throttle('cell', spec)).allowed, true);
    const limited = await rl.throttle('cell', spec);
    assert.deepEqual([limited.allowed, limited.remaining, limited.retryAfter, limited.resetAfter], [false, 0, 10, 20]);
    // quantity 0 reports without spending.
    assert.equal((await rl.throttle('cell2', { ...spec, quantity: 0 })).remaining, 2);
    assert.equal((await rl.throttle('cell2', spec)).remaining, 1);
  });

  it('throttle on a dead Redis: the failure policy decides, reported', async () => {
    const { default: Redis } = await import('ioredis');
    const { ioredisOptions } = await import('../index.js');
    const dead = new Redis({ ...ioredisOptions(), port: await freePort() });
    dead.on('error', () => {});
    try {
      const reported = [];
      const rl = createRateLimiter({ client: dead, failure: 'closed', onError: (err, info) => reported.push(info.command) });
      const r = await rl.throttle('cell', { maxBurst: 1, count: 1, period: 10 });
      assert.deepEqual([r.allowed, r.source, r.error instanceof Error, reported], [false, 'failure', true, ['RL.THROTTLE']]);
    } finally {
      dead.disconnect();
    }
  });
});
