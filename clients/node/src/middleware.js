// Express/Connect middleware: identify the caller, check the limits, set the headers,
// answer 429 when denied. Works with plain http.createServer too.
import { randomUUID } from 'node:crypto';
import { assertLimits, RateLimitConfigError } from './commands.js';
import { rateLimitHeaders } from './headers.js';
import { since } from './metrics.js';

const utcDay = (ms) => new Date(ms).toISOString().slice(0, 10);

// RL.PSEUDONYM of the client address, cached per address for the current UTC day: the
// pseudonym changes only when the day does, so one round trip per address per day.
function pseudonymOfAddress(limiter, { scope, prefix6, maxCached = 100_000 }) {
  let day = '';
  let cache = new Map();
  return async (req) => {
    const address = req.ip ?? req.socket?.remoteAddress;
    const now = limiter.clock();
    if (utcDay(now) !== day || cache.size >= maxCached) {
      day = utcDay(now);
      cache = new Map();
    }
    let pseudonym = cache.get(address);
    if (pseudonym === undefined) {
      // NOW makes the server hash the same day the cache is keyed by.
      pseudonym = await limiter.pseudonym(address, { scope, prefix6, now });
      cache.set(address, pseudonym);
    }
    return pseudonym;
  };
}

// A concurrency option is one more limit in the same call (RL.ALL with LEASE): "at most
// 5 in flight and 100 a minute" is then one atomic decision.
function concurrencyLimit(concurrency) {
  const { name = 'concurrency', limit, ttl, key } = concurrency;
  if (ttl === undefined) throw new TypeError('redis-rl: concurrency needs a ttl (a lease lives that long unless released or renewed)');
  return { name, algorithm: 'concurrency', limit, window: ttl, ...(key !== undefined ? { key } : {}) };
}

/**
 * @param {import('./limiter.js').RateLimiter} limiter
 * @param {import('../index.js').MiddlewareOptions} options
 */
export function rateLimitMiddleware(limiter, {
  limits = [], identify, cost, legacyHeaders = false, scope, prefix6, shadow = false, concurrency, requestId = () => randomUUID(),
}) {
  const rates = Array.isArray(limits) ? limits : [limits];
  const slot = concurrency ? concurrencyLimit(concurrency) : undefined;
  const list = slot ? [...rates, slot] : rates;
  if (!list.length) throw new TypeError('redis-rl: the middleware needs limits, a concurrency option, or both');
  // A misconfigured limit should stop the app at start-up, not fail every request.
  assertLimits(list);
  const identityOf = identify ?? pseudonymOfAddress(limiter, { scope, prefix6 });

  return async function rateLimit(req, res, next) {
    try {
      let decision;
      let identity;
      const lease = slot ? String(requestId(req)) : undefined;
      const start = performance.now();
      try {
        identity = await identityOf(req);
        decision = await limiter.check(list, identity, { cost: cost?.(req), lease, shadow });
      } catch (err) {
        // A mistake of the app's (a cost the module would refuse, an error reply that is
        // the caller's) is raised: the failure policy would hide it.
        if (err instanceof RateLimitConfigError || err?.name === 'RedisCommandError') throw err;
        // Identifying the caller failed (RL.PSEUDONYM unreachable, or the user's function
        // threw): the failure policy decides, as for the limits themselves.
        decision = limiter.failed(err, { command: identify ? 'identify' : 'RL.PSEUDONYM', keys: [] });
        limiter.record(list, decision, { seconds: since(start) });
      }
      res.rateLimit = decision;
      if (decision.source === 'failure') {
        if (decision.allowed) return next();
        // Not a 429: nobody exceeded anything, the limiter is unavailable.
        res.statusCode = 503;
        res.end();
        return undefined;
      }
      const headers = rateLimitHeaders(decision, { legacy: legacyHeaders });
      const wouldDeny = !decision.allowed;
      if (wouldDeny && shadow) {
        // Shadow: the denial is reported and counted, the request goes on; the headers
        // still show the real state, without a Retry-After for a request not refused.
        limiter.shadowed(decision, { keys: decision.limits.map((d) => d.key) });
        delete headers['Retry-After'];
      }
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      if (!wouldDeny || shadow) {
        if (slot && !wouldDeny) {
          // The slot is held until the response is done, however it ends (sent, handler
          // error answered, client gone); a handler that never ends loses it at the ttl.
          res.rateLimitLease = lease;
          let released = false;
          const release = () => {
            if (released) return;
            released = true;
            limiter.release(slot, identity, lease).catch(() => {});
          };
          res.once('finish', release);
          res.once('close', release);
        }
        return next();
      }
      res.statusCode = 429;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ error: 'rate_limited' }));
      return undefined;
    } catch (err) {
      return next(err);
    }
  };
}
