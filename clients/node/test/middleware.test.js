// The middleware on a plain http.createServer, as Express would call it.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter } from '../index.js';
import { ioredisClient, nodeRedisClient, raw } from './support/clients.js';
import { features, NO_ALL, ON_SCRIPTS, rawCommand, SECRET, startServer } from './support/servers.js';

const T = 1718609340000; // 2024-06-17T07:29:00Z
const DAY = 24 * 3600 * 1000;

let redis;
let conn;
before(async () => {
  redis = await startServer();
  conn = await nodeRedisClient(redis.port);
});
after(async () => {
  await conn?.close();
  await redis?.stop();
});

// An app: the middleware, then a handler that answers 200.
async function serve(middleware) {
  const server = http.createServer((req, res) => {
    middleware(req, res, (err) => {
      res.statusCode = err ? 500 : 200;
      res.end(err ? String(err) : 'ok');
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}/`;
  return {
    get: async (headers = {}) => {
      const res = await fetch(url, { headers });
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
    close: () => new Promise((ok) => { server.closeAllConnections(); server.close(ok); }),
  };
}

// How many pseudonyms were made: the server's RL.PSEUDONYM calls, or on the scripts
// backend the kit's own (it computes them there).
function pseudonymCounter(rl) {
  if (!ON_SCRIPTS) return async () => Number(/cmdstat_rl\.pseudonym:calls=(\d+)/.exec(await rawCommand(redis.port, 'INFO commandstats'))?.[1] ?? 0);
  let made = 0;
  const pseudonym = rl.pseudonym.bind(rl);
  rl.pseudonym = (...args) => { made += 1; return pseudonym(...args); };
  return async () => made;
}
const hmac = (text) => createHmac('sha256', SECRET).update(text).digest('hex').slice(0, 24);

describe('middleware', () => {
  it('sets the headers, answers 429 with Retry-After, and keys by the pseudonym of the address', async () => {
    const time = { now: T + 9800 };
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', secret: SECRET, clock: () => time.now });
    const limit = { name: 'trending', algorithm: 'fixed', limit: 2, window: 10 };
    const app = await serve(rl.middleware({ limits: limit, scope: 'trending', legacyHeaders: true }));
    try {
      const first = await app.get();
      assert.equal(first.status, 200);
      assert.equal(first.headers['ratelimit-policy'], '"trending";q=2;w=10');
      assert.equal(first.headers.ratelimit, '"trending";r=1;t=1');
      assert.equal(first.headers['x-ratelimit-limit'], '2');
      assert.equal(first.headers['x-ratelimit-remaining'], '1');
      assert.equal(first.headers['x-ratelimit-reset'], '1');
      assert.equal(first.headers['retry-after'], undefined);

      assert.equal((await app.get()).status, 200);
      const third = await app.get();
      assert.equal(third.status, 429);
      assert.equal(third.headers['retry-after'], '1');
      assert.equal(third.headers.ratelimit, '"trending";r=0;t=1');
      assert.deepEqual(JSON.parse(third.body), { error: 'rate_limited' });

      // The key holds the daily pseudonym of 127.0.0.1, never the address itself.
      const pseudonym = `${hmac('127.0.0.1|2024-06-17')}:trending`;
      assert.equal(await raw(conn.client, 'GET', `rl:{${pseudonym}}:trending:1718609340`), '2');
    } finally {
      await app.close();
    }
  });

  it('asks RL.PSEUDONYM once per address and UTC day', async () => {
    const time = { now: T };
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', secret: SECRET, clock: () => time.now });
    const limit = { name: 'daily', algorithm: 'slidelog', limit: 100, window: 60 };
    const pseudonymCalls = pseudonymCounter(rl);
    const app = await serve(rl.middleware({ limits: limit }));
    try {
      const before = await pseudonymCalls();
      for (let i = 0; i < 4; i++) assert.equal((await app.get()).status, 200);
      assert.equal(await pseudonymCalls() - before, 1);
      assert.equal(await raw(conn.client, 'ZCARD', `rl:{${hmac('127.0.0.1|2024-06-17')}}:daily`), 4);

      time.now += DAY;
      for (let i = 0; i < 2; i++) assert.equal((await app.get()).status, 200);
      assert.equal(await pseudonymCalls() - before, 2);
      assert.equal(await raw(conn.client, 'ZCARD', `rl:{${hmac('127.0.0.1|2024-06-18')}}:daily`), 2);
    } finally {
      await app.close();
    }
  });

  it('takes an identity function and a cost function', async () => {
    const rl = createRateLimiter({ client: conn.client, failure: 'closed' });
    const limit = { name: 'tokens', algorithm: 'gcra', limit: 10, window: 60, burst: 10 };
    const app = await serve(rl.middleware({
      limits: [limit],
      identify: (req) => req.headers['x-api-key'],
      cost: (req) => Number(req.headers['x-cost']),
    }));
    try {
      assert.equal((await app.get({ 'x-api-key': 'k1', 'x-cost': '6' })).headers.ratelimit, '"tokens";r=4;t=36');
      const denied = await app.get({ 'x-api-key': 'k1', 'x-cost': '6' });
      assert.equal(denied.status, 429);
      assert.equal(denied.headers['retry-after'], '12');
      // Another key has its own budget.
      assert.equal((await app.get({ 'x-api-key': 'k2', 'x-cost': '6' })).status, 200);
    } finally {
      await app.close();
    }
  });

  it('several limits: one RL.ALL, one header item per limit', async (t) => {
    if (!(await features(redis.port)).all) return t.skip(NO_ALL);
    const time = { now: T + 250 };
    const rl = createRateLimiter({ client: conn.client, failure: 'closed', clock: () => time.now });
    const perSecond = { name: 'per-second', algorithm: 'fixed', limit: 1, window: 1 };
    const perMinute = { name: 'per-minute', algorithm: 'slidelog', limit: 100, window: 60 };
    const app = await serve(rl.middleware({ limits: [perSecond, perMinute], identify: () => 'several' }));
    try {
      const ok = await app.get();
      assert.equal(ok.headers['ratelimit-policy'], '"per-second";q=1;w=1, "per-minute";q=100;w=60');
      assert.equal(ok.headers.ratelimit, '"per-second";r=0;t=1, "per-minute";r=99;t=60');
      const denied = await app.get();
      assert.equal(denied.status, 429);
      assert.equal(denied.headers['retry-after'], '1');
      // All or nothing: the per-minute log holds only the admitted request.
      assert.equal(await raw(conn.client, 'ZCARD', 'rl:{several}:per-minute'), 1);
    } finally {
      await app.close();
    }
  });

  for (const [lib, connect] of [['node-redis', nodeRedisClient], ['ioredis', ioredisClient]]) {
    it(`${lib}, Redis gone: fail open passes without headers, fail closed answers 503; both report`, async () => {
      const doomed = await startServer();
      const client = await connect(doomed.port);
      await doomed.stop();
      const limit = { name: 'gone', algorithm: 'fixed', limit: 1, window: 10 };
      try {
        for (const [failure, status] of [['open', 200], ['closed', 503]]) {
          const reported = [];
          const rl = createRateLimiter({ client: client.client, failure, timeout: 200, onError: (err, info) => reported.push(info.command) });
          const app = await serve(rl.middleware({ limits: limit }));
          try {
            const res = await app.get();
            assert.equal(res.status, status);
            assert.equal(res.headers.ratelimit, undefined);
            // The identity lookup (RL.PSEUDONYM) is the first to fail.
            assert.deepEqual(reported, ['RL.PSEUDONYM']);
          } finally {
            await app.close();
          }
        }
      } finally {
        await client.close();
      }
    });
  }

  it('a cost the module would refuse is raised to the app, never decided by the failure policy', async () => {
    const reports = [];
    const rl = createRateLimiter({ client: conn.client, failure: 'open', onError: (e) => reports.push(e) });
    const limit = { name: 'tokens', algorithm: 'fixed', limit: 10, window: 60 };
    const app = await serve(rl.middleware({
      limits: [limit],
      identify: () => 'k-bad-cost',
      cost: (req) => req.headers['x-cost'],
    }));
    try {
      const bad = await app.get({ 'x-cost': '2.5' });
      assert.equal(bad.status, 500, 'fail open would have admitted it');
      assert.match(bad.body, /RateLimitConfigError|cost/);
      assert.equal(reports.length, 0);
      assert.equal((await app.get({ 'x-cost': '2' })).status, 200);
    } finally {
      await app.close();
    }
  });

  it('a misconfigured limit throws when the middleware is made, not per request', () => {
    const rl = createRateLimiter({ client: conn.client, failure: 'open' });
    assert.throws(() => rl.middleware({ limits: { name: 'x', algorithm: 'leaky', limit: 1, window: 1 } }), /unknown algorithm/);
  });
});
