// redis-rl/nestjs: a ThrottlerStorage for @nestjs/throttler 6
// (`ThrottlerModule.forRoot({ throttlers, storage: new RedisRlThrottlerStorage({...}) })`).
// The guard calls increment(key, ttl, limit, blockDuration, name) once per throttler;
// the module decides, and the record says so: isBlocked on a denial, with
// timeToBlockExpire = the module's retry, so the guard's Retry-After is right.
//
// @nestjs/throttler has no failure switch of its own, so the store takes the kit's:
// `failure: 'open'` lets requests through while Redis fails, `'closed'` answers 503.
import { createRequire } from 'node:module';
import { asHits, limitFor, makeLimiter, tagged } from './core.js';

const WHO = 'redis-rl/nestjs';
const require = createRequire(import.meta.url);

const seconds = (ms) => Math.ceil(ms / 1000);

export class RedisRlThrottlerStorage {
  #adapter;
  #prefix;
  #failure;

  /**
   * @param {{ client: unknown, failure: 'open'|'closed', algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed',
   *   burst?: number, prefix?: string, shadow?: boolean, onShadow?: Function, onError?: Function,
   *   timeout?: number, clock?: () => number }} options
   */
  constructor({ failure, prefix = 'rl:nest:', ...options } = {}) {
    if (failure !== 'open' && failure !== 'closed') {
      throw new TypeError(`${WHO}: choose a failure policy: failure: 'open' (allow while Redis fails) or 'closed' (answer 503)`);
    }
    this.#adapter = makeLimiter(WHO, options, failure);
    this.#prefix = prefix;
    this.#failure = failure;
  }

  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  async increment(key, ttl, limit, blockDuration, throttlerName) {
    // The guard passes blockDuration = ttl when none is configured. Any other value asks
    // for a block the module does not keep (a denial spends nothing and stores nothing).
    if (blockDuration > 0 && blockDuration !== ttl) {
      throw new Error(`${WHO}: throttler "${throttlerName}" sets blockDuration ${blockDuration} ms; redis-rl denies exactly until the module admits again and keeps no block: remove blockDuration`);
    }
    const policy = limitFor(this.#adapter, throttlerName, limit, ttl, tagged(this.#prefix, key));
    const decision = await this.#adapter.rl.check(policy, key);
    if (decision.source === 'failure') {
      if (this.#failure === 'open') return { totalHits: 0, timeToExpire: 0, isBlocked: false, timeToBlockExpire: 0 };
      const { ServiceUnavailableException } = require('@nestjs/common');
      throw new ServiceUnavailableException('rate limiter unavailable');
    }
    const { hits, allowed, ms } = asHits(this.#adapter, decision, limit);
    return {
      totalHits: hits,
      timeToExpire: seconds(decision.resetAfter),
      isBlocked: !allowed,
      timeToBlockExpire: allowed ? 0 : seconds(ms),
    };
  }
}

export default RedisRlThrottlerStorage;
