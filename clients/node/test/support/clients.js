// The four kinds of client the kit supports, connected to a test server or cluster, with
// the kit's recommended options. close() ends whatever was opened.
import { once } from 'node:events';
import { createClient, createCluster } from 'redis';
import Redis from 'ioredis';
import { ioredisClusterOptions, ioredisOptions, nodeRedisOptions } from '../../index.js';
import { asScript } from '../../src/backend.js';
import { ON_SCRIPTS } from './servers.js';

const quiet = () => {};

export async function nodeRedisClient(port, overrides) {
  const client = createClient({ ...nodeRedisOptions(overrides), url: `redis://127.0.0.1:${port}` });
  client.on('error', quiet);
  await client.connect();
  return { client, close: () => client.destroy() };
}

export async function ioredisClient(port, overrides) {
  const client = new Redis({ ...ioredisOptions(overrides), host: '127.0.0.1', port });
  client.on('error', quiet);
  await once(client, 'ready');
  return { client, close: () => client.disconnect() };
}

export async function nodeRedisCluster(ports) {
  const client = createCluster({
    rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    defaults: nodeRedisOptions(),
  });
  client.on('error', quiet);
  await client.connect();
  return { client, close: () => client.destroy() };
}

export async function ioredisCluster(ports) {
  const client = new Redis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), ioredisClusterOptions());
  client.on('error', quiet);
  await once(client, 'ready');
  return { client, close: () => client.disconnect() };
}

/** Standalone clients by name, for tests that run the same checks on both libraries. */
export const standalone = { 'node-redis': nodeRedisClient, ioredis: ioredisClient };
export const clusters = { 'node-redis': nodeRedisCluster, ioredis: ioredisCluster };

/**
 * A command straight through the client, bypassing the kit (standalone clients). On the
 * scripts backend an RL.* limiter command runs as its script (EVAL, no KEYS), as the
 * server has no module.
 */
export function raw(client, ...args) {
  if (ON_SCRIPTS && /^RL\.(?!PSEUDONYM|TOP)/i.test(String(args[0]))) {
    args = asScript({ args: args.map(String), keys: [] }, { eval: true }).args;
  }
  return typeof client.call === 'function' ? client.call(...args) : client.sendCommand(args.map(String));
}
