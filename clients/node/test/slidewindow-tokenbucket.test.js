// RL.SLIDEWINDOW (Symfony's sliding window, anchored at the first admitted call) and
// RL.TOKENBUCKET (Symfony's token bucket, refilled in steps) as kit limits, on this run's
// backend; their decisions depend on NOW only, so the clock is stepped.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter, RateLimitConfigError } from '../index.js';
import { nodeRedisClient, raw } from './support/clients.js';
import { ON_SCRIPTS, rawCommand, startServer } from './support/servers.js';

const T = 1718609340000; // ms, 2024-06-17T07:29:00Z
const reply = (d) => [d.allowed, d.remaining, d.retryAfter, d.resetAfter];

let server;
let conn;
before(async () => {
  server = await startServer();
  conn = await nodeRedisClient(server.port);
});
after(async () => {
  await conn?.close();
  await server?.stop();
});

/** A limiter whose clock is `clock.now` (ms), sent as NOW. */
function limiter(client, options = {}) {
  const clock = { now: T };
  const rl = createRateLimiter({ client, failure: 'closed', clock: () => clock.now, onError: (err) => { throw err; }, ...options });
  return { rl, clock };
}

describe('slidewindow and tokenbucket limits', () => {
  it('refuses bad arguments before anything is sent', async () => {
    const { rl } = limiter(conn.client);
    const before = await rawCommand(server.port, 'INFO commandstats');
    const refused = [
      [{ algorithm: 'tokenbucket', limit: 10, window: 1, refill: 0, key: 'rl:b' }, /limit "tokenbucket": refill must be a whole number from 1/],
      [{ algorithm: 'tokenbucket', limit: 10, window: 1, refill: 1.5, key: 'rl:b' }, /refill must be a whole number/],
      [{ algorithm: 'gcra', limit: 10, window: 1, refill: 2, key: 'rl:g' }, /refill is for algorithm 'tokenbucket' only/],
      [{ algorithm: 'slidewindow', limit: 10, window: 1, burst: 2, key: 'rl:w' }, /burst is for algorithm 'gcra' only/],
      [{ algorithm: 'slidewindow', limit: 0, window: 1, key: 'rl:w' }, /limit must be a whole number/],
      [{ algorithm: 'tokenbucket', limit: 5, window: 'soon', key: 'rl:b' }, /window must be/],
      [{ algorithm: 'tokenbuckets', limit: 5, window: 1, key: 'rl:b' }, /unknown algorithm "tokenbuckets" \(slidelog, slidecount, slidewindow, fixed, counter, gcra, tokenbucket or concurrency\)/],
    ];
    for (const [limit, error] of refused) {
      await assert.rejects(rl.check(limit), (err) => err instanceof RateLimitConfigError && error.test(err.message), JSON.stringify(limit));
    }
    assert.equal((await rawCommand(server.port, 'INFO commandstats')).match(/cmdstat_(rl\.|evalsha)/g), before.match(/cmdstat_(rl\.|evalsha)/g));
  });

  it('slidewindow weighs the previous window (Symfony\'s own test: 8, then 15 s later 1, and 5 refused)', async () => {
    const { rl, clock } = limiter(conn.client);
    const limit = { name: 'w', algorithm: 'slidewindow', limit: 10, window: 12, key: 'rl:{sw}:w' };
    assert.deepEqual(reply(await rl.check(limit, undefined, { cost: 8 })), [true, 2, 0, 24000]);
    assert.equal(await raw(conn.client, 'GET', limit.key), `${(T + 12000) * 1000}:8:0`);
    clock.now += 15000; // a quarter into the next window: 8 × 9 / 12 = 6 still counted
    assert.deepEqual(reply(await rl.check(limit)), [true, 3, 0, 21000]);
    assert.deepEqual(reply(await rl.check(limit, undefined, { cost: 5 })), [false, 3, 1501, 21000]);
    assert.equal(await raw(conn.client, 'GET', limit.key), `${(T + 24000) * 1000}:1:8`);
    // REFUND and RESET each answer as a PEEK of their cost.
    assert.deepEqual(reply(await rl.refund(limit)), [true, 3, 0, 21000]);
    assert.equal(await raw(conn.client, 'GET', limit.key), `${(T + 24000) * 1000}:0:8`);
    assert.deepEqual(reply(await rl.reset(limit)), [true, 9, 0, 0]);
    assert.equal(await raw(conn.client, 'EXISTS', limit.key), 0);
  });

  it('tokenbucket refills in steps (Symfony\'s testBucketRefilledWithStrictFrequency: 100 back each 15 s)', async () => {
    const { rl, clock } = limiter(conn.client);
    const limit = { name: 'b', algorithm: 'tokenbucket', limit: 1000, window: 15, refill: 100, key: 'rl:{tb}:b' };
    assert.deepEqual(reply(await rl.check(limit, undefined, { cost: 300 })), [true, 700, 0, 45000]);
    assert.equal(await raw(conn.client, 'GET', limit.key), `700:${T * 1000}`);
    const seen = [];
    for (let i = 0; i < 20; i++) {
      seen.push((await rl.check(limit)).remaining);
      clock.now += 4000;
    }
    assert.deepEqual(seen, [699, 698, 697, 696, 795, 794, 793, 792, 891, 890, 889, 888, 987, 986, 985, 999, 998, 997, 996, 999]);
    // Emptied, it waits for the next step, not for a smooth trickle.
    assert.equal((await rl.check(limit, undefined, { cost: 999 })).allowed, true);
    assert.deepEqual(reply(await rl.check(limit)).slice(0, 3), [false, 0, 15000 - 4000]);
    assert.equal((await rl.refund(limit, undefined, { cost: 5 })).remaining, 0);
    assert.equal((await rl.peek(limit)).remaining, 4);
    // A cost above the capacity is the module's "never", not an error.
    assert.equal((await rl.check(limit, undefined, { cost: 1001 })).retryAfter, Infinity);
  });

  it('RL.ALL spends on both or on neither, with the bucket\'s REFILL', async () => {
    const { rl, clock } = limiter(conn.client);
    const window = { name: 'w', algorithm: 'slidewindow', limit: 6, window: 10, key: 'rl:{all}:w' };
    const bucket = { name: 'b', algorithm: 'tokenbucket', limit: 4, window: 10, refill: 2, key: 'rl:{all}:b' };
    const admitted = [];
    for (let i = 0; i < 3; i++) admitted.push((await rl.check([window, bucket], undefined, { cost: 2 })).allowed);
    assert.deepEqual(admitted, [true, true, false]);
    // The bucket refused the third: the window did not spend either.
    assert.equal(await raw(conn.client, 'GET', window.key), `${(T + 10000) * 1000}:4:0`);
    const denied = await rl.check([window, bucket], undefined, { cost: 2 });
    assert.deepEqual(denied.limits.map(reply), [[true, 0, 0, 20000], [false, 0, 10000, 20000]]);
    // One step brings two tokens back, not one (the window's end is included: it still counts its 4).
    clock.now += 10000;
    const stepped = await rl.check([window, bucket], undefined, { cost: { w: 1, b: 2 } });
    assert.deepEqual([stepped.allowed, stepped.limits.map((d) => d.remaining)], [true, [1, 0]]);
    assert.equal(await raw(conn.client, 'GET', bucket.key), `0:${(T + 10000) * 1000}`);
  });
});

const skip = ON_SCRIPTS && 'compares the scripts with the module on a server that has it: runs in the module backend\'s run';
describe('slidewindow and tokenbucket on the scripts', { skip }, () => {
  it('answer as the module does, step for step', async () => {
    const limits = [
      { name: 'w', algorithm: 'slidewindow', limit: 10, window: 12, key: 'rl:{parity}:w' },
      { name: 'b', algorithm: 'tokenbucket', limit: 3, window: 10, refill: 2, key: 'rl:{parity}:b' },
    ];
    const steps = [[0, 2], [0, 1], [1, 9], [9999, 2], [1, 2], [5000, 3], [12000, 1], [30000, 4]];
    for (const limit of limits) {
      const answers = {};
      for (const backend of ['module', 'scripts']) {
        const { rl, clock } = limiter(conn.client, { backend });
        answers[backend] = [];
        for (const [advance, cost] of steps) {
          clock.now += advance;
          answers[backend].push(reply(await rl.check(limit, undefined, { cost })));
        }
        await rl.reset(limit);
      }
      assert.deepEqual(answers.scripts, answers.module, limit.algorithm);
      assert.ok(answers.module.some(([allowed]) => !allowed), 'the steps reach a denial');
    }
  });
});
