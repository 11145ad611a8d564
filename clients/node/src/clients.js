// One small adapter per client library, so the limiter sees send(cmd) and batch(cmds)
// whatever the user connected with. A cmd is { args: string[], key?: string }.
import { createRequire } from 'node:module';
import calculateSlot from 'cluster-key-slot';

const require = createRequire(import.meta.url);

/**
 * @typedef {{ args: string[], key?: string }} Cmd
 * @typedef {{ send(cmd: Cmd): Promise<unknown>, batch(cmds: Cmd[]): Promise<PromiseSettledResult<unknown>[]> }} Adapter
 */

/** @returns {Adapter} */
export function adapt(client) {
  if (typeof client?.pipeline === 'function' && typeof client.call === 'function') return ioredis(client);
  if (typeof client?.sendCommand === 'function') return nodeRedis(client);
  throw new TypeError('redis-rl: expected a node-redis client or cluster (createClient, createCluster) or an ioredis Redis or Cluster');
}

/**
 * One send(args) per server that holds keys: every primary of a cluster client, else
 * the client itself.
 * @returns {Promise<Array<(args: string[]) => Promise<unknown>>>}
 */
export async function primaries(client) {
  // ioredis Cluster
  if (client?.isCluster && typeof client.nodes === 'function') {
    return client.nodes('master').map((n) => (a) => n.call(...a));
  }
  // node-redis cluster
  if (Array.isArray(client?.masters) && typeof client.nodeClient === 'function') {
    return Promise.all(client.masters.map(async (m) => {
      const c = await client.nodeClient(m);
      return (a) => c.sendCommand(a);
    }));
  }
  if (typeof client?.call === 'function') return [(a) => client.call(...a)];
  if (typeof client?.sendCommand === 'function') return [(a) => client.sendCommand(a)];
  throw new TypeError('redis-rl: expected a node-redis client or cluster or an ioredis Redis or Cluster');
}

/** `text` matched literally by a SCAN MATCH / KEYS glob. */
export const globEscape = (text) => String(text).replace(/[*?[\]\\]/g, '\\$&');

/**
 * UNLINK every key that matches a glob, on every primary, one SCAN page at a time:
 * never KEYS, so each server keeps answering in between. A cluster refuses one command
 * over keys of two slots (CROSSSLOT), hence one UNLINK per slot of a page. Rejects on
 * the first failure.
 */
export async function unlinkMatching(client, pattern, { count = 1000 } = {}) {
  await Promise.all((await primaries(client)).map(async (send) => {
    let cursor = '0';
    do {
      const [next, keys] = await send(['SCAN', cursor, 'MATCH', pattern, 'COUNT', String(count)]);
      cursor = String(next);
      const bySlot = new Map();
      for (const key of keys.map(String)) {
        const slot = calculateSlot(key);
        if (!bySlot.has(slot)) bySlot.set(slot, []);
        bySlot.get(slot).push(key);
      }
      await Promise.all([...bySlot.values()].map((group) => send(['UNLINK', ...group])));
    } while (cursor !== '0');
  }));
}

const connections = new WeakMap();

/**
 * A count of the client's (re)connections, any node of a cluster included: the server
 * behind it may be another one since (a failover) or have loaded the module. One
 * listener per client, however many limiters share it, so none is leaked with them.
 * @returns {() => number}
 */
export function connectionCount(client) {
  let count = connections.get(client);
  if (!count) {
    count = { value: 0 };
    connections.set(client, count);
    onReconnect(client, () => { count.value += 1; });
  }
  return () => count.value;
}

function onReconnect(client, listener) {
  if (typeof client?.on !== 'function') return;
  const isIoredis = typeof client.pipeline === 'function' && typeof client.call === 'function';
  if (isIoredis && client.isCluster) {
    // An ioredis cluster's nodes are Redis clients of their own, each reconnecting alone.
    const watch = (node) => node.on('ready', listener);
    client.nodes?.('all').forEach(watch);
    client.on('+node', watch);
    client.on('ready', listener);
  } else if (!isIoredis && ('masters' in client || typeof client.getMasters === 'function')) {
    client.on('node-ready', listener);
  } else {
    client.on('ready', listener);
  }
}

