// The failure policy: every way Redis can fail to decide ends in the policy's decision,
// reported to onError, within a bounded time, on both client libraries.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createClient } from 'redis';
import Redis from 'ioredis';
import { createRateLimiter, ioredisOptions, nodeRedisOptions, TimeoutError } from '../index.js';
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

function limiter(client, failure) {
  const reported = [];
  const rl = createRateLimiter({ client, failure, timeout: TIMEOUT, onError: (err, info) => reported.push({ err, info }) });
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
  let deadPort;
  let mute;
  const muteSockets = new Set();
  before(async () => {
    deadPort = await freePort();
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
          const port = target === 'dead port' ? deadPort : mute.address().port;
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

for (const [lib, connect] of Object.entries(standalone)) {
  describe(`${lib}: error replies and a lost connection`, () => {
    let withModule;
    let without;
    before(async () => {
      [withModule, without] = await Promise.all([startServer(), startServer({ module: false })]);
    });
    after(() => Promise.all([withModule?.stop(), without?.stop()]));

    it('the module not loaded: "unknown command" goes through the policy', async () => {
      const conn = await connect(without.port);
      try {
        for (const failure of ['open', 'closed']) {
          const { rl, reported } = limiter(conn.client, failure);
          const d = await rl.check(limit, 'someone');
          assert.equal(d.allowed, failure === 'open');
          assert.match(d.error.message, /unknown command 'RL\.FIXED'/);
          assert.equal(reported.length, 1);
          await assert.rejects(rl.pseudonym('192.0.2.1'), /unknown command 'RL\.PSEUDONYM'/);
        }
      } finally {
        await conn.close();
      }
    });

    it('a bad argument: the module\'s error goes through the policy', async () => {
      const conn = await connect(withModule.port);
      try {
        const { rl, reported } = limiter(conn.client, 'open');
        const d = await rl.check({ ...limit, limit: 0 }, 'someone');
        assert.equal(d.allowed, true);
        assert.equal(d.source, 'failure');
        assert.match(d.error.message, /^ERR limit must be a positive integer/);
        assert.equal(reported.length, 1);
        // And the next good call is decided by Redis again.
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
