// redis-rl/express-rate-limit: a Store for express-rate-limit 7 and 8. The module decides
// (sliding counter by default); the store reports that decision as totalHits, so the
// library's own headers, Retry-After and 429 follow. Failures are thrown to the library,
// whose `passOnStoreError` is the failure policy.
import { asHits, limitFor, makeLimiter, tagged, usedBefore } from './core.js';

const WHO = 'redis-rl/express-rate-limit';

export class RedisRlStore {
  /** Keys live in Redis, shared by every process (express-rate-limit's validations ask). */
  localKeys = false;
  #adapter;
  #limit;
  #fixedLimit;
  #windowMs;

  /**
   * @param {{ client: unknown, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed', burst?: number,
   *   prefix?: string, shadow?: boolean, onShadow?: Function, onError?: Function, timeout?: number,
   *   clock?: () => number }} options
   */
  constructor({ prefix = 'rl:erl:', failure, ...options } = {}) {
    if (failure !== undefined) {
      throw new TypeError(`${WHO}: the failure policy is express-rate-limit's passOnStoreError (true: allow while Redis fails), not a store option`);
    }
    this.#adapter = makeLimiter(WHO, options, 'library');
    this.prefix = prefix;
  }

  /** The requests that shadow mode let through although the module denied them. */
  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  init(options) {
    // A limit per request can't be known here, and the module needs it with the key.
    if (typeof options.limit !== 'number') {
      throw new TypeError(`${WHO}: limit must be a number (a function of the request is not supported: use one rateLimit() per limit)`);
    }
    this.#fixedLimit = options.limit;
    this.#windowMs = options.windowMs;
    this.#limit = limitFor(this.#adapter, 'erl', options.limit, options.windowMs, (key) => tagged(this.prefix, key));
  }

  #policy() {
    if (!this.#limit) throw new Error(`${WHO}: the store was not initialised by express-rate-limit (see the error logged at start-up)`);
    return this.#limit;
  }

  async increment(key) {
    const limit = this.#policy();
    const { hits, ms } = asHits(this.#adapter, await this.#adapter.rl.check(limit, key), this.#fixedLimit);
    // express-rate-limit derives Retry-After and the reset header from resetTime.
    return { totalHits: hits, resetTime: new Date(Date.now() + ms) };
  }

  /** skipFailedRequests / skipSuccessfulRequests: the module gives the unit back (REFUND). */
  async decrement(key) {
    const d = await this.#adapter.rl.refund(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
  }

  async resetKey(key) {
    const d = await this.#adapter.rl.reset(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
  }

  /** The state without spending (PEEK); undefined when the key has no hits. */
  async get(key) {
    const d = await this.#adapter.rl.peek(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
    const totalHits = usedBefore(d, this.#fixedLimit);
    if (totalHits === 0) return undefined;
    return { totalHits, resetTime: new Date(Date.now() + d.resetAfter) };
  }
}

export default RedisRlStore;
