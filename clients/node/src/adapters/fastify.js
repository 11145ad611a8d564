// redis-rl/fastify: a store for @fastify/rate-limit 10 and 11 (`store: redisRlStore({...})`).
// The plugin builds the store itself (`new Store(params)`) and a child per route
// (`store.child(routeParams)`); `incr` reports the module's decision as `current`, and
// `ttl` as the reset (admitted) or the retry (denied), which the plugin turns into
// x-ratelimit-reset and retry-after. Failures go back to the plugin: `skipOnError`
// is the failure policy.
import { asHits, limitFor, makeLimiter, tagged, usedBefore } from './core.js';

const WHO = 'redis-rl/fastify';

// ban, continueExceeding and exponentialBackoff are the module's penalty box (BLOCK),
// whose length is the route's timeWindow, as the plugin's own stores count it:
//   ban: n               BLOCK … STRIKES: the k-th denied request reports current =
//                        max + k, so the plugin answers 403 once current - max > n
//   continueExceeding    BLOCK … EXTEND: each denied request restarts the limitation
//   exponentialBackoff   BLOCK … BACKOFF: the k-th denied request waits timeWindow × 2^(k-1)
// With both continueExceeding and exponentialBackoff, continueExceeding wins, as in the
// plugin's stores.
// The module's longest window and block: ten years.
const LONGEST_MS = 315_360_000_000;
const LONGEST = `${LONGEST_MS}ms`;
function blockOf(params) {
  const ban = Number.isFinite(params.ban) && params.ban >= 0;
  if (!ban && !params.continueExceeding && !params.exponentialBackoff) return undefined;
  return {
    strikes: ban,
    extend: Boolean(params.continueExceeding),
    backoff: params.continueExceeding || !params.exponentialBackoff ? undefined : LONGEST,
  };
}

// A numeric timeWindow (the plugin has turned strings into ms) is known when the plugin
// builds the store, so it is refused there, with its name, rather than on every request;
// a function's value is only known per request, and the module refuses it then.
function checkWindow(timeWindow, route) {
  if (typeof timeWindow !== 'number') return;
  if (Number.isInteger(timeWindow) && timeWindow >= 1 && timeWindow <= LONGEST_MS) return;
  throw new TypeError(`${WHO}: ${route ? `route ${route}: ` : ''}timeWindow must be 1 ms to ten years (${LONGEST_MS} ms), got ${timeWindow} ms`);
}

/**
 * @param {{ client: unknown, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed'|'counter', burst?: number,
 *   nameSpace?: string, shadow?: boolean, onShadow?: Function, onError?: Function, timeout?: number,
 *   clock?: () => number }} options
 * @returns the store class to pass as the plugin's `store` option
 */
export function redisRlStore({ nameSpace = 'rl:fastify:', failure, ...options } = {}) {
  if (failure !== undefined) {
    throw new TypeError(`${WHO}: the failure policy is @fastify/rate-limit's skipOnError (true: allow while Redis fails), not a store option`);
  }
  const adapter = makeLimiter(WHO, options, 'library');

  class RedisRlFastifyStore {
    #route;

    #block;

    /** What skipOnError makes of a failure, for the metrics. */
    #failure;

    constructor(params = {}, route = '') {
      checkWindow(params.timeWindow, route);
      this.#block = blockOf(params);
      this.#route = route;
      this.#failure = params.skipOnError ? 'open' : 'closed';
    }

    static get shadowDenials() {
      return adapter.rl.shadowDenials;
    }

    #limit(timeWindow, max) {
      const limit = limitFor(adapter, 'fastify', max, timeWindow, (key) => `${tagged(nameSpace, key)}:${this.#route}`);
      if (this.#block) limit.block = { duration: `${timeWindow}ms`, ...this.#block };
      // The plugin's RedisStore INCRs on every request, denied ones included: on its own
      // window the counter does too.
      if (adapter.algorithm === 'counter') limit.countAll = true;
      return limit;
    }

    incr(key, cb, timeWindow, max) {
      adapter.rl.check(this.#limit(timeWindow, max), key, { shadow: adapter.shadow, libraryFailure: this.#failure }).then(
        (decision) => {
          const { hits, ms } = asHits(adapter, decision, max);
          // ban: the plugin counts the denied requests past max.
          const current = !decision.allowed && decision.strikes !== undefined && !adapter.shadow ? max + decision.strikes : hits;
          cb(null, { current, ttl: ms });
        },
      ).catch((err) => cb(err, null));
    }

    /** `{ increment: false }` (plugin 11): the state without spending. */
    read(key, cb, timeWindow, max) {
      adapter.rl.peek(this.#limit(timeWindow, max), key).then((d) => {
        if (d.source === 'failure') throw d.error;
        cb(null, { current: usedBefore(d, max), ttl: d.resetAfter });
      }).catch((err) => cb(err, null));
    }

    child(routeOptions) {
      const { method, url } = routeOptions.routeInfo;
      return new RedisRlFastifyStore(routeOptions, `${[].concat(method).join(',')}${url}`);
    }
  }
  return RedisRlFastifyStore;
}

export default redisRlStore;
