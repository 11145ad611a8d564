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
// 90 s in all). For our storage those waits step its clock instead (the NOW it sends),
// so the run takes seconds. Each storage's clock reads a minute boundary at its first
// call, so where the module's windows start (they are aligned to the clock) is the same
// on every run and for every app, whatever the time of day and however long the app took
// to start. RL_UPSTREAM_REALTIME=1 keeps the real waits and the server's clock (the stock
// storage always runs so: it reads the server's clock).
const virtual = !stock && !process.env.RL_UPSTREAM_REALTIME;
const START = 1718609340000;
let offset = 0;
function clockFrom() {
  let first; // [Date.now(), offset] at the first reading
  return () => {
    // One reading of Date.now(): two could straddle a millisecond and move the first
    // call off the window's start (a test's answer would then depend on the machine's load).
    const wall = Date.now();
    first ??= [wall, offset];
    return START + (wall - first[0]) + (offset - first[1]);
  };
}
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
    clock: virtual ? clockFrom() : undefined,
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
