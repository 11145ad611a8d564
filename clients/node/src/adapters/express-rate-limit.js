// redis-rl/express-rate-limit: a Store for express-rate-limit 7 and 8. The module decides
// (sliding counter by default); the store reports that decision as totalHits, so the
// library's own headers, Retry-After and 429 follow. Failures are thrown to the library,
// whose `passOnStoreError` is the failure policy.
//
// A `limit` that is a function of the request (or 0) is only known to the library after
// the store has counted: express-rate-limit calls increment(key) first, then the
// function, then compares. For those the store counts every request (as the stock stores
// do, denied ones included) and the library compares: the module's algorithm still
// decides what "the requests in the window" are.
import { unlinkMatching } from '../clients.js';
import { asHits, limitFor, makeLimiter, tagged, taggedGlob, usedBefore } from './core.js';

const WHO = 'redis-rl/express-rate-limit';

// The budget of a counting limit: the largest the algorithm takes, never reached in
// practice, so the module admits and its `remaining` says how many requests the window holds.
function countingBudget(algorithm, windowMs) {
  if (algorithm === 'slidelog') return 1_000_000;
  if (algorithm === 'gcra') return Math.min(1_000_000_000, windowMs * 1000);
  return 1_000_000_000;
}

// Options of the stock stores (rate-limit-redis) that mean something else here, refused
// when the store is built rather than silently ignored.
const REFUSED = {
  sendCommand: 'is rate-limit-redis\'s; pass the connection as `client` (node-redis or ioredis)',
  sendCommandCluster: 'is rate-limit-redis\'s; pass the cluster connection as `client` (node-redis or ioredis)',
};
const KNOWN = new Set(['client', 'algorithm', 'burst', 'prefix', 'shadow', 'onShadow', 'onError', 'timeout', 'clock', 'failure', 'backend', 'secret', 'metrics', 'resetExpiryOnChange']);

export class RedisRlStore {
  /** Keys live in Redis, shared by every process (express-rate-limit's validations ask). */
  localKeys = false;
  #adapter;
  #client;
  #limit;
  /** The library's limit when it is a positive number; undefined when the library compares. */
  #fixedLimit;
  /** The counting limit's budget, when the library compares. */
  #budget;
  /** What passOnStoreError makes of a failure, for the metrics. */
  #failure;
  #metrics;
  /** countAll / renew for the limit, on algorithm 'counter'. */
  #counting;
  /** Per key, the 429s whose decrement has not come yet; only with skipFailedRequests (see increment). */
  #unspent;

  /**
   * @param {{ client: unknown, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed'|'counter', burst?: number,
   *   prefix?: string, shadow?: boolean, onShadow?: Function, onError?: Function, timeout?: number,
   *   clock?: () => number }} options
   */
  constructor(options = {}) {
    for (const name of Object.keys(options)) {
      if (REFUSED[name]) throw new TypeError(`${WHO}: option '${name}' ${REFUSED[name]}`);
      if (!KNOWN.has(name)) throw new TypeError(`${WHO}: unknown option '${name}' (${[...KNOWN].join(', ')})`);
    }
    const { prefix = 'rl:erl:', failure, resetExpiryOnChange = false, ...rest } = options;
    if (typeof resetExpiryOnChange !== 'boolean') throw new TypeError(`${WHO}: resetExpiryOnChange must be true or false, got ${JSON.stringify(resetExpiryOnChange)}`);
    if (resetExpiryOnChange && rest.algorithm !== 'counter') {
      throw new TypeError(`${WHO}: option 'resetExpiryOnChange' (rate-limit-redis 4's: every request, denied ones included, restarts the window) needs algorithm 'counter', the stock store's own window; the other algorithms never restart a window on a request`);
    }
    if (failure !== undefined) {
      throw new TypeError(`${WHO}: the failure policy is express-rate-limit's passOnStoreError (true: allow while Redis fails), not a store option`);
    }
    if (typeof prefix !== 'string') throw new TypeError(`${WHO}: prefix must be a string`);
    this.#adapter = makeLimiter(WHO, rest, 'library');
    this.#client = rest.client;
    this.#metrics = Boolean(rest.metrics);
    this.prefix = prefix;
    // rate-limit-redis INCRs on every request, denied ones included: on its own window
    // the counter does too (so a skipFailedRequests decrement after a 429 gives back
    // what the 429 spent), and resetExpiryOnChange re-arms the TTL on each.
    this.#counting = this.#adapter.algorithm === 'counter' ? { countAll: true, renew: resetExpiryOnChange } : {};
  }

