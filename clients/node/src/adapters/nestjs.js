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
import { adapt } from '../clients.js';
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

// blockDuration ≠ ttl: once a throttler denies, the tracker stays blocked for
// blockDuration (the stock storage's isBlocked / blockExpiresAt), whatever the counter
// says. The block is a key next to the limiter's, in its hash slot, holding the block's
// end (ms, on the storage's clock) and expiring with it: read before the module is
// asked, written when the module denies. A blocked request spends nothing.
const blockKey = (policy) => `${policy.key}:block`;

export class RedisRlThrottlerStorage {
  #adapter;
  #prefix;
  #failure;
  #raw;

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
    this.#raw = adapt(options.client);
    this.#prefix = prefix;
    this.#failure = failure;
  }

  // The block's remaining ms for these policies (0: none), in one round trip.
  async #blocked(policies) {
    const keys = policies.map(blockKey);
    const ends = await this.#raw.send({ args: ['MGET', ...keys], key: keys[0] });
    const now = this.#adapter.rl.clock();
    return ends.map((end) => Math.max(0, Number(end ?? 0) - now));
  }

  async #block(policy) {
    const end = this.#adapter.rl.clock() + policy.blockMs;
    await this.#raw.send({ args: ['SET', blockKey(policy), String(end), 'PX', String(policy.blockMs), 'NX'], key: blockKey(policy) });
  }

  #blockedRecord(limit, ms) {
    return { totalHits: limit + 1, timeToExpire: seconds(ms), isBlocked: true, timeToBlockExpire: seconds(ms) };
  }

  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  #policy(key, ttl, limit, blockDuration, throttlerName, tag) {
    const redisKey = tag === undefined ? tagged(this.#prefix, key) : `${tagged(this.#prefix, tag)}:${key}`;
    const policy = limitFor(this.#adapter, throttlerName, limit, ttl, redisKey);
    // The guard passes blockDuration = ttl when none is configured: the module's own
    // retry is then the block. Any other value is a block of that length.
    if (blockDuration !== undefined && blockDuration !== ttl) {
      if (!Number.isInteger(blockDuration) || blockDuration < 1) {
        throw new TypeError(`${WHO}: throttler "${throttlerName}": blockDuration must be a positive number of milliseconds, got ${blockDuration}`);
      }
      policy.blockMs = blockDuration;
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
    const policy = this.#policy(key, ttl, limit, blockDuration, throttlerName);
    if (policy.blockMs === undefined) {
      const decision = await this.#adapter.rl.check(policy, key);
      if (decision.source === 'failure') return this.#failed();
      return this.#record(decision, limit);
    }
    return (await this.#withBlocks([policy], [limit], (ps) => this.#adapter.rl.check(ps[0], key).then((d) => [d, [d]])))[0];
  }

  // The throttlers that have a block: blocked ones answer at once; otherwise `decide`
  // asks the module for all of them and a denial starts each denying one's block.
  async #withBlocks(policies, limits, decide) {
    const withBlock = policies.filter((p) => p.blockMs !== undefined);
    let left;
    try {
      left = await this.#blocked(withBlock);
    } catch {
      return policies.map(() => this.#failed());
    }
    if (left.some((ms) => ms > 0)) {
      // While blocked, nothing is spent: the other throttlers show what a request would get.
      return policies.map((p, i) => {
        const ms = p.blockMs === undefined ? 0 : left[withBlock.indexOf(p)];
        return ms > 0 ? this.#blockedRecord(limits[i], ms) : { ...NOT_BLOCKED, totalHits: 0 };
      });
    }
    const [decision, perLimit] = await decide(policies);
    if (decision.source === 'failure') return policies.map(() => this.#failed());
    const records = perLimit.map((d, i) => this.#record({ ...d, limits: d.limits ?? [d], source: 'redis' }, limits[i]));
    if (decision.allowed || this.#adapter.shadow) return records;
    await Promise.all(policies.map((p, i) => (p.blockMs !== undefined && !perLimit[i].allowed ? this.#block(p) : null)));
    return records.map((r, i) => (policies[i].blockMs !== undefined && !perLimit[i].allowed ? this.#blockedRecord(limits[i], policies[i].blockMs) : r));
  }

  /**
   * @internal for RedisRlThrottlerGuard: all of a request's throttlers in one RL.ALL, keyed
   * under the first one's key as the hash tag (one cluster slot).
   */
  async _incrementAll(calls) {
    const tag = calls[0][0];
    const policies = calls.map(([key, ttl, limit, blockDuration, name]) => this.#policy(key, ttl, limit, blockDuration, name, tag));
    if (policies.some((p) => p.blockMs !== undefined)) {
      return this.#withBlocks(policies, calls.map((c) => c[2]), async (ps) => {
        const d = await this.#adapter.rl.check(ps, tag);
        return [d, d.source === 'failure' ? [] : d.limits.map((l) => ({ ...l, limits: [l] }))];
      });
    }
    const decision = await this.#adapter.rl.check(policies, tag);
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