function nodeRedis(client) {
  const isCluster = 'masters' in client || typeof client.getMasters === 'function';
  // A cluster routes by the firstKey argument only; without it RL.* would go to a random
  // node and come back MOVED. The async wrapper turns a synchronous throw (closed client)
  // into a rejection like every other failure.
  const send = isCluster
    ? async ({ args, key }) => client.sendCommand(key, false, args)
    : async ({ args }) => client.sendCommand(args);
  // node-redis writes all commands issued in one tick together: that is its pipeline.
  return { send, batch: (cmds) => Promise.allSettled(cmds.map(send)) };
}

function ioredis(client) {
  // Resolved from this package: the app's ioredis when installed as a copy (see README).
  const { Command } = require('ioredis');
  // ioredis only knows the key positions of the commands in its own table, so RL.* would
  // be sent to a random cluster node. A command that names its key is routed by slot,
  // alone or in a pipeline.
  class KeyedCommand extends Command {
    constructor({ args: [name, ...rest], key }) {
      super(name, rest, { replyEncoding: 'utf8' });
      this.rlKey = key;
    }

    getKeys() {
      return this.rlKey === undefined ? [] : [this.rlKey];
    }
  }

  const send = async (cmd) => {
    const command = new KeyedCommand(cmd);
    client.sendCommand(command);
    return command.promise;
  };

  // A cluster pipeline must stay within one slot, so there is one pipeline per slot.
  const batch = async (cmds) => {
    const groups = new Map();
    cmds.forEach((cmd, i) => {
      const group = client.isCluster && cmd.key !== undefined ? calculateSlot(cmd.key) : -1;
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(i);
    });
    const results = new Array(cmds.length);
    await Promise.all([...groups.values()].map(async (indexes) => {
      const pipeline = client.pipeline();
      for (const i of indexes) pipeline.sendCommand(new KeyedCommand(cmds[i]));
      try {
        const replies = await pipeline.exec();
        replies.forEach(([err, value], j) => {
          results[indexes[j]] = err ? { status: 'rejected', reason: err } : { status: 'fulfilled', value };
        });
      } catch (err) {
        for (const i of indexes) results[i] = { status: 'rejected', reason: err };
      }
    }));
    return results;
  };

  return { send, batch };
}

/**
 * Options for node-redis `createClient` (or `createCluster({ defaults })`) that keep a
 * dead or silent Redis from holding requests: short timeouts, no offline queue, capped
 * reconnect backoff.
 * @param {object} [overrides] merged over the defaults (one level deep for `socket` and `commandOptions`)
 */
export function nodeRedisOptions(overrides = {}) {
  return {
    disableOfflineQueue: true,
    ...overrides,
    socket: {
      connectTimeout: 1000,
      reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 2000),
      ...overrides.socket,
    },
    commandOptions: { timeout: 500, ...overrides.commandOptions },
  };
}

/**
 * The same for ioredis `new Redis(...)` (or `redisOptions` of `new Redis.Cluster`).
 * @param {object} [overrides]
 */
export function ioredisOptions(overrides = {}) {
  return {
    connectTimeout: 1000,
    commandTimeout: 500,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(50 * 2 ** times, 2000),
    ...overrides,
  };
}

/**
 * Options for ioredis `new Redis.Cluster(nodes, options)`. The cluster-level offline
 * queue stays on: ioredis connects to each node lazily, and with the queue off a
 * command for a node that is still connecting is retried on a random node, which
 * answers MOVED. The kit's own timeout bounds how long a request can wait in it.
 * @param {object} [overrides] merged over the defaults (`redisOptions` one level deep)
 */
export function ioredisClusterOptions(overrides = {}) {
  return {
    enableOfflineQueue: true,
    slotsRefreshTimeout: 1000,
    clusterRetryStrategy: (times) => Math.min(50 * 2 ** times, 2000),
    ...overrides,
    redisOptions: ioredisOptions(overrides.redisOptions),
  };
}
