// redis-rl/nestjs: a ThrottlerStorage for @nestjs/throttler 6
// (`ThrottlerModule.forRoot({ throttlers, storage: new RedisRlThrottlerStorage({...}) })`).
// The guard calls increment(key, ttl, limit, blockDuration, name) once per throttler;
// the module decides, and the record says so: isBlocked on a denial, with
// timeToBlockExpire = the module's retry, so the guard's Retry-After is right.
//
// @nestjs/throttler has no failure switch of its own, so the store takes the kit's:
// `failure: 'open'` lets requests through while Redis fails, `'closed'` answers 503.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { asHits, limitFor, makeLimiter, tagged } from './core.js';

const WHO = 'redis-rl/nestjs';
const require = createRequire(import.meta.url);

const seconds = (ms) => Math.ceil(ms / 1000);

// RedisRlThrottlerGuard runs the stock guard twice per request: once to learn which
// throttlers apply and with what (the storage only records), then, after one RL.ALL
// over all of them, to set the headers and throw from the module's records. The phase
// travels with the request's async context, so concurrent requests don't mix.
const phase = new AsyncLocalStorage();
const NOT_BLOCKED = { totalHits: 0, timeToExpire: 0, isBlocked: false, timeToBlockExpire: 0 };

export class RedisRlThrottlerStorage {
  #adapter;
  #prefix;
  #failure;

  /**
   * @param {{ client: unknown, failure: 'open'|'closed', algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed'|'counter',
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

  #policy(key, ttl, limit, blockDuration, throttlerName, tag) {
    const redisKey = tag === undefined ? tagged(this.#prefix, key) : `${tagged(this.#prefix, tag)}:${key}`;
    const policy = limitFor(this.#adapter, throttlerName, limit, ttl, redisKey);
    // The stock storages block for blockDuration from the denial, and the guard passes
    // blockDuration = ttl when none is configured: every positive blockDuration is the
    // module's penalty box (BLOCK). Once the throttler denies, every request is denied
    // for blockDuration, spending nothing, and the retry is the block's end (the stock
    // storage's isBlocked/timeToBlockExpire). 0 (which @nestjs/throttler 6.7 passes as
    // given) is its in-memory storage's "no block": the module's own retry is the wait.
    if (blockDuration !== undefined && blockDuration !== 0) {
      if (!Number.isInteger(blockDuration) || blockDuration < 1) {
        throw new TypeError(`${WHO}: throttler "${throttlerName}": blockDuration must be a positive number of milliseconds, got ${blockDuration}`);
      }
      policy.block = `${blockDuration}ms`;
    }
    return policy;
  }

  #failed() {
    if (this.#failure === 'open') return NOT_BLOCKED;
    const { ServiceUnavailableException } = require('@nestjs/common');
    throw new ServiceUnavailableException('rate limiter unavailable');
  }

  #record(decision, limit) {
    const { hits, allowed, ms } = asHits(this.#adapter, decision, limit);
    return {
      totalHits: hits,
      timeToExpire: seconds(decision.resetAfter),
      isBlocked: !allowed,
      timeToBlockExpire: allowed ? 0 : seconds(ms),
    };
  }

  async increment(key, ttl, limit, blockDuration, throttlerName) {
    const current = phase.getStore();
    if (current?.storage === this) {
      if (current.records) return current.records.shift();
      current.calls.push([key, ttl, limit, blockDuration, throttlerName]);
      return NOT_BLOCKED;
    }
    const decision = await this.#adapter.rl.check(this.#policy(key, ttl, limit, blockDuration, throttlerName), key, { shadow: this.#adapter.shadow });
    if (decision.source === 'failure') return this.#failed();
    return this.#record(decision, limit);
  }

  /**
   * @internal for RedisRlThrottlerGuard: all of a request's throttlers in one RL.ALL, keyed
   * under the first one's key as the hash tag (one cluster slot).
   */
  async _incrementAll(calls) {
    const tag = calls[0][0];
    const policies = calls.map(([key, ttl, limit, blockDuration, name]) => this.#policy(key, ttl, limit, blockDuration, name, tag));
    const decision = await this.#adapter.rl.check(policies, tag, { shadow: this.#adapter.shadow });
    if (decision.source === 'failure') return calls.map(() => this.#failed());
    if (decision.allowed) return decision.limits.map((d, i) => this.#record({ ...d, limits: [d], source: 'redis' }, calls[i][2]));
    const shadow = this.#adapter.shadow;
    if (shadow) this.#adapter.rl.shadowed(decision, { keys: decision.limits.map((d) => d.key) });
    // All or nothing: none spent. An admitting throttler shows its state without this
    // request (its reply counted it); a denying one is blocked until its retry (or, in
    // shadow mode, shows 0 left and passes).
    return decision.limits.map((d, i) => {
      const limit = calls[i][2];
      const retry = Number.isFinite(d.retryAfter) ? d.retryAfter : d.resetAfter;
      if (d.allowed || shadow) {
        return { totalHits: d.allowed ? limit - d.remaining - 1 : limit, timeToExpire: seconds(d.resetAfter), isBlocked: false, timeToBlockExpire: 0 };
      }
      return { totalHits: limit + 1, timeToExpire: seconds(d.resetAfter), isBlocked: true, timeToBlockExpire: seconds(retry) };
    });
  }
}

/**
 * ThrottlerGuard whose throttlers are one RL.ALL per request: a request one throttler
 * denies spends nothing on the others. Use it instead of ThrottlerGuard, with
 * RedisRlThrottlerStorage as the module's storage.
 */
export function redisRlThrottlerGuard() {
  const { ThrottlerGuard } = require('@nestjs/throttler');
  return class RedisRlThrottlerGuard extends ThrottlerGuard {
    async canActivate(context) {
      const storage = this.storageService;
      if (!(storage instanceof RedisRlThrottlerStorage)) {
        throw new Error(`${WHO}: RedisRlThrottlerGuard needs RedisRlThrottlerStorage as the throttler storage`);
      }
      const state = { storage, calls: [] };
      // Pass 1: which throttlers apply to this request, with which key, limit and ttl.
      await phase.run(state, () => super.canActivate(context));
      if (!state.calls.length) return true;
      state.records = await storage._incrementAll(state.calls);
      // Pass 2: the stock guard sets its headers and throws from the module's records.
      return phase.run(state, () => super.canActivate(context));
    }

    // Pass 1 only learns: its placeholder records must not reach the response.
    setResponseHeader(res, name, value) {
      if (phase.getStore()?.records) super.setResponseHeader(res, name, value);
    }
  };
}

export default RedisRlThrottlerStorage;
