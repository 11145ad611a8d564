// A real 3-node cluster: the kit's calls reach the right node first time (MOVED counted
// on the servers), pipelines included, through node-redis and ioredis.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createRateLimiter, RedisCommandError } from '../index.js';
import { clusters } from './support/clients.js';
import { features, movedCount, NO_ALL, ON_SCRIPTS, SECRET, startCluster } from './support/servers.js';
import { asScript } from '../src/backend.js';

const T = 1718609340000;
const fixed = { name: 'api', algorithm: 'fixed', limit: 3, window: 60 };
const ids = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

let cluster;
let feats;
before(async () => {
  cluster = await startCluster();
  feats = await features(cluster.nodes[0].port);
});
after(() => cluster?.stop());

// The same command without the kit's routing: what the issue saw.
// ioredis routes EVAL by its KEYS itself, so a script goes to one node's own connection.
function unrouted(lib, client, args) {
  if (lib === 'ioredis') return args[0] === 'EVAL' ? client.nodes('master')[0].call(...args) : client.call(...args);
  return client.sendCommand(undefined, false, args);
}

for (const [lib, connect] of Object.entries(clusters)) {
  describe(`cluster through ${lib}`, () => {
    let conn;
    let rl;
    const errors = [];
    before(async () => {
      conn = await connect(cluster.nodes.map((n) => n.port));
      rl = createRateLimiter({ client: conn.client, failure: 'closed', secret: SECRET, onError: (err, info) => errors.push({ err, info }) });
    });
    after(() => conn?.close());

    it('without the kit, RL.* calls bounce (MOVED): the count below can see them', async () => {
      const before = await movedCount(cluster.nodes);
      // On the scripts backend the same call as a script that declares its key.
      const call = (key) => (ON_SCRIPTS ? asScript({ args: ['RL.GCRA', key, '3', '60'], keys: [key] }, { eval: true }).args : ['RL.GCRA', key, '3', '60']);
      await Promise.allSettled(ids(`raw-${lib}-`, 30).map((id) => unrouted(lib, conn.client, call(`rl:{${id}}:x`))));
      assert.ok(await movedCount(cluster.nodes) > before, 'expected MOVED redirects for unrouted calls');
    });

    it('single calls for 60 identities: every one decided, zero MOVED', async () => {
      const before = await movedCount(cluster.nodes);
      for (const algorithm of ['fixed', 'slidecount', 'slidelog', 'gcra']) {
        const limit = { ...fixed, name: algorithm, algorithm };
        const decisions = await Promise.all(ids(`one-${lib}-`, 15).map((id) => rl.check(limit, id, { now: T })));
        assert.deepEqual(decisions.map((d) => [d.source, d.remaining]), decisions.map(() => ['redis', 2]), algorithm);
      }
      assert.equal(await movedCount(cluster.nodes) - before, 0);
    });

    it('a batch across many slots: per-slot pipelines, zero MOVED, right answers', async () => {
      const before = await movedCount(cluster.nodes);
      const requests = ids(`batch-${lib}-`, 40).map((identity) => ({ limits: fixed, identity, now: T }));
      const first = await rl.batch(requests);
      const second = await rl.batch(requests);
      assert.deepEqual(first.map((d) => [d.source, d.remaining]), requests.map(() => ['redis', 2]));
      assert.deepEqual(second.map((d) => [d.source, d.remaining]), requests.map(() => ['redis', 1]));
      assert.equal(await movedCount(cluster.nodes) - before, 0);
    });

    it('RL.ALL in a cluster: several keys of one identity, zero MOVED', async (t) => {
      if (!feats.all) return t.skip(NO_ALL);
      const before = await movedCount(cluster.nodes);
      const limits = [fixed, { name: 'smooth', algorithm: 'gcra', limit: 10, window: 60 }];
      const decisions = await rl.batch(ids(`all-${lib}-`, 20).map((identity) => ({ limits, identity, now: T })));
      assert.deepEqual(decisions.map((d) => [d.allowed, d.limits.length]), decisions.map(() => [true, 2]));
      assert.equal(await movedCount(cluster.nodes) - before, 0);
    });

    it('RL.PSEUDONYM works through the cluster client', async () => {
      const hex = createHmac('sha256', SECRET).update('192.0.2.7|2024-06-17').digest('hex').slice(0, 24);
      for (let i = 0; i < 3; i++) assert.equal(await rl.pseudonym('192.0.2.7', { scope: 's', now: T }), `${hex}:s`);
    });

    it('an untagged key: the module\'s own error, raised to the caller (a configuration mistake, not an outage)', async () => {
      errors.length = 0;
      for (const algorithm of ['fixed', 'slidecount']) {
        await assert.rejects(rl.check({ ...fixed, algorithm, key: `untagged-${lib}-${algorithm}` }),
          (err) => err instanceof RedisCommandError && /needs a \{hash tag\} in cluster mode/.test(err.message));
      }
      assert.deepEqual(errors, []);
      // One key, no derived keys: SLIDELOG needs no tag.
      assert.equal((await rl.check({ ...fixed, algorithm: 'slidelog', key: `untagged-${lib}-log` })).source, 'redis');
    });
  });
}
