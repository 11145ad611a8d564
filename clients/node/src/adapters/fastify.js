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
// On algorithm 'counter' (the plugin's own window) exponentialBackoff without ban is
// RL.COUNTER's ESCALATE instead, the plugin's RedisStore exactly: every request counts, and
// each denial sets the counter's TTL to timeWindow × 2^(current − max − 1), at most
// 2^53 − 1 ms. (With ban the penalty box counts the strikes, so it stays BLOCK … BACKOFF.)
// The module's longest block, and window but RL.COUNTER's: ten years. RL.COUNTER's: 2^63 - 1
// µs (the plugin's own tests ask for 285,421 years).
const LONGEST_MS = 315_360_000_000;
const LONGEST = `${LONGEST_MS}ms`;
const COUNTER_LONGEST_MS = 9_223_372_036_854_775n;
const bans = (params) => Number.isFinite(params.ban) && params.ban >= 0;
const escalates = (params, algorithm) => algorithm === 'counter' && Boolean(params.exponentialBackoff) && !params.continueExceeding && !bans(params);

function blockOf(params, algorithm) {
  const ban = bans(params);
  const backoff = params.exponentialBackoff && !params.continueExceeding && !escalates(params, algorithm);
  if (!ban && !params.continueExceeding && !backoff) return undefined;
  return {
    strikes: ban,
    extend: Boolean(params.continueExceeding),
    backoff: backoff ? LONGEST : undefined,
  };
}

// A numeric timeWindow (the plugin has turned strings into ms) is known when the plugin
// builds the store, so it is refused there, with its name, rather than on every request;
// a function's value is only known per request, and the module refuses it then. A block
// (ban, continueExceeding, exponentialBackoff but on 'counter') lasts timeWindow, so it
// keeps the ten years.
function checkWindow(timeWindow, route, longest) {
  if (typeof timeWindow !== 'number') return;
  // BigInt: the counter's bound is past 2^53, where a Number is no longer exact.
  if (Number.isInteger(timeWindow) && timeWindow >= 1 && BigInt(timeWindow) <= BigInt(longest)) return;
  const bound = longest === LONGEST_MS ? 'ten years' : 'about 292,000 years';
  throw new TypeError(`${WHO}: ${route ? `route ${route}: ` : ''}timeWindow must be 1 ms to ${bound} (${longest} ms), got ${timeWindow} ms`);
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

    /** ESCALATE: exponentialBackoff on the counter. */
    #escalate;

    constructor(params = {}, route = '') {
      this.#block = blockOf(params, adapter.algorithm);
      this.#escalate = escalates(params, adapter.algorithm);
      checkWindow(params.timeWindow, route, adapter.algorithm === 'counter' && !this.#block ? COUNTER_LONGEST_MS : LONGEST_MS);
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
      if (this.#escalate) limit.escalate = true;
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
