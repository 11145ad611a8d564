// Express/Connect middleware: identify the caller, check the limits, set the headers,
// answer 429 when denied. Works with plain http.createServer too.
import { assertLimits } from './commands.js';
import { rateLimitHeaders } from './headers.js';

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

/**
 * @param {import('./limiter.js').RateLimiter} limiter
 * @param {import('../index.js').MiddlewareOptions} options
 */
export function rateLimitMiddleware(limiter, { limits, identify, cost, legacyHeaders = false, scope, prefix6 }) {
  const list = Array.isArray(limits) ? limits : [limits];
  // A misconfigured limit should stop the app at start-up, not fail every request.
  assertLimits(list);
  const identityOf = identify ?? pseudonymOfAddress(limiter, { scope, prefix6 });

  return async function rateLimit(req, res, next) {
    try {
      let decision;
      try {
        const identity = await identityOf(req);
        decision = await limiter.check(list, identity, { cost: cost?.(req) });
      } catch (err) {
        // Identifying the caller failed (RL.PSEUDONYM unreachable, or the user's function
        // threw): the failure policy decides, as for the limits themselves.
        decision = limiter.failed(err, { command: identify ? 'identify' : 'RL.PSEUDONYM', keys: [] });
      }
      res.rateLimit = decision;
      if (decision.source === 'failure') {
        if (decision.allowed) return next();
        // Not a 429: nobody exceeded anything, the limiter is unavailable.
        res.statusCode = 503;
        res.end();
        return undefined;
      }
      for (const [name, value] of Object.entries(rateLimitHeaders(decision, { legacy: legacyHeaders }))) {
        res.setHeader(name, value);
      }
      if (decision.allowed) return next();
      res.statusCode = 429;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ error: 'rate_limited' }));
      return undefined;
    } catch (err) {
      return next(err);
    }
  };
}
