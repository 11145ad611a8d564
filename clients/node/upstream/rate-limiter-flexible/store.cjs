// What `require('../lib/RateLimiterRedis')` returns in the upstream tests when the store
// under test is ours: redis-rl's adapter, taking RateLimiterRedis's options as they are.
const { RateLimiterRedisRl } = require(process.env.RLFLEX_ADAPTER);

const algorithm = process.env.RLFLEX_ALGORITHM;

class RateLimiterRedis extends RateLimiterRedisRl {
  constructor(opts = {}) {
    super(algorithm ? { algorithm, ...opts } : opts);
  }
}

module.exports = RateLimiterRedis;