  /** The requests that shadow mode let through although the module denied them. */
  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  init(options) {
    const { limit, windowMs } = options;
    const counting = typeof limit === 'function' || limit === 0;
    if (!counting && (!Number.isInteger(limit) || limit < 0)) {
      throw new TypeError(`${WHO}: limit must be a whole number ≥ 0 or a function of the request, got ${limit}`);
    }
    if (counting && this.#adapter.shadow) {
      throw new TypeError(`${WHO}: shadow mode needs a numeric limit ≥ 1 (with a function or 0 the library decides, not the module)`);
    }
    if (counting && this.#adapter.burst !== undefined) {
      throw new TypeError(`${WHO}: burst needs a numeric limit ≥ 1 (with a function or 0 the library decides, not the module)`);
    }
    if (counting && this.#metrics) {
      throw new TypeError(`${WHO}: metrics need a numeric limit ≥ 1 (with a function or 0 the library decides, not the module, so its decisions are not the module's to count)`);
    }
    this.#failure = options.passOnStoreError ? 'open' : 'closed';
    // The library decrements after a 429 only with skipFailedRequests (a 429 is no success),
    // and then always: entries stay bounded. On 'counter' the 429 was counted, so it is refunded.
    this.#unspent = options.skipFailedRequests && !this.#counting.countAll ? new Map() : undefined;
    this.#fixedLimit = counting ? undefined : limit;
    this.#budget = counting ? countingBudget(this.#adapter.algorithm, windowMs) : undefined;
    this.#limit = { ...limitFor(this.#adapter, 'erl', counting ? this.#budget : limit, windowMs, (key) => tagged(this.prefix, key)), ...this.#counting };
  }

  #policy() {
    if (!this.#limit) throw new Error(`${WHO}: the store was not initialised by express-rate-limit (see the error logged at start-up)`);
    return this.#limit;
  }

  // The library turns resetTime back into seconds against its own Date.now, whatever
  // clock the module decided on.
  #resetTime(ms) {
    return new Date(Date.now() + ms);
  }

  async increment(key) {
    const limit = this.#policy();
    const decision = await this.#adapter.rl.check(limit, key, { shadow: this.#adapter.shadow, libraryFailure: this.#failure });
    if (this.#fixedLimit === undefined) {
      if (decision.source === 'failure') throw decision.error;
      if (!decision.allowed) this.#spentNothing(key);
      const totalHits = decision.allowed ? this.#budget - decision.remaining : this.#budget + 1;
      return { totalHits, resetTime: this.#resetTime(decision.allowed ? decision.resetAfter : decision.retryAfter) };
    }
    const { hits, ms, allowed } = asHits(this.#adapter, decision, this.#fixedLimit);
    if (!allowed) this.#spentNothing(key);
    // express-rate-limit derives Retry-After and the reset header from resetTime.
    return { totalHits: hits, resetTime: this.#resetTime(ms) };
  }

  // A denial spends nothing in the module, yet skipFailedRequests decrements after the 429
  // (rate-limit-redis counted it): that decrement must give back nothing.
  #spentNothing(key) {
    if (this.#unspent) this.#unspent.set(key, (this.#unspent.get(key) ?? 0) + 1);
  }

  /** skipFailedRequests / skipSuccessfulRequests: the module gives the unit back (REFUND). */
  async decrement(key) {
    const pending = this.#unspent?.get(key);
    if (pending) {
      // Deleted at 0 so that the map holds only keys with a 429 still finishing.
      if (pending === 1) this.#unspent.delete(key);
      else this.#unspent.set(key, pending - 1);
      return;
    }
    const d = await this.#adapter.rl.refund(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
  }

  async resetKey(key) {
    const d = await this.#adapter.rl.reset(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
  }

  /**
   * Every client's limit back to whole (the library's optional resetAll): every key this
   * store named, on every primary, goes (SCAN + UNLINK). O(keys on the servers), so an
   * operator's call, not one for the request path. A Redis failure rejects: there is no
   * request to decide, so no failure policy.
   */
  async resetAll() {
    await unlinkMatching(this.#client, taggedGlob(this.prefix));
  }

  /** The state without spending (PEEK), with the state's own reset; undefined when the key has no hits. */
  async get(key) {
    const d = await this.#adapter.rl.peek(this.#policy(), key);
    if (d.source === 'failure') throw d.error;
    const totalHits = this.#fixedLimit === undefined ? this.#budget - d.remaining - (d.allowed ? 1 : 0) : usedBefore(d, this.#fixedLimit);
    if (totalHits === 0) return undefined;
    return { totalHits, resetTime: this.#resetTime(d.resetAfter) };
  }
}

export default RedisRlStore;
