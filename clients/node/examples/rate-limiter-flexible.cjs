// rlflex.js: rate-limiter-flexible's RateLimiterRedis, decided by the redis-rl module.
// npm install ./redis-rl-0.1.0.tgz rate-limiter-flexible ioredis, then node rlflex.js.
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
const Redis = require('ioredis');
const { RateLimiterRedisRl } = require('redis-rl/rate-limiter-flexible');

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

// RateLimiterRedis's options, unchanged: 2 attempts a minute, then 5 minutes blocked.
const limiter = new RateLimiterRedisRl({ storeClient: redis, keyPrefix: 'login', points: 2, duration: 60, blockDuration: 300 });

async function main() {
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      const res = await limiter.consume('user-42');
      console.log(`attempt ${attempt}: allowed, ${res.remainingPoints} left`);
    } catch (rejection) {
      if (rejection instanceof Error) throw rejection; // Redis failed and no insuranceLimiter is set
      console.log(`attempt ${attempt}: refused, retry in ${Math.round(rejection.msBeforeNext / 1000)} s`);
    }
  }
  redis.disconnect();
}

main();
