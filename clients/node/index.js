// redis-rl for Node.js: the module's RL.* commands on node-redis or ioredis, standalone
// or cluster, with headers, an explicit failure policy, an opt-in deny cache and an
// Express/Connect middleware. Types: index.d.ts.
export { RateLimiter, createRateLimiter, TimeoutError, RedisCommandError, RateLimitConfigError } from './src/limiter.js';
export { assertLimits as validateLimits } from './src/commands.js';
export { rateLimitHeaders } from './src/headers.js';
export { nodeRedisOptions, ioredisOptions, ioredisClusterOptions } from './src/clients.js';
