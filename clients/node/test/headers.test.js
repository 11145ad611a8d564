// The exact header text for each algorithm, from real decisions at fixed NOW times.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter, rateLimitHeaders } from '../index.js';
import { nodeRedisClient } from './support/clients.js';
import { features, NO_ALL, startServer } from './support/servers.js';

const T = 1718609340000; // a multiple of 10 s and 60 s

let server;
let conn;
let rl;
let feats;
before(async () => {
  server = await startServer();
  feats = await features(server.port);
  conn = await nodeRedisClient(server.port);
  rl = createRateLimiter({ client: conn.client, failure: 'closed' });
});
after(async () => {
  await conn?.close();
  await server?.stop();
});

// Two admitted at T+0.5 s and T+1 s, a denial at T+1.5 s, and a cost above the limit
// (never admissible) on a fresh identity.
async function scenario(limit, id) {
  const out = [];
  for (const ms of [500, 1000, 1500]) out.push(rl.headers(await rl.check(limit, id, { now: T + ms })));
  out.push(rl.headers(await rl.check(limit, `${id}-fresh`, { now: T + 1500, cost: limit.limit + 1 })));
  return out;
}

describe('RateLimit headers', () => {
  it('RL.FIXED', async () => {
    const h = await scenario({ name: 'per-10s', algorithm: 'fixed', limit: 2, window: 10 }, 'fixed');
    assert.deepEqual(h, [
      { 'RateLimit-Policy': '"per-10s";q=2;w=10', RateLimit: '"per-10s";r=1;t=10' },
      { 'RateLimit-Policy': '"per-10s";q=2;w=10', RateLimit: '"per-10s";r=0;t=9' },
      // 8.5 s to the next window: Retry-After rounds up.
      { 'RateLimit-Policy': '"per-10s";q=2;w=10', RateLimit: '"per-10s";r=0;t=9', 'Retry-After': '9' },
      // Never admissible: no Retry-After, since waiting won't help; nothing was spent.
      { 'RateLimit-Policy': '"per-10s";q=2;w=10', RateLimit: '"per-10s";r=2;t=0' },
    ]);
  });

  it('RL.SLIDECOUNT', async () => {
    const h = await scenario({ name: 'sliding', algorithm: 'slidecount', limit: 2, window: 10 }, 'slidecount');
    assert.deepEqual(h, [
      { 'RateLimit-Policy': '"sliding";q=2;w=10', RateLimit: '"sliding";r=1;t=10' },
      // The count decays through the next window: full again 5 s into it.
      { 'RateLimit-Policy': '"sliding";q=2;w=10', RateLimit: '"sliding";r=0;t=15' },
      { 'RateLimit-Policy': '"sliding";q=2;w=10', RateLimit: '"sliding";r=0;t=14', 'Retry-After': '9' },
      { 'RateLimit-Policy': '"sliding";q=2;w=10', RateLimit: '"sliding";r=2;t=0' },
    ]);
  });

  it('RL.SLIDELOG', async () => {
    const h = await scenario({ name: 'per-minute', algorithm: 'slidelog', limit: 2, window: 60 }, 'slidelog');
    assert.deepEqual(h, [
      { 'RateLimit-Policy': '"per-minute";q=2;w=60', RateLimit: '"per-minute";r=1;t=60' },
      { 'RateLimit-Policy': '"per-minute";q=2;w=60', RateLimit: '"per-minute";r=0;t=60' },
      // The oldest entry (T+0.5 s) leaves the window 59 s later.
      { 'RateLimit-Policy': '"per-minute";q=2;w=60', RateLimit: '"per-minute";r=0;t=60', 'Retry-After': '59' },
      { 'RateLimit-Policy': '"per-minute";q=2;w=60', RateLimit: '"per-minute";r=2;t=0' },
    ]);
  });

  it('RL.GCRA', async () => {
    const h = await scenario({ name: 'smooth', algorithm: 'gcra', limit: 2, window: 10, burst: 2 }, 'gcra');
    assert.deepEqual(h, [
      { 'RateLimit-Policy': '"smooth";q=2;w=10', RateLimit: '"smooth";r=1;t=5' },
      { 'RateLimit-Policy': '"smooth";q=2;w=10', RateLimit: '"smooth";r=0;t=10' },
      // One emission interval (5 s) after the first arrival.
      { 'RateLimit-Policy': '"smooth";q=2;w=10', RateLimit: '"smooth";r=0;t=9', 'Retry-After': '4' },
      { 'RateLimit-Policy': '"smooth";q=2;w=10', RateLimit: '"smooth";r=2;t=0' },
    ]);
  });

  it('legacy X-RateLimit-* on request', async () => {
    const limit = { name: 'legacy', algorithm: 'fixed', limit: 100, window: 60 };
    const d = await rl.check(limit, 'legacy', { now: T + 15000 });
    assert.deepEqual(rl.headers(d, { legacy: true }), {
      'RateLimit-Policy': '"legacy";q=100;w=60',
      RateLimit: '"legacy";r=99;t=45',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '99',
      'X-RateLimit-Reset': '45',
    });
  });

  it('RL.ALL: one item per limit; legacy fields from the tightest limit', async (t) => {
    if (!feats.all) return t.skip(NO_ALL);
    const perSecond = { name: 'per-second', algorithm: 'fixed', limit: 10, window: 1 };
    const perMinute = { name: 'per-minute', algorithm: 'slidelog', limit: 100, window: 60 };
    const d = await rl.check([perSecond, perMinute], 'all', { now: T + 250 });
    assert.deepEqual(rl.headers(d, { legacy: true }), {
      'RateLimit-Policy': '"per-second";q=10;w=1, "per-minute";q=100;w=60',
      RateLimit: '"per-second";r=9;t=1, "per-minute";r=99;t=60',
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1',
    });
    const denied = await rl.check([perSecond, perMinute], 'all', { now: T + 250, cost: { 'per-second': 10 } });
    assert.equal(rl.headers(denied)['Retry-After'], '1');
  });

  it('no headers when the failure policy decided; names are quoted strings', () => {
    assert.deepEqual(rateLimitHeaders({ allowed: true, remaining: 0, retryAfter: 0, resetAfter: 0, limits: [], source: 'failure' }), {});
    const policy = { name: 'a "b" \\c', algorithm: 'fixed', limit: 1, window: '1500ms' };
    const d = { allowed: true, remaining: 0, retryAfter: 0, resetAfter: 1, source: 'redis', limits: [{ allowed: true, remaining: 0, retryAfter: 0, resetAfter: 1, policy }] };
    assert.deepEqual(rateLimitHeaders(d), {
      'RateLimit-Policy': '"a \\"b\\" \\\\c";q=1;w=2',
      RateLimit: '"a \\"b\\" \\\\c";r=0;t=1',
    });
  });
});
