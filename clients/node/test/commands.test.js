// Typed calls on a standalone server, through node-redis and ioredis alike: every
// decision is the server's reply, read field by field.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter } from '../index.js';
import { standalone, raw } from './support/clients.js';
import { features, noBlock, NO_ALL, NO_COUNTER, NO_REFUND_RESET, SECRET, startServer } from './support/servers.js';

// 2024-06-17T07:29:00Z, the seed's fixed window 1718609340: a multiple of 10 s and 60 s.
const T = 1718609340000;
const us = (ms) => String(ms * 1000);

let server;
let feats;
before(async () => {
  server = await startServer();
  feats = await features(server.port);
});
after(() => server?.stop());

for (const [lib, connect] of Object.entries(standalone)) {
  describe(`typed calls through ${lib}`, () => {
    let conn;
    let rl;
    const errors = [];
    before(async () => {
      conn = await connect(server.port);
      rl = createRateLimiter({ client: conn.client, failure: 'closed', secret: SECRET, onError: (err) => errors.push(err) });
    });
    after(() => conn?.close());

    it('RL.FIXED: the fields are the reply, and a never-admissible cost is Infinity, not -1', async () => {
      const fixed = { name: 'fixed', algorithm: 'fixed', limit: 8, window: 10, key: `rl:fixed:${lib}` };
      const d = await rl.check(fixed, undefined, { now: T + 9800 });
      assert.deepEqual(
        { allowed: d.allowed, remaining: d.remaining, retryAfter: d.retryAfter, resetAfter: d.resetAfter, source: d.source },
        { allowed: true, remaining: 7, retryAfter: 0, resetAfter: 200, source: 'redis' },
      );
      // NOW went out in µs and the window in seconds: the seed's key layout.
      assert.equal(await raw(conn.client, 'EXISTS', `rl:fixed:${lib}:1718609340`), 1);

      const never = await rl.check(fixed, undefined, { now: T + 9800, cost: 9 });
      assert.deepEqual(await raw(conn.client, 'RL.FIXED', `rl:fixed:${lib}`, '8', '10', 'COST', '9', 'NOW', us(T + 9800)), [0, 7, -1, 200]);
      assert.equal(never.allowed, false);
      assert.equal(never.retryAfter, Infinity);
      assert.equal(never.limits[0].retryAfter, Infinity);
      assert.equal(never.remaining, 7);
    });

    for (const algorithm of ['fixed', 'slidecount', 'slidelog', 'gcra']) {
      it(`RL.${algorithm.toUpperCase()}: admits the limit, denies the next, and each decision matches the server's PEEK`, async () => {
        const limit = { name: algorithm, algorithm, limit: 2, window: 10, key: `rl:{${lib}}:${algorithm}` };
        const seen = [];
        for (let i = 0; i < 3; i++) seen.push(await rl.check(limit, undefined, { now: T + 1000 }));
        assert.deepEqual(seen.map((d) => [d.allowed, d.remaining]), [[true, 1], [true, 0], [false, 0]]);
        assert.ok(seen[2].retryAfter > 0 && Number.isFinite(seen[2].retryAfter), `retryAfter ${seen[2].retryAfter}`);

        const peek = await rl.peek(limit, undefined, { now: T + 1500 });
        const reply = await raw(conn.client, `RL.${algorithm.toUpperCase()}`, limit.key, '2', '10', 'NOW', us(T + 1500), 'PEEK');
        assert.deepEqual([peek.allowed ? 1 : 0, peek.remaining, peek.retryAfter, peek.resetAfter], reply);
        assert.deepEqual(peek.limits.map((d) => d.key), [limit.key]);
      });
    }

    it('RL.COUNTER: one counter at the key itself, its window from the first hit (TTL = window); RL.ALL sends COUNTER', async (t) => {
      if (!feats.counter) return t.skip(NO_COUNTER);
      // The window's end is the key's expiry on the server clock: NOW stays near it.
      const now = Date.now();
      const limit = { name: 'counter', algorithm: 'counter', limit: 2, window: 10, key: `rl:{counter-${lib}}:c` };
      const seen = [];
      for (let i = 0; i < 3; i++) seen.push(await rl.check(limit, undefined, { now }));
      assert.deepEqual(seen.map((d) => [d.allowed, d.remaining]), [[true, 1], [true, 0], [false, 0]]);
      // The first hit opens a whole window (an aligned fixed window would end sooner);
      // the server's clock is a few ms past `now`, so the end is a little later.
      const whole = (ms) => ms > 9000 && ms <= 11000;
      assert.ok(whole(seen[0].resetAfter), `first reset ${seen[0].resetAfter}`);
      assert.ok(whole(seen[2].retryAfter), `retryAfter ${seen[2].retryAfter}`);
      assert.equal(await raw(conn.client, 'GET', limit.key), '2');
      const ttl = Number(await raw(conn.client, 'PTTL', limit.key));
      assert.ok(ttl > 9000 && ttl <= 10000, `PTTL ${ttl}`);
      const peek = await rl.peek(limit, undefined, { now });
      const reply = await raw(conn.client, 'RL.COUNTER', limit.key, '2', '10', 'NOW', us(now), 'PEEK');
      assert.deepEqual([peek.allowed ? 1 : 0, peek.remaining, peek.retryAfter, peek.resetAfter], reply);
      // Past the key's expiry (the server set it a few ms after `now`) the window has
      // ended: the next hit opens a new one.
      assert.deepEqual([(await rl.check(limit, undefined, { now: now + 12_000 })).remaining], [1]);

      if (!feats.all) return undefined;
      const both = [
        { name: 'c', algorithm: 'counter', limit: 3, window: 10, key: `rl:{all-counter-${lib}}:c` },
        { name: 'f', algorithm: 'fixed', limit: 5, window: 10, key: `rl:{all-counter-${lib}}:f` },
      ];
      const d = await rl.check(both, undefined, { now, cost: { c: 2 } });
      assert.deepEqual(d.limits.map((l) => [l.allowed, l.remaining]), [[true, 1], [true, 4]]);
      assert.equal(await raw(conn.client, 'GET', both[0].key), '2');
      return undefined;
    });

    it('countAll and renew: RL.COUNTER\'s COUNTALL and RENEW, a counter limit\'s alone, checked before Redis', async () => {
      // The window's end is the key's expiry on the server clock: NOW stays near it.
      const now = Date.now();
      const limit = { name: 'all', algorithm: 'counter', limit: 1, window: 10, key: `rl:{countall-${lib}}:c`, countAll: true, renew: true };
      assert.deepEqual([(await rl.check(limit, undefined, { now })).allowed], [true]);
      await raw(conn.client, 'PEXPIRE', limit.key, '2000'); // as if 8 s had passed
      const denied = await rl.check(limit, undefined, { now });
      assert.deepEqual([denied.allowed, denied.remaining], [false, 0]);
      // The denied call was counted (COUNTALL), and re-armed the TTL (RENEW).
      assert.equal(await raw(conn.client, 'GET', limit.key), '2');
      const ttl = Number(await raw(conn.client, 'PTTL', limit.key));
      assert.ok(ttl > 9000 && ttl <= 10_000, `PTTL ${ttl}`);
      const refused = [
        [{ ...limit, algorithm: 'fixed' }, /limit "all": countAll is for algorithm 'counter' only/],
        [{ ...limit, countAll: false, algorithm: 'gcra' }, /limit "all": renew is for algorithm 'counter' only/],
        [{ ...limit, countAll: 'yes' }, /limit "all": countAll must be true or false, got "yes"/],
        [[limit, { ...limit, name: 'other', countAll: false, renew: false }], /limit "all": countAll, renew and escalate are RL.COUNTER's alone, not a limit's in RL.ALL/],
        [{ ...limit, escalate: true }, /limit "all": renew and escalate exclude each other/],
        [{ ...limit, countAll: false, renew: false, escalate: true, algorithm: 'slidelog' }, /limit "all": escalate is for algorithm 'counter' only/],
        [{ ...limit, renew: false, escalate: 1 }, /limit "all": escalate must be true or false, got 1/],
        [[{ ...limit, renew: false, escalate: true }, { ...limit, name: 'other', countAll: false, renew: false }], /countAll, renew and escalate are RL.COUNTER's alone/],
      ];
      for (const [bad, message] of refused) await assert.rejects(rl.check(bad, undefined, { now }), message);
      assert.equal(await raw(conn.client, 'GET', limit.key), '2');
    });

    it('escalate: RL.COUNTER\'s ESCALATE, each denial doubling the TTL; a counter\'s window may last 292,000 years, no other\'s', async () => {
      const now = Date.now();
      const limit = { name: 'esc', algorithm: 'counter', limit: 1, window: 10, key: `rl:{escalate-${lib}}:c`, escalate: true };
      assert.equal((await rl.check(limit, undefined, { now })).allowed, true);
      for (const ttl of [10_000, 20_000, 40_000]) {
        const d = await rl.check(limit, undefined, { now });
        assert.deepEqual([d.allowed, d.retryAfter, d.resetAfter], [false, ttl, ttl]);
        const pttl = Number(await raw(conn.client, 'PTTL', limit.key));
        assert.ok(pttl > ttl - 1000 && pttl <= ttl, `PTTL ${pttl}`);
      }
      assert.equal(await raw(conn.client, 'GET', limit.key), '4');
      // 285,421 years (past 2^53 ms: sent as its digits, exactly); the longest, and 1 ms more.
      const years = { ...limit, key: `rl:{escalate-${lib}}:y`, escalate: false, window: '9007201749600000ms' };
      assert.deepEqual(await rl.check(years, undefined, { now }).then((d) => [d.allowed, d.resetAfter]), [true, 9_007_201_749_600_000]);
      const longest = { ...years, key: `rl:{escalate-${lib}}:l`, window: '9223372036854775ms' };
      assert.equal((await rl.check(longest, undefined, { now })).allowed, true);
      for (const [bad, message] of [
        [{ ...longest, window: '9223372036854776ms' }, /limit "esc": window must be .* at most 9223372036854775 ms \(about 292,000 years\); got "9223372036854776ms"/],
        [{ ...years, algorithm: 'fixed' }, /limit "esc": window must be .* at most 10 years; got "9007201749600000ms"/],
        [{ ...years, algorithm: 'fixed', window: '315360001s' }, /at most 10 years/],
        [{ ...years, block: '315360001s' }, /block must be a duration, .* at most 10 years/],
      ]) await assert.rejects(rl.check(bad, undefined, { now }), message);
      assert.equal(await raw(conn.client, 'EXISTS', `rl:{escalate-${lib}}:y`), 1);
    });

    it('a counter limit refuses burst, as every limit but gcra', async () => {
      await assert.rejects(rl.check({ algorithm: 'counter', limit: 2, window: 10, burst: 3, key: 'k' }), /burst is for algorithm 'gcra' only/);
      await assert.rejects(rl.check({ algorithm: 'counters', limit: 2, window: 10, key: 'k' }), /unknown algorithm "counters" \(slidelog, slidecount, slidewindow, fixed, counter, gcra, tokenbucket or concurrency\)/);
    });

    it('block: a denial starts the module\'s penalty box; blocked calls count strikes; impose and reset', async (t) => {
      const skip = await noBlock();
      if (skip) return t.skip(skip);
      const boxed = { name: 'boxed', algorithm: 'fixed', limit: 1, window: 10, key: `rl:{box-${lib}}:boxed`, block: { duration: '30s', strikes: true } };
      assert.equal((await rl.check(boxed, undefined, { now: T })).allowed, true);
      const denied = await rl.check(boxed, undefined, { now: T + 1000 });
      assert.deepEqual([denied.allowed, denied.retryAfter, denied.strikes], [false, 30000, 1]);
      assert.equal(await raw(conn.client, 'EXISTS', `rl:{box-${lib}}:boxed:block`), 1);
      // Past the window the limit would admit; the block still holds, one more strike.
      const held = await rl.check(boxed, undefined, { now: T + 15000 });
      assert.deepEqual([held.allowed, held.retryAfter, held.strikes], [false, 16000, 2]);
      assert.equal((await rl.reset(boxed, undefined, { now: T + 15000 })).allowed, true);
      assert.equal(await raw(conn.client, 'EXISTS', `rl:{box-${lib}}:boxed:block`), 0);
      const imposed = await rl.impose(boxed, undefined, { now: T + 16000 });
      assert.deepEqual([imposed.allowed, imposed.retryAfter], [false, 30000]);
      for (const [bad, message] of [[{ ...boxed, block: '5 min' }, /block must be a duration/], [{ ...boxed, block: { duration: 10, backoff: 5 } }, /at least the block's/]]) {
        await assert.rejects(rl.check(bad, undefined), message);
      }
    });

    it('RL.GCRA sends BURST', async () => {
      const smooth = { name: 'smooth', algorithm: 'gcra', limit: 10, window: 10, burst: 1, key: `rl:{${lib}}:smooth` };
      assert.equal((await rl.check(smooth, undefined, { now: T })).allowed, true);
      const second = await rl.check(smooth, undefined, { now: T });
      // With the default burst (10) the second would pass; with BURST 1 it waits one interval.
      assert.equal(second.allowed, false);
      assert.equal(second.retryAfter, 1000);
    });

    it('a window in milliseconds is sent as such', async () => {
      const short = { name: 'short', algorithm: 'fixed', limit: 1, window: '1500ms', key: `rl:short:${lib}` };
      const d = await rl.check(short, undefined, { now: T + 100 });
      assert.equal(d.resetAfter, 1400);
      assert.equal(await raw(conn.client, 'EXISTS', `rl:short:${lib}:${T}`), 1);
    });

    it('the default key puts the identity in a hash tag', async () => {
      await rl.check({ name: 'api', algorithm: 'fixed', limit: 5, window: 60 }, `user-${lib}`, { now: T });
      assert.equal(await raw(conn.client, 'EXISTS', `rl:{user-${lib}}:api:1718609340`), 1);
    });

    it('peek spends nothing', async () => {
      const limit = { name: 'peek', algorithm: 'slidelog', limit: 3, window: 10 };
      const id = `peeker-${lib}`;
      // remaining is what would be left after this request, had it been spent.
      assert.equal((await rl.peek(limit, id, { now: T })).remaining, 2);
      assert.equal((await rl.peek(limit, id, { now: T })).remaining, 2);
      assert.equal((await rl.check(limit, id, { now: T })).remaining, 2);
      assert.equal((await rl.peek(limit, id, { now: T })).remaining, 1);
    });

    it('refund gives units back and reset clears the state', async (t) => {
      if (!feats.refundReset) return t.skip(NO_REFUND_RESET);
      for (const algorithm of ['fixed', 'slidecount', 'slidelog', 'gcra']) {
        const limit = { name: `r-${algorithm}`, algorithm, limit: 4, window: 60 };
        const id = `refunder-${lib}`;
        assert.equal((await rl.check(limit, id, { now: T, cost: 3 })).remaining, 1, algorithm);
        // Replies are PEEK-like: remaining is what would be left after spending `cost`.
        const refunded = await rl.refund(limit, id, { now: T, cost: 2 });
        assert.deepEqual([refunded.allowed, refunded.remaining], [true, 1], algorithm);
        assert.equal((await rl.peek(limit, id, { now: T })).remaining, 2, `${algorithm}: 1 of 4 spent`);
        const reset = await rl.reset(limit, id, { now: T });
        assert.deepEqual([reset.allowed, reset.remaining], [true, 3], algorithm);
        assert.equal((await rl.peek(limit, id, { now: T, cost: 4 })).allowed, true, `${algorithm}: the whole budget is back`);
      }
    });

    it('RL.ALL: all or nothing, per-limit decisions, costs by limit name', async (t) => {
      if (!feats.all) return t.skip(NO_ALL);
      const requests = { name: 'requests', algorithm: 'slidelog', limit: 10, window: 60 };
      const tokens = { name: 'tokens', algorithm: 'fixed', limit: 100, window: 60 };
      const id = `all-${lib}`;
      const first = await rl.check([requests, tokens], id, { now: T, cost: { tokens: 80 } });
      assert.equal(first.allowed, true);
      assert.deepEqual(first.limits.map((d) => [d.policy.name, d.remaining]), [['requests', 9], ['tokens', 20]]);
      assert.equal(first.remaining, 9);

      const denied = await rl.check([requests, tokens], id, { now: T + 1000, cost: { tokens: 30 } });
      assert.equal(denied.allowed, false);
      assert.deepEqual(denied.limits.map((d) => d.allowed), [true, false]);
      assert.equal(denied.retryAfter, denied.limits[1].retryAfter);
      // Nothing was spent: one request in the log, so a PEEK leaves 8 after itself.
      assert.equal((await rl.peek(requests, id, { now: T + 1000 })).remaining, 8);

      const never = await rl.check([requests, tokens], id, { now: T + 1000, cost: { tokens: 101 } });
      assert.equal(never.retryAfter, Infinity);
    });

    it('RL.PSEUDONYM: HMAC of the canonical address and the UTC day, with scope', async () => {
      const day = '2024-06-17';
      const hex = createHmac('sha256', SECRET).update(`192.0.2.1|${day}`).digest('hex').slice(0, 24);
      assert.equal(await rl.pseudonym('::ffff:192.0.2.1', { scope: 'trending', now: T }), `${hex}:trending`);
      assert.equal(await rl.pseudonym('192.0.2.1', { now: T }), hex);
      const net = createHmac('sha256', SECRET).update(`2001:db8:1:2::/64|${day}`).digest('hex').slice(0, 24);
      assert.equal(await rl.pseudonym('2001:db8:1:2:aaaa::1', { prefix6: 64, now: T }), net);
    });

    it('batch: one decision per request, in order, in one round trip', async () => {
      const limit = { name: 'batch', algorithm: 'fixed', limit: 1, window: 60 };
      const requests = ['a', 'b', 'a', 'c'].map((id) => ({ limits: limit, identity: `${id}-${lib}`, now: T }));
      const decisions = await rl.batch(requests);
      assert.deepEqual(decisions.map((d) => d.allowed), [true, true, false, true]);
      assert.deepEqual(decisions.map((d) => d.limits[0].key), requests.map((r) => `rl:{${r.identity}}:batch`));
    });

    it('reported no failure on the way', () => {
      assert.deepEqual(errors, []);
    });
  });
}
