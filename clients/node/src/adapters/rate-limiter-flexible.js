// redis-rl/rate-limiter-flexible: RateLimiterRedisRl takes RateLimiterRedis's options
// (storeClient, points, duration, keyPrefix, insuranceLimiter) and answers consume, get,
// delete, reward and penalty with the module's decision. It extends the library's
// RateLimiterInsuredAbstract, so RateLimiterUnion, BurstyRateLimiter and
// RLWrapperBlackAndWhite take it, and a Redis failure goes to `insuranceLimiter` when
// one is set (else the promise rejects with the error, as RateLimiterRedis does).
//
// RateLimiterUnionRl is the atomic union: its limiters are one RL.ALL, all or nothing.
import { createRequire } from 'node:module';
import { asHits, limitFor, makeLimiter, tagged, usedBefore } from './core.js';

const WHO = 'redis-rl/rate-limiter-flexible';
const require = createRequire(import.meta.url);
const RateLimiterInsuredAbstract = require('rate-limiter-flexible/lib/RateLimiterInsuredAbstract.js');
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes.js');

// Options of RateLimiterRedis that assume denied requests are counted, or that change
// the decision outside the store: refused, never silently ignored.
const REFUSED = {
  blockDuration: 'blocks a key after it overflows, counting denied requests; redis-rl stores nothing on a denial',
  inMemoryBlockOnConsumed: 'counts consumed points past the limit; redis-rl never goes past it',
  inMemoryBlockDuration: 'needs inMemoryBlockOnConsumed',
  blockOnConsumed: 'counts consumed points past the limit; redis-rl never goes past it',
  execEvenly: 'delays admitted requests from the fixed window\'s numbers',
  customIncrTtlLuaScript: 'is a Lua script; redis-rl loads no scripts',
};

export class RateLimiterRedisRl extends RateLimiterInsuredAbstract {
  #adapter;

  /**
   * @param {{ storeClient: unknown, points: number, duration: number, keyPrefix?: string,
   *   insuranceLimiter?: object, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed', burst?: number,
   *   shadow?: boolean, onShadow?: Function, onError?: Function, timeout?: number, clock?: () => number }} opts
   */
  constructor(opts = {}) {
    for (const [name, why] of Object.entries(REFUSED)) {
      if (opts[name]) throw new Error(`${WHO}: option '${name}' ${why}; remove it`);
    }
    if (opts.failure !== undefined) {
      throw new TypeError(`${WHO}: the failure policy is rate-limiter-flexible's insuranceLimiter (or the rejected promise), not a 'failure' option`);
    }
    super(opts);
    if (!(opts.duration > 0)) throw new Error(`${WHO}: duration must be positive (0, "never expires", has no window to slide)`);
    this.#adapter = makeLimiter(WHO, { ...opts, client: opts.storeClient }, 'library');
    this.policy = limitFor(this.#adapter, this.keyPrefix || 'rlflx', this.points, Math.round(this.duration * 1000),
      (key) => tagged(this.keyPrefix ? `${this.keyPrefix}:` : '', key));
  }

  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  #refuseCustomDuration(options) {
    if (options?.customDuration !== undefined) throw new Error(`${WHO}: customDuration is not supported: make one limiter per duration`);
  }

  /** @internal The module's decision for `points`, as a RateLimiterRes to resolve or reject. */
  _settle(decision, points) {
    const { allowed, ms } = asHits(this.#adapter, decision, this.points, points);
    const consumed = allowed ? this.points - decision.remaining : this.points - decision.remaining + points;
    const res = new RateLimiterRes(decision.remaining, ms, consumed, allowed && consumed === points);
    return { allowed, res };
  }

  async _consume(key, points = 1, options = {}) {
    this.#refuseCustomDuration(options);
    const { allowed, res } = this._settle(await this.#adapter.rl.check(this.policy, key, { cost: points }), points);
    if (!allowed) throw res;
    return res;
  }

  /** Gives `points` back (REFUND): never below an empty limiter. */
  async _reward(key, points = 1, options = {}) {
    this.#refuseCustomDuration(options);
    const d = await this.#adapter.rl.refund(this.policy, key, { cost: points });
    if (d.source === 'failure') throw d.error;
    return this.#resOfPeek(d);
  }

  /**
   * Spends `points` without a rejection. The module never counts past the limit, so a
   * penalty larger than what is left spends what is left (the key is then exhausted).
   */
  async _penalty(key, points = 1, options = {}) {
    this.#refuseCustomDuration(options);
    const peek = await this.#adapter.rl.peek(this.policy, key);
    if (peek.source === 'failure') throw peek.error;
    const left = peek.allowed ? peek.remaining + 1 : 0;
    const cost = Math.min(points, left);
    if (cost > 0) {
      const d = await this.#adapter.rl.check(this.policy, key, { cost });
      if (d.source === 'failure') throw d.error;
    }
    return this.#resOfPeek(await this.#adapter.rl.peek(this.policy, key));
  }

  async _get(key, options = {}) {
    this.#refuseCustomDuration(options);
    const d = await this.#adapter.rl.peek(this.policy, key);
    if (d.source === 'failure') throw d.error;
    if (usedBefore(d, this.points) === 0) return null;
    return this.#resOfPeek(d);
  }

  async _delete(key) {
    const [before, reset] = await this.#adapter.rl.batch([
      { limits: this.policy, identity: key, mode: 'PEEK' },
      { limits: this.policy, identity: key, mode: 'RESET' },
    ]);
    for (const d of [before, reset]) if (d.source === 'failure') throw d.error;
    return usedBefore(before, this.points) > 0;
  }

  _set() {
    throw new Error(`${WHO}: set() writes a raw counter; redis-rl's state is the module's: use delete(), reward() or penalty()`);
  }

  _block() {
    throw new Error(`${WHO}: block() stores a block the module does not keep; use penalty() to exhaust a key`);
  }

  #resOfPeek(d) {
    const consumed = usedBefore(d, this.points);
    return new RateLimiterRes(this.points - consumed, d.resetAfter, consumed, false);
  }

  /** @internal for RateLimiterUnionRl */
  get _adapter() {
    return this.#adapter;
  }
}

