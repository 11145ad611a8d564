// The backend option: which of the module's commands and their scripts decide, how
// 'auto' finds out and changes its mind, the scripts' reload after NOSCRIPT, and the
// pseudonym the kit computes where no script can. These tests start their own servers,
// with and without the module, so they run once, in the module backend's run.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter, RateLimitConfigError } from '../index.js';
import { canonicalIdentity, pseudonymOf } from '../src/pseudonym.js';
import { listen } from './support/adapters.js';
import { raw, standalone } from './support/clients.js';
import { ON_SCRIPTS, rawCommand, SECRET, startServer } from './support/servers.js';

const T = 1718609340000; // 2024-06-17T07:29:00Z
const limit = { name: 'api', algorithm: 'fixed', limit: 3, window: 60 };
const skip = ON_SCRIPTS && 'the backend tests start their own servers with and without the module: they run in the module backend\'s run';

/** INFO commandstats calls of one command (lowercase name, e.g. 'rl.fixed', 'evalsha'). */
async function calls(port, command) {
  const info = await rawCommand(port, 'INFO commandstats');
  return Number(new RegExp(`cmdstat_${command.replace('.', '\\.')}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

const stats = async (port) => ({
  module: await calls(port, 'rl.fixed'),
  scripts: (await calls(port, 'evalsha')) + (await calls(port, 'eval')),
  // Error replies starting ERR: the unknown command among them.
  errors: Number(/errorstat_ERR:count=(\d+)/.exec(await rawCommand(port, 'INFO errorstats'))?.[1] ?? 0),
});

describe('backend option', { skip }, () => {
  let withModule;
  let bare;
  before(async () => {
    if (skip) return;
    withModule = await startServer({ module: true });
    bare = await startServer({ module: false });
  });
  after(() => Promise.all([withModule?.stop(), bare?.stop()]));

  it('refuses a backend it does not know, and a secret that is no string', () => {
    assert.throws(() => createRateLimiter({ client: {}, failure: 'open', backend: 'lua' }), (err) => err instanceof RateLimitConfigError && /'auto'.*'module'.*'scripts'.*"lua"/.test(err.message));
    assert.throws(() => createRateLimiter({ client: {}, failure: 'open', secret: 42 }), RateLimitConfigError);
  });

  for (const [lib, connect] of Object.entries(standalone)) {
    describe(`through ${lib}`, () => {
      it('auto: the module where it is loaded, the scripts where not; the first call on a bare server is decided, not lost', async () => {
        for (const [server, expected] of [[withModule, 'module'], [bare, 'scripts']]) {
          const conn = await connect(server.port);
          try {
            const errors = [];
            const rl = createRateLimiter({ client: conn.client, failure: 'closed', onError: (e) => errors.push(e) });
            assert.equal(rl.activeBackend, 'module', 'before any answer: the module is asked first');
            await raw(conn.client, 'SCRIPT', 'FLUSH');
            const before = await stats(server.port);
            const decisions = [];
            for (let i = 0; i < 4; i++) decisions.push(await rl.check(limit, `auto-${lib}`, { now: T }));
            assert.deepEqual(decisions.map((d) => [d.source, d.allowed, d.remaining]), [['redis', true, 2], ['redis', true, 1], ['redis', true, 0], ['redis', false, 0]]);
            assert.equal(rl.activeBackend, expected);
            const after = await stats(server.port);
            // On the bare server only the first RL.FIXED was tried (one unknown command), then
            // the scripts: four EVALSHA, the first answered NOSCRIPT, so one EVAL.
            assert.deepEqual([after.module - before.module, after.scripts - before.scripts, after.errors - before.errors], expected === 'module' ? [4, 0, 0] : [0, 5, 1]);
            assert.deepEqual(errors, []);
          } finally {
            await conn.close();
          }
        }
      });

      it('auto: many limiters on one client watch its reconnects with one listener, so none is leaked', async () => {
        const conn = await connect(bare.port);
        try {
          const before = conn.client.listenerCount('ready');
          const limiters = Array.from({ length: 20 }, () => createRateLimiter({ client: conn.client, failure: 'closed' }));
          assert.ok(conn.client.listenerCount('ready') - before <= 1, `${conn.client.listenerCount('ready') - before} listeners`);
          for (const rl of limiters.slice(0, 2)) await rl.check(limit, `many-${lib}`, { now: T });
          assert.deepEqual(limiters.slice(0, 3).map((rl) => rl.activeBackend), ['scripts', 'scripts', 'module'], 'each limiter learns for itself');
        } finally {
          await conn.close();
        }
      });

      it('auto: a batch that meets a bare server is retried on the scripts, every decision kept', async () => {
        const conn = await connect(bare.port);
        try {
          const rl = createRateLimiter({ client: conn.client, failure: 'closed' });
          const decisions = await rl.batch(['a', 'b', 'a'].map((id) => ({ limits: { ...limit, limit: 1 }, identity: `batch-${lib}-${id}`, now: T })));
          assert.deepEqual(decisions.map((d) => [d.source, d.allowed]), [['redis', true], ['redis', true], ['redis', false]]);
          assert.equal(rl.activeBackend, 'scripts');
        } finally {
          await conn.close();
        }
      });

      it('scripts on a server that has the module: the same decisions on the same keys, carried on by the module', async () => {
        const conn = await connect(withModule.port);
        try {
          const scripts = createRateLimiter({ client: conn.client, failure: 'closed', backend: 'scripts' });
          const module = createRateLimiter({ client: conn.client, failure: 'closed', backend: 'module' });
          assert.equal(scripts.activeBackend, 'scripts');
          const before = await stats(withModule.port);
          const id = `mixed-${lib}`;
          const seen = [];
          for (const rl of [scripts, module, scripts, module]) seen.push(await rl.check(limit, id, { now: T }));
          assert.deepEqual(seen.map((d) => [d.allowed, d.remaining]), [[true, 2], [true, 1], [true, 0], [false, 0]]);
          const after = await stats(withModule.port);
          assert.deepEqual([after.module - before.module, after.scripts - before.scripts >= 2], [2, true]);
          // RL.ALL and RL.THROTTLE as scripts too.
          const all = await scripts.check([limit, { name: 'smooth', algorithm: 'gcra', limit: 10, window: 60 }], `all-${lib}`, { now: T });
          assert.deepEqual(all.limits.map((d) => d.remaining), [2, 9]);
          const throttled = await scripts.throttle(`rl:{thr-${lib}}`, { maxBurst: 1, count: 10, period: 60 }, { now: T });
          assert.deepEqual([throttled.allowed, throttled.limit, throttled.remaining, throttled.source], [true, 2, 1, 'redis']);
        } finally {
          await conn.close();
        }
      });

      it('scripts: after SCRIPT FLUSH (NOSCRIPT) the script is sent again and the call decided, single and batched', async () => {
        const conn = await connect(withModule.port);
        try {
          const errors = [];
          const rl = createRateLimiter({ client: conn.client, failure: 'closed', backend: 'scripts', onError: (e) => errors.push(e.message) });
          const id = `flush-${lib}`;
          assert.equal((await rl.check(limit, id, { now: T })).remaining, 2);
          await raw(conn.client, 'SCRIPT', 'FLUSH');
          const evals = await calls(withModule.port, 'eval');
          const second = await rl.check(limit, id, { now: T });
          assert.deepEqual([second.source, second.remaining], ['redis', 1]);
          assert.equal(await calls(withModule.port, 'eval') - evals, 1, 'the body went once, by EVAL');
          // Cached again: the next call is an EVALSHA alone.
          assert.equal((await rl.check(limit, id, { now: T })).remaining, 0);
          assert.equal(await calls(withModule.port, 'eval') - evals, 1);
          await raw(conn.client, 'SCRIPT', 'FLUSH');
          const batch = await rl.batch([1, 2].map((n) => ({ limits: limit, identity: `${id}-${n}`, now: T })));
          assert.deepEqual(batch.map((d) => [d.source, d.remaining]), [['redis', 2], ['redis', 2]]);
          assert.deepEqual(errors, []);
        } finally {
          await conn.close();
        }
      });

      it('auto: a server restarted with the module is used natively after the reconnect, without a new limiter', async () => {
        const server = await startServer({ module: false });
        const conn = await connect(server.port);
        try {
          const rl = createRateLimiter({ client: conn.client, failure: 'open', timeout: 2000, onError: () => {} });
          assert.equal((await rl.check(limit, `restart-${lib}`, { now: T })).source, 'redis');
          assert.equal(rl.activeBackend, 'scripts');
          await server.restart({ module: true });
          // No call while the client reconnects (with its backoff): the reconnect alone
          // is what makes the next call ask the module.
          const ready = () => (lib === 'ioredis' ? conn.client.status === 'ready' : conn.client.isReady);
          for (const deadline = Date.now() + 10_000; !ready() && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
          assert.equal(rl.activeBackend, 'module', 'forgotten on reconnect');
          const decision = await rl.check(limit, `restart-${lib}-after`, { now: T });
          assert.equal(decision.source, 'redis');
          assert.equal(rl.activeBackend, 'module');
          assert.equal(await calls(server.port, 'evalsha') + await calls(server.port, 'eval'), 0, 'no script after the restart');
          assert.ok(await calls(server.port, 'rl.fixed') >= 1);
        } finally {
          await conn.close();
          await server.stop();
        }
      });

      it('auto: a call that got no answer makes the next one ask the module, also where the kit sees no reconnect', async () => {
        const server = await startServer({ module: false });
        const conn = await connect(server.port);
        try {
          const rl = createRateLimiter({ client: conn.client, failure: 'open', timeout: 2000, onError: () => {} });
          assert.equal((await rl.check(limit, `lost-${lib}`, { now: T })).source, 'redis');
          assert.equal(rl.activeBackend, 'scripts');
          // A reconnect the kit is not told about (as through a proxy or a client without events).
          conn.client.removeAllListeners('ready');
          const restarting = server.restart({ module: true, downMs: 400 });
          await new Promise((r) => setTimeout(r, 150));
          assert.equal((await rl.check(limit, `lost-${lib}`, { now: T })).source, 'failure');
          await restarting;
          const ready = () => (lib === 'ioredis' ? conn.client.status === 'ready' : conn.client.isReady);
          for (const deadline = Date.now() + 10_000; !ready() && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
          assert.equal((await rl.check(limit, `lost-${lib}-after`, { now: T })).source, 'redis');
          assert.equal(rl.activeBackend, 'module');
        } finally {
          await conn.close();
          await server.stop();
        }
      });

      it('the framework adapters take backend too: each store decides through the scripts when told to', async () => {
        const { RedisRlStore } = await import('../src/adapters/express-rate-limit.js');
        const { RedisRlThrottlerStorage } = await import('../src/adapters/nestjs.js');
        const { redisRlStore } = await import('../src/adapters/fastify.js');
        const { RateLimiterRedisRl } = await import('../src/adapters/rate-limiter-flexible.js');
        const conn = await connect(withModule.port);
        const native = async () => (await calls(withModule.port, 'rl.slidecount')) + (await calls(withModule.port, 'rl.all'));
        try {
          const options = { client: conn.client, backend: 'scripts', timeout: 2000 };
          const hits = {
            'express-rate-limit': async () => {
              const store = new RedisRlStore(options);
              store.init({ limit: 5, windowMs: 60_000 });
              return (await store.increment(`erl-${lib}`)).totalHits;
            },
            nestjs: async () => (await new RedisRlThrottlerStorage({ ...options, failure: 'closed' }).increment(`nest-${lib}`, 60_000, 5, 60_000, 'default')).totalHits,
            fastify: async () => {
              const Store = redisRlStore(options);
              const store = new Store({});
              return new Promise((ok, fail) => store.incr(`fastify-${lib}`, (err, res) => (err ? fail(err) : ok(res.current)), 60_000, 5));
            },
            'rate-limiter-flexible': async () => (await new RateLimiterRedisRl({ storeClient: conn.client, backend: 'scripts', timeout: 2000, points: 5, duration: 60, keyPrefix: `rlf-${lib}` }).consume('k')).consumedPoints,
          };
          for (const [name, hit] of Object.entries(hits)) {
            const [nativeBefore, scriptsBefore] = [await native(), (await stats(withModule.port)).scripts];
            assert.equal(await hit(), 1, name);
            assert.equal(await native() - nativeBefore, 0, `${name}: no RL.* command`);
            assert.ok((await stats(withModule.port)).scripts > scriptsBefore, `${name}: a script decided`);
          }
        } finally {
          await conn.close();
        }
      });

      it('pseudonym: computed by the kit on the scripts, equal to the module\'s RL.PSEUDONYM for the same secret and day', async () => {
        const conn = await connect(withModule.port);
        try {
          const module = createRateLimiter({ client: conn.client, failure: 'closed', backend: 'module' });
          const scripts = createRateLimiter({ client: conn.client, failure: 'closed', backend: 'scripts', secret: SECRET });
          const before = await calls(withModule.port, 'rl.pseudonym');
          const identities = ['192.0.2.1', '::ffff:192.0.2.1', '::FFFF:c000:0201', '2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8:1:2:aaaa::1',
            '2001:db8:0:0:1:0:0:1', '1:0:0:2:0:0:0:3', '::', '::1', '64:ff9b::192.0.2.33', 'fe80::1%eth0', 'api-key-123', '192.0.2.1 ', '010.0.0.1', 'ünïcode'];
          let compared = 0;
          for (const now of [T, T + 86_400_000 * 200 + 3_600_000]) {
            for (const identity of identities) {
              for (const options of [{}, { scope: 'trending' }, { prefix6: 64 }, { prefix6: 1 }, { prefix6: 127, scope: 's' }]) {
                const expected = await module.pseudonym(identity, { ...options, now });
                assert.equal(await scripts.pseudonym(identity, { ...options, now }), expected, `${identity} ${JSON.stringify(options)} at ${now}`);
                compared += 1;
              }
            }
          }
          // Each comparison was the module's answer against the kit's, none the kit's alone.
          assert.equal(await calls(withModule.port, 'rl.pseudonym') - before, compared);
        } finally {
          await conn.close();
        }
      });

      it('pseudonym without the secret on the scripts: a clear error, in the middleware too (not the failure policy)', async () => {
        const conn = await connect(bare.port);
        try {
          const reported = [];
          const rl = createRateLimiter({ client: conn.client, failure: 'open', onError: (e) => reported.push(e) });
          const noSecret = (err) => err instanceof RateLimitConfigError && /scripts backend needs the secret option/.test(err.message);
          await assert.rejects(rl.pseudonym('192.0.2.1'), noSecret);
          assert.equal(rl.activeBackend, 'scripts');
          await assert.rejects(rl.pseudonym('192.0.2.1'), noSecret);
          await assert.rejects(createRateLimiter({ client: conn.client, failure: 'open', backend: 'scripts' }).pseudonym('x'), noSecret);
          let seen;
          const app = await listen(http.createServer((req, res) => rl.middleware({ limits: limit })(req, res, (err) => {
            seen = err;
            res.statusCode = err ? 500 : 200;
            res.end();
          })));
          try {
            assert.equal((await app.get()).status, 500);
          } finally {
            await app.close();
          }
          assert.ok(noSecret(seen), String(seen));
          assert.deepEqual(reported, []);
          await assert.rejects(createRateLimiter({ client: conn.client, failure: 'open', secret: SECRET }).pseudonym('x', { prefix6: 0 }), /prefix6 must be a prefix length from 1 to 128/);
        } finally {
          await conn.close();
        }
      });
    });
  }
});

describe('the scripts the kit ships', () => {
  it('are read by the ESM source and the CommonJS build alike: the byte-identical copies of the repository\'s', async () => {
    const { readFileSync } = await import('node:fs');
    const { createRequire } = await import('node:module');
    const { scriptOf } = await import('../src/backend.js');
    const cjs = createRequire(import.meta.url)('../dist/cjs/src/backend.cjs');
    for (const [command, file] of [['RL.FIXED', 'fixed'], ['RL.ALL', 'all'], ['rl.throttle', 'throttle']]) {
      const top = readFileSync(new URL(`../../../scripts/${file}.lua`, import.meta.url), 'utf8');
      assert.equal(scriptOf(command).body, top, command);
      assert.equal(cjs.scriptOf(command).sha, scriptOf(command).sha, command);
    }
    assert.throws(() => scriptOf('RL.PSEUDONYM'), /RL.PSEUDONYM has no script/);
  });

  it('a command becomes its script with the same arguments: KEYS are its keys, ARGV everything after its name', async () => {
    const { asScript, scriptOf } = await import('../src/backend.js');
    const fixed = scriptOf('RL.FIXED').sha;
    assert.match(fixed, /^[0-9a-f]{40}$/);
    assert.deepEqual(asScript({ args: ['RL.FIXED', '{u}:api', '100', '60', 'COST', '2'], keys: ['{u}:api'] }),
      { args: ['EVALSHA', fixed, '1', '{u}:api', '{u}:api', '100', '60', 'COST', '2'], key: '{u}:api' });
    const all = ['RL.ALL', '2', 'FIXED', 'rl:{u}:a', '5', '60', 'CONCURRENCY', 'rl:{u}:b', '2', '30', 'LEASE', 'r1'];
    assert.deepEqual(asScript({ args: all, keys: ['rl:{u}:a', 'rl:{u}:b'] }, { eval: true }),
      { args: ['EVAL', scriptOf('RL.ALL').body, '2', 'rl:{u}:a', 'rl:{u}:b', ...all.slice(1)], key: 'rl:{u}:a' });
  });
});

describe('the pseudonym the kit computes', () => {
  it('hashes the identity as the module does: canonical IP forms, PREFIX6 networks, anything else as is', () => {
    assert.equal(canonicalIdentity('192.0.2.1'), '192.0.2.1');
    assert.equal(canonicalIdentity('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(canonicalIdentity('::FFFF:c000:0201', 64), '192.0.2.1');
    assert.equal(canonicalIdentity('2001:0DB8:0000:0000:0000:0000:0000:0001'), '2001:db8::1');
    assert.equal(canonicalIdentity('2001:db8:1:2:3:4:5:6', 64), '2001:db8:1:2::/64');
    assert.equal(canonicalIdentity('2001:db8:1:2:3:4:5:6', 128), '2001:db8:1:2:3:4:5:6/128');
    assert.equal(canonicalIdentity('2001:db8:0:1:0:0:0:1'), '2001:db8:0:1::1', 'the longest zero run');
    assert.equal(canonicalIdentity('1:0:0:2:0:0:3:4'), '1::2:0:0:3:4', 'the first of two equal runs');
    assert.equal(canonicalIdentity('1:2:3:4:5:6:0:8'), '1:2:3:4:5:6:0:8', 'one zero group stays');
    assert.equal(canonicalIdentity('64:ff9b::192.0.2.33'), '64:ff9b::c000:221');
    for (const other of ['api-key-123', '192.0.2.1 ', '010.0.0.1', 'fe80::1%eth0', '1::2::3', '1:2:3:4:5:6:7:8:9', '12345::', ':1:2', '1.2.3.4:80']) {
      assert.equal(canonicalIdentity(other, 64), other);
    }
  });

  it('is the HMAC of the identity and the UTC day, cut to 24 hex, with the scope', () => {
    // The module's own test vector (src/pseudonym.rs), computed independently with Python.
    assert.equal(pseudonymOf('s3cret', '192.0.2.1', { scope: 'trending' }, 1_764_460_800_000), '30eaf298020f061a4d7dbe85:trending');
    const day = (d) => createHmac('sha256', SECRET).update(`192.0.2.1|${d}`).digest('hex').slice(0, 24);
    assert.equal(pseudonymOf(SECRET, '192.0.2.1', {}, Date.UTC(2024, 5, 17, 23, 59, 59, 999)), day('2024-06-17'));
    assert.equal(pseudonymOf(SECRET, '192.0.2.1', {}, Date.UTC(2024, 5, 18)), day('2024-06-18'));
  });
});

describe('no module, as each server words it', () => {
  it("reads Redis 7+'s ' and Redis 6.2's ` quoting alike", async () => {
    const { isUnknownRlCommand } = await import('../src/backend.js');
    const reply = (message) => Object.assign(new Error(message), { name: 'ReplyError' });
    assert.equal(isUnknownRlCommand(reply("ERR unknown command 'RL.FIXED', with args beginning with: 'k' ")), true);
    assert.equal(isUnknownRlCommand(reply('ERR unknown command `RL.FIXED`, with args beginning with: `k`, ')), true);
    assert.equal(isUnknownRlCommand(reply('ERR unknown command `FOO`, with args beginning with: ')), false);
    assert.equal(isUnknownRlCommand(reply("ERR syntax error: unknown option 'RL.X'")), false);
  });
});
