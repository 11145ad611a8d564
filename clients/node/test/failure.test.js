// The failure policy: every way Redis can fail to decide ends in the policy's decision,
// reported to onError, within a bounded time, on both client libraries.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createClient } from 'redis';
import Redis from 'ioredis';
import { createRateLimiter, ioredisOptions, nodeRedisOptions, RateLimitConfigError, RedisCommandError, TimeoutError, validateLimits } from '../index.js';
import { callerError } from '../src/limiter.js';
import { standalone } from './support/clients.js';
import { freePort, startServer } from './support/servers.js';

const limit = { name: 'api', algorithm: 'fixed', limit: 5, window: 60 };
const TIMEOUT = 200;
// Generous against a loaded machine, far below "hangs".
const BOUND = 1500;

const quiet = () => {};

// Clients that are not waited for: the server may be dead or mute. `recommended` picks
// the kit's client options; without them the kit's own timeout is what bounds a call.
function openClient(lib, port, recommended) {
  if (lib === 'node-redis') {
    const client = createClient({ ...(recommended ? nodeRedisOptions() : {}), url: `redis://127.0.0.1:${port}` });
    client.on('error', quiet);
    client.connect().catch(quiet);
    return { client, close: () => client.destroy() };
  }
  const client = new Redis({ ...(recommended ? ioredisOptions() : {}), host: '127.0.0.1', port });
  client.on('error', quiet);
  return { client, close: () => client.disconnect() };
}

function limiter(client, failure, options = {}) {
  const reported = [];
  const rl = createRateLimiter({ client, failure, timeout: TIMEOUT, onError: (err, info) => reported.push({ err, info }), ...options });
  return { rl, reported };
}

async function timed(promise) {
  const start = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - start };
}

it('the policy must be chosen', () => {
  assert.throws(() => createRateLimiter({ client: { sendCommand() {} } }), /choose a failure policy/);
  assert.throws(() => createRateLimiter({ client: { sendCommand() {} }, failure: 'maybe' }), /choose a failure policy/);
});

describe('a dead port and a server that never answers', () => {
  let mute;
  const muteSockets = new Set();
  before(async () => {
    // Accepts connections, reads, never writes a byte.
    mute = net.createServer((socket) => {
      muteSockets.add(socket);
      socket.on('error', quiet);
    });
    await new Promise((ok) => mute.listen(0, '127.0.0.1', ok));
  });
  after(() => {
    for (const socket of muteSockets) socket.destroy();
    mute.close();
  });

  for (const lib of ['node-redis', 'ioredis']) {
    for (const recommended of [true, false]) {
      for (const target of ['dead port', 'mute server']) {
        const how = recommended ? 'the kit\'s client options' : 'default client options';
        it(`${lib}, ${how}, ${target}: open allows, closed denies, both report, in bounded time`, async () => {
          // A port found free just now: found once for all, a server started by another
          // test file (they run in parallel) could take it meanwhile.
          const port = target === 'dead port' ? await freePort() : mute.address().port;
          const conn = openClient(lib, port, recommended);
          try {
            for (const failure of ['open', 'closed']) {
              const { rl, reported } = limiter(conn.client, failure);
              const { value: d, ms } = await timed(rl.check(limit, 'someone'));
              assert.equal(d.allowed, failure === 'open');
              assert.equal(d.source, 'failure');
              assert.ok(d.error instanceof Error);
              assert.deepEqual(d.limits, []);
              assert.equal(reported.length, 1);
              assert.equal(reported[0].err, d.error);
              assert.deepEqual(reported[0].info, { command: 'RL.FIXED', keys: ['rl:{someone}:api'], failure });
              assert.ok(ms < BOUND, `took ${ms} ms`);
              // Without the kit's options the client would wait; the kit's timeout ends it.
              if (!recommended) assert.ok(d.error instanceof TimeoutError, d.error.message);
            }
          } finally {
            await conn.close();
          }
        });
      }
    }
  }
});

describe('which error replies are the caller\'s', () => {
  it('ERR, WRONGTYPE and NOPERM are raised; LOADING, READONLY, BUSY, OOM and a lost connection go to the policy', () => {
    const reply = (message) => Object.assign(new Error(message), { name: 'ReplyError' });
    for (const m of ['ERR limit must be a positive integer', 'WRONGTYPE Operation against a key', 'NOPERM this user has no permissions']) {
      assert.ok(callerError(reply(m), 'RL.FIXED') instanceof RedisCommandError, m);
    }
    for (const m of ['LOADING Redis is loading', 'READONLY You can\'t write against a read only replica.', 'BUSY Redis is busy', 'OOM command not allowed', 'CLUSTERDOWN The cluster is down']) {
      assert.equal(callerError(reply(m), 'RL.FIXED'), undefined, m);
    }
    assert.equal(callerError(new Error('Connection is closed.'), 'RL.FIXED'), undefined);
    assert.equal(callerError(new TimeoutError('no reply'), 'RL.FIXED'), undefined);
    assert.match(callerError(reply("ERR unknown command 'RL.GCRA', with args beginning with: "), 'RL.GCRA').message, /module is not loaded.*loadmodule/);
  });
});

