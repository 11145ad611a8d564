// Stands in for express-rate-limit's `./memory-store.js` (jest moduleNameMapper), so every
// rateLimit() in the library's own tests that takes the default store gets a Redis-backed
// one on the test server instead:
//   RL_UPSTREAM_STORE=ours   redis-rl's RedisRlStore (RL_UPSTREAM_ALGORITHM, default slidecount)
//   RL_UPSTREAM_STORE=stock  rate-limit-redis, the library's stock Redis store (the control)
// Each instance gets its own prefix: the tests expect every rateLimit() to start empty.
// The clock is the test's Date.now (jest's fake timers move it), sent to the module as NOW.
import { createClient } from 'redis';
import { RedisRlStore } from '../../src/adapters/express-rate-limit.js';

const client = createClient({ url: process.env.RL_UPSTREAM_URL });
await client.connect();
// The test file's process must be free to exit with the connection still open.
client.unref?.();

const stock = process.env.RL_UPSTREAM_STORE === 'stock';
const { RedisStore } = stock
  ? await import(process.env.RL_UPSTREAM_STOCK_STORE ?? 'rate-limit-redis')
  : {};
let instances = 0;
const prefix = (what) => `${what}:${process.pid}:${Date.now()}:${++instances}:`;

function storeFor() {
  if (stock) return new RedisStore({ sendCommand: (...args) => client.sendCommand(args), prefix: prefix('rlr') });
  return new RedisRlStore({
    client,
    prefix: prefix('rl:erl'),
    algorithm: process.env.RL_UPSTREAM_ALGORITHM || undefined,
    clock: () => Date.now(),
    // On a busy machine the first call (connect, find the backend) can outlast the
    // default 300 ms; a slow reply still fails its test, never passes it.
    timeout: 5000,
  });
}

// `new MemoryStore(validations)` in rate-limit.ts: returning an object from a constructor
// makes `new` yield it.
export function MemoryStore() {
  return storeFor();
}
// express-rate-limit 7 imports it as the default export.
export default MemoryStore;
