// redis-rl/fastify: a store for @fastify/rate-limit 10 and 11 (`store: redisRlStore({...})`).
// The plugin builds the store itself (`new Store(params)`) and a child per route
// (`store.child(routeParams)`); `incr` reports the module's decision as `current`, and
// `ttl` as the reset (admitted) or the retry (denied), which the plugin turns into
// x-ratelimit-reset and retry-after. Failures go back to the plugin: `skipOnError`
// is the failure policy.
import { asHits, limitFor, makeLimiter, tagged, usedBefore } from './core.js';

const WHO = 'redis-rl/fastify';

// These count denied requests, which the module never stores (a denial spends nothing):
// refused when the store is built rather than silently never triggering.
function refuseCountingDenials(params, where) {
  if (params.ban !== undefined && params.ban !== -1 && params.ban !== null) {
    throw new Error(`${WHO}: 'ban'${where} counts denied requests, which redis-rl does not store (a denial spends nothing); remove it`);
  }
  if (params.continueExceeding) {
    throw new Error(`${WHO}: 'continueExceeding'${where} restarts the window on every denied request; redis-rl's windows slide by themselves: remove it`);
  }
  if (params.exponentialBackoff) {
    throw new Error(`${WHO}: 'exponentialBackoff'${where} grows the window with each denied request, which redis-rl does not count; remove it`);
  }
}

/**
 * @param {{ client: unknown, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed', burst?: number,
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

    constructor(params, route = '') {
      refuseCountingDenials(params, route ? ` on ${route}` : '');
      this.#route = route;
    }

    static get shadowDenials() {
      return adapter.rl.shadowDenials;
    }

    #limit(timeWindow, max) {
      return limitFor(adapter, 'fastify', max, timeWindow, (key) => `${tagged(nameSpace, key)}:${this.#route}`);
    }

    incr(key, cb, timeWindow, max) {
      adapter.rl.check(this.#limit(timeWindow, max), key).then(
        (decision) => {
          const { hits, ms } = asHits(adapter, decision, max);
          cb(null, { current: hits, ttl: ms });
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