for (const [lib, connect] of Object.entries(standalone)) {
  describe(`${lib}: error replies and a lost connection`, () => {
    let withModule;
    let without;
    before(async () => {
      [withModule, without] = await Promise.all([startServer(), startServer({ module: false })]);
    });
    after(() => Promise.all([withModule?.stop(), without?.stop()]));

    it('the module not loaded: "unknown command" is raised with the loadmodule hint, not sent to the policy', async () => {
      const conn = await connect(without.port);
      try {
        for (const failure of ['open', 'closed']) {
          // backend 'module': auto would decide through the scripts there.
          const { rl, reported } = limiter(conn.client, failure, { backend: 'module' });
          await assert.rejects(rl.check(limit, 'someone'), (err) => err instanceof RedisCommandError
            && /does not know RL\.FIXED: the redis-rl module is not loaded/.test(err.message) && /loadmodule/.test(err.message));
          assert.equal(reported.length, 0);
          await assert.rejects(rl.pseudonym('192.0.2.1'), /does not know RL\.PSEUDONYM.*loadmodule/);
        }
      } finally {
        await conn.close();
      }
    });

    it('a bad argument: refused by the kit before Redis (the formats named), never the policy; an error reply that still comes back is raised', async () => {
      const conn = await connect(withModule.port);
      try {
        const { rl, reported } = limiter(conn.client, 'open');
        for (const [bad, message] of [
          [{ ...limit, limit: 0 }, /limit must be a whole number from 1/],
          [{ ...limit, limit: 1.5 }, /limit must be a whole number from 1/],
          // The module's largest amount is 10^15: one more is refused here, not by Redis.
          [{ ...limit, limit: 1e15 + 1 }, /limit must be a whole number from 1 to 10\^15/],
          [{ ...limit, algorithm: 'tokenbucket', refill: 1e15 + 1 }, /refill must be a whole number from 1 to 10\^15/],
          [{ ...limit, window: '10 minutes' }, /window must be a number of seconds \(60\) or a string '60', '60s' or '1500ms'/],
          [{ ...limit, window: 0 }, /window must be/],
          [{ ...limit, algorithm: 'gcra', burst: 0 }, /burst must be a whole number/],
          [{ ...limit, burst: 2 }, /burst is for algorithm 'gcra' only/],
        ]) {
          await assert.rejects(rl.check(bad, 'someone'), (err) => err instanceof RateLimitConfigError && message.test(err.message));
          assert.throws(() => validateLimits([bad]), message);
        }
        for (const [cost, message] of [['5x', /cost must be a whole number/], [0, /cost must be/], [-1, /cost must be/], [1.5, /cost must be/], [1e15 + 1, /cost must be a whole number from 1 to 10\^15/]]) {
          await assert.rejects(rl.check(limit, 'someone', { cost }), message);
        }
        await assert.rejects(rl.check({ ...limit, algorithm: 'slidelog' }, 'someone', { cost: 1_000_001 }), /at most 1000000, its largest limit/);
        // Any cost up to that goes to Redis: above the limit it never fits.
        const log = { ...limit, algorithm: 'slidelog', limit: 2000 };
        assert.equal((await rl.check(log, 'costly', { cost: 1500 })).remaining, 500);
        const never = await rl.check(log, 'costly', { cost: 2001 });
        assert.deepEqual([never.allowed, never.retryAfter], [false, Infinity]);
        const slot = { algorithm: 'concurrency', limit: 2, window: 30 };
        await assert.rejects(rl.acquire(slot, 'someone', ''), /needs a lease id/);
        await assert.rejects(rl.check(slot, 'someone', { cost: 2, lease: 'a' }), /a lease is one slot/);
        // A string of digits is a cost, not a map by limit name: '5' spends 5.
        const fresh = { ...limit, name: 'str-cost' };
        assert.equal((await rl.check(fresh, 'someone', { cost: '2' })).remaining, fresh.limit - 2);
        assert.equal(reported.length, 0);
        assert.equal((await rl.check(limit, 'someone')).source, 'redis');
      } finally {
        await conn.close();
      }
    });

    it('a lost connection: the next call is decided by the policy, quickly', async () => {
      const server = await startServer();
      const conn = await connect(server.port);
      try {
        const { rl, reported } = limiter(conn.client, 'closed');
        assert.equal((await rl.check(limit, 'someone')).source, 'redis');
        await server.stop();
        for (let i = 0; i < 3; i++) {
          const { value: d, ms } = await timed(rl.check(limit, 'someone'));
          assert.equal(d.allowed, false);
          assert.equal(d.source, 'failure');
          assert.ok(ms < BOUND, `took ${ms} ms`);
        }
        assert.equal(reported.length, 3);
      } finally {
        await conn.close();
      }
    });
  });
}
