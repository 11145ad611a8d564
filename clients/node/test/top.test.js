// top(): RL.TOP on one server and merged over a real cluster's primaries, through
// node-redis and ioredis.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { top, mergeTop } from '../index.js';
import { clusters, raw, standalone } from './support/clients.js';
import { ON_SCRIPTS, startCluster, startServer } from './support/servers.js';

// RL.TOP is the module's own: the scripts keep no denial summary.
const skip = ON_SCRIPTS && 'RL.TOP needs the module; this run is the scripts backend\'s';

const NOW = '1718609349800000';

let server;
let cluster;
before(async () => {
  if (skip) return;
  server = await startServer();
  cluster = await startCluster();
});
after(async () => {
  await server?.stop();
  await cluster?.stop();
});

async function deny(send, key, times, algorithm = 'FIXED') {
  for (let i = 0; i <= times; i++) await send(`RL.${algorithm}`, key, '1', '60', 'NOW', NOW);
}

for (const [lib, connect] of Object.entries(standalone)) {
  describe(`top() through ${lib}`, { skip }, () => {
    it('answers worst first, with COUNT, ALGORITHM and RESET', async () => {
      const { client, close } = await connect(server.port);
      try {
        const send = (...a) => raw(client, ...a);
        await top(client, { reset: true });
        const k = (name) => `top:${lib}:${name}`;
        await deny(send, k('heavy'), 5);
        await deny(send, k('light'), 1);
        await deny(send, k('g'), 2, 'GCRA');
        const got = await top(client);
        assert.deepEqual(got.map((e) => [e.key, e.denied, e.error]), [[k('heavy'), 5, 0], [k('g'), 2, 0], [k('light'), 1, 0]]);
        assert.deepEqual(got[0], {
          key: k('heavy'), denied: 5, admitted: 0, error: 0, lastDeniedMs: 1718609349800, command: 'rl.fixed', algorithm: 'fixed',
        });
        assert.deepEqual((await top(client, { count: 1 })).map((e) => e.key), [k('heavy')]);
        assert.deepEqual((await top(client, { algorithm: 'gcra' })).map((e) => e.key), [k('g')]);
        assert.equal((await top(client, { reset: true })).length, 3);
        assert.deepEqual(await top(client), []);
        for (const count of [0, -1, 1.5, '3']) {
          await assert.rejects(top(client, { count }), TypeError);
        }
        await assert.rejects(top(client, { algorithm: 'nope' }), /unknown algorithm/);
      } finally {
        await close();
      }
    });
  });
}

for (const [lib, connect] of Object.entries(clusters)) {
  describe(`top() on a cluster through ${lib}`, { skip }, () => {
    it('asks every primary and merges', async () => {
      const { client, close } = await connect(cluster.nodes.map((n) => n.port));
      try {
        await top(client, { reset: true, count: 1000 });
        const keys = Array.from({ length: 12 }, (_, i) => [`{${lib}${i}}:rl`, i + 1]);
        for (const [key, n] of keys) {
          for (let i = 0; i <= n; i++) {
            if (typeof client.call === 'function') await client.call('RL.FIXED', key, '1', '60', 'NOW', NOW);
            else await client.sendCommand(key, false, ['RL.FIXED', key, '1', '60', 'NOW', NOW]);
          }
        }
        const merged = await top(client, { count: 5 });
        const want = [...keys].sort((a, b) => b[1] - a[1]).slice(0, 5);
        assert.deepEqual(merged.map((e) => [e.key, e.denied]), want);
        assert.equal((await top(client, { count: 100, reset: true })).length, keys.length);
        assert.deepEqual(await top(client), []);
      } finally {
        await close();
      }
    });
  });
}

describe('mergeTop', () => {
  it('adds a key seen on two servers and keeps its latest denial', () => {
    const e = (key, denied, admitted, error, lastDeniedMs, command, algorithm) => ({ key, denied, admitted, error, lastDeniedMs, command, algorithm });
    assert.deepEqual(
      mergeTop([[e('k', 5, 1, 1, 10, 'rl.fixed', 'fixed'), e('x', 9, 0, 0, 1, 'rl.gcra', 'gcra')], [e('k', 6, 2, 0, 20, 'rl.all', 'gcra')]], 10),
      [e('k', 11, 3, 1, 20, 'rl.all', 'gcra'), e('x', 9, 0, 0, 1, 'rl.gcra', 'gcra')],
    );
  });
});
