// Stands in for @nestjs/throttler's `./throttler.service` (jest moduleNameMapper), so the
// library's own ThrottlerModule (which builds `new ThrottlerStorageService()` when no
// storage is given) and its storage spec get a Redis-backed storage on the test server:
//   RL_UPSTREAM_STORE=ours   redis-rl's RedisRlThrottlerStorage (RL_UPSTREAM_ALGORITHM,
//                            default slidecount), as an app loads it: require('redis-rl/nestjs')
//   RL_UPSTREAM_STORE=stock  @nest-lab/throttler-storage-redis, the Redis storage Nest's
//                            docs point to (the control)
// The guard, the module and the decorators stay the library's own.
const Redis = require('ioredis');

const stock = process.env.RL_UPSTREAM_STORE === 'stock';
const url = process.env.RL_UPSTREAM_URL;

// Each instance gets its own key prefix: the tests expect every app (one per describe,
// Express then Fastify, with the same throttler keys) to start empty, as the in-memory
// storage does.
let instances = 0;
const prefix = () => `${process.pid}:${Date.now()}:${++instances}:`;

// The tests wait with `setTimeout` from node:timers/promises (up to 20 s each; about
// 90 s in all). For our storage on the algorithms that decide at NOW alone, those waits
// step its clock instead (the NOW it sends), so the run takes seconds. RL.COUNTER
// (algorithm 'counter') ends a window when its key expires on the server clock, which a
// step does not move, so it waits for real, as the stock storage does (it reads the
// server's clock); so does RL_UPSTREAM_REALTIME=1.
const virtual = !stock && !process.env.RL_UPSTREAM_REALTIME && process.env.RL_UPSTREAM_ALGORITHM !== 'counter';
let offset = 0;
if (virtual) {
  const timers = require('node:timers/promises');
  // One worker runs several test files, each loading this file anew: wrap the original.
  const REAL = Symbol.for('redis-rl.upstream.setTimeout');
  timers[REAL] ??= timers.setTimeout;
  timers.setTimeout = async (ms = 1, value) => {
    offset += Number(ms);
    await timers[REAL](0);
    return value;
  };
}

let client;
const connection = () => {
  client ??= new Redis(url, { lazyConnect: false });
  return client;
};
// Jest tears the test file's module registry down without a hook here; the workers exit
// with --forceExit.

function storageFor() {
  if (stock) {
    const { ThrottlerStorageRedisService } = require('@nest-lab/throttler-storage-redis');
    const inner = new ThrottlerStorageRedisService(url);
    const p = prefix();
    return {
      increment: (key, ...rest) => inner.increment(`nl:${p}${key}`, ...rest),
      onModuleDestroy: () => inner.onModuleDestroy(),
    };
  }
  const { RedisRlThrottlerStorage } = require('redis-rl/nestjs');
  return new RedisRlThrottlerStorage({
    client: connection(),
    failure: 'closed',
    // The first call connects and finds the backend; on a busy machine that can take more
    // than the default 300 ms. A slow reply still fails its test (503), never passes it.
    timeout: 5000,
    prefix: `rl:nest:${prefix()}`,
    algorithm: process.env.RL_UPSTREAM_ALGORITHM || undefined,
    clock: virtual ? () => Date.now() + offset : undefined,
  });
}

// `new ThrottlerStorageService()` in throttler.providers.ts, and `useClass` in the spec:
// returning an object from a constructor makes `new` yield it.
class ThrottlerStorageService {
  constructor() {
    return storageFor();
  }
}

module.exports = { ThrottlerStorageService };
