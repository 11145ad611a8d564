// throttle.mjs: RL.THROTTLE (redis-cell's CL.THROTTLE) and the concurrency calls.
// node throttle.mjs (Redis with the module on REDIS_URL).
import { Redis } from 'ioredis';
import { createRateLimiter, ioredisOptions } from 'redis-rl';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', ioredisOptions());
const rl = createRateLimiter({ client: redis, failure: 'closed' });
await new Promise((ready) => redis.once('ready', ready)); // calls before that fail by policy

for (let i = 0; i < 3; i++) console.log(JSON.stringify(await rl.throttle('user123', { maxBurst: 1, count: 30, period: 60 })));
const jobs = { name: 'jobs', algorithm: 'concurrency', limit: 1, window: 120 };
const { allowed, remaining } = await rl.acquire(jobs, 'customer-7', 'job-1');
const full = await rl.acquire(jobs, 'customer-7', 'job-2');
console.log(JSON.stringify({ allowed, remaining }), JSON.stringify({ allowed: full.allowed, retryAfter: full.retryAfter }));
await rl.release(jobs, 'customer-7', 'job-1');
console.log((await rl.acquire(jobs, 'customer-7', 'job-2')).allowed);
redis.disconnect();
