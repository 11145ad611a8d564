// What every framework adapter shares: a kit limiter built from the adapter's options,
// the limit for the library's (limit, window), and the translation of the module's
// decision into the hit count these libraries decide from.
//
// The libraries compare a hit count with their limit. The module has already decided,
// so the count is made to say what it decided:
//   admitted        -> limit - remaining  (<= limit: the library admits)
//   denied          -> limit + 1          (> limit: the library denies)
//   denied, shadow  -> limit              (the library admits; headers show 0 left)
import { globEscape } from '../clients.js';
import { RateLimiter } from '../limiter.js';

// 'counter' is the libraries' own window (from the first hit, one counter at the key).
export const ALGORITHMS = ['slidecount', 'slidelog', 'gcra', 'fixed', 'counter'];

/**
 * @param {string} who the entry point, for error messages
 * @param {object} options the adapter's options
 * @param {'library' | 'open' | 'closed'} failure who decides when Redis can't
 */
export function makeLimiter(who, {
  client, algorithm = 'slidecount', burst, onError, onShadow, timeout, clock, shadow = false, backend, secret, metrics,
}, failure) {
  if (!ALGORITHMS.includes(algorithm)) {
    throw new TypeError(`${who}: unknown algorithm "${algorithm}" (${ALGORITHMS.join(', ')})`);
  }
  if (burst !== undefined && algorithm !== 'gcra') throw new TypeError(`${who}: burst is for algorithm 'gcra' only`);
  const rl = new RateLimiter({
    client,
    failure,
    onError: onError ?? ((err, info) => console.warn(`${who}: ${info.command} failed, ${info.failure === 'library' ? 'the library decides' : info.failure}: ${err.message}`)),
    onShadow,
    timeout,
    clock,
    metrics,
    backend,
    secret,
  });
  return { rl, algorithm, burst, shadow: Boolean(shadow) };
}

/**
 * The kit limit for a library's (limit, window in ms), keyed by `key` as given.
 * @param {{algorithm: string, burst?: number}} base
 */
export function limitFor(base, name, limit, windowMs, key) {
  if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`redis-rl: the limit must be a positive integer, got ${limit}`);
  if (!Number.isInteger(windowMs) || windowMs < 1) throw new TypeError(`redis-rl: the window must be a positive number of milliseconds, got ${windowMs}`);
  const l = { name, algorithm: base.algorithm, limit, window: `${windowMs}ms`, key };
  if (base.burst !== undefined) l.burst = base.burst;
  return l;
}

/**
 * The module's decision as the library's numbers. A failure is thrown (the library's
 * own switch then decides); shadow mode lets a denial pass, reported and counted.
 * @returns {{ hits: number, allowed: boolean, wouldDeny: boolean, ms: number, decision: object }}
 *   ms: until the library should say "reset" (admitted) or "retry" (denied)
 */
export function asHits(adapter, decision, limit, cost = 1) {
  if (decision.source === 'failure') throw decision.error;
  const used = limit - decision.remaining;
  if (decision.allowed) return { hits: used, allowed: true, wouldDeny: false, ms: decision.resetAfter, decision };
  const ms = Number.isFinite(decision.retryAfter) ? decision.retryAfter : decision.resetAfter;
  if (adapter.shadow) {
    adapter.rl.shadowed(decision, { keys: decision.limits.map((d) => d.key) });
    return { hits: limit, allowed: true, wouldDeny: true, ms, decision };
  }
  // A cost above what is left: the count goes past the limit by the cost's excess.
  return { hits: Math.max(limit + 1, used + cost), allowed: false, wouldDeny: true, ms, decision };
}

/**
 * `{tag}` keeps every key of one request in one cluster slot. Braces in the library's key
 * would move the tag, so they (and %, to stay unambiguous) are percent-encoded.
 */
export const tagged = (prefix, key) => `${prefix}{${String(key).replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}}`;

/**
 * The SCAN glob of every key `tagged(prefix, …)` names, the module's derived keys
 * (`…}:<window>`) included. The `{` keeps out another prefix that merely starts with
 * this one ('rl:' does not reach 'rl:erl:{…}').
 */
export const taggedGlob = (prefix) => `${globEscape(prefix)}{*`;

/** Hits so far, from a PEEK of cost 1 (whose remaining is what would be left after it). */
export const usedBefore = (peek, limit) => (peek.allowed ? limit - peek.remaining - 1 : limit);