/**
 * RateLimiterUnion's shape (resolve/reject with an object keyed by keyPrefix), but all
 * limiters are one RL.ALL: either all spend or none does. When Redis fails and every
 * limiter has an insuranceLimiter, a RateLimiterUnion of those decides (give them
 * distinct keyPrefixes, as for RateLimiterUnion). RateLimiterUnion itself also
 * takes RateLimiterRedisRl, and then spends each one separately, as it does for others.
 */
export class RateLimiterUnionRl {
  #limiters;

  constructor(...limiters) {
    if (!limiters.length) throw new Error(`${WHO}: RateLimiterUnionRl needs at least one limiter`);
    if (!limiters.every((l) => l instanceof RateLimiterRedisRl)) {
      throw new Error(`${WHO}: RateLimiterUnionRl takes RateLimiterRedisRl limiters (use the library's RateLimiterUnion for others)`);
    }
    this.#limiters = limiters;
  }

  async consume(key, points = 1) {
    const [first] = this.#limiters;
    const decision = await first._adapter.rl.check(this.#limiters.map((l) => l.policy), key, { cost: points });
    if (decision.source === 'failure') {
      // Redis could not decide: the limiters' insurance limiters do, as a union of their own.
      const insurance = this.#limiters.map((l) => l.insuranceLimiter);
      if (!insurance.every(Boolean)) throw decision.error;
      const { RateLimiterUnion } = require('rate-limiter-flexible');
      return new RateLimiterUnion(...insurance).consume(key, points);
    }
    // Shadow mode is the union's (its first limiter's): a would-be denial passes,
    // reported once, having spent nothing, like a single limiter's.
    const shadow = !decision.allowed && first._adapter.shadow;
    if (shadow) first._adapter.rl.shadowed(decision, { keys: decision.limits.map((d) => d.key) });
    const result = {};
    this.#limiters.forEach((limiter, i) => {
      const one = decision.limits[i];
      const consumed = limiter.points - one.remaining + (one.allowed && decision.allowed ? 0 : points);
      const ms = one.allowed ? one.resetAfter : (Number.isFinite(one.retryAfter) ? one.retryAfter : one.resetAfter);
      // As RateLimiterUnion: on a denial, only the limiters that denied are in the result.
      if (decision.allowed || shadow || !one.allowed) {
        result[limiter.keyPrefix] = new RateLimiterRes(one.remaining, ms, shadow ? Math.min(consumed, limiter.points) : consumed, false);
      }
    });
    if (!decision.allowed && !shadow) throw result;
    return result;
  }
}

export default RateLimiterRedisRl;
