// HTTP fields for a decision, after draft-ietf-httpapi-ratelimit-headers:
//   RateLimit-Policy: "<name>";q=<limit>;w=<window s>     one item per limit
//   RateLimit:        "<name>";r=<remaining>;t=<s until reset>
//   Retry-After:      <s>   (denials that can pass later)
// The reply carries milliseconds; HTTP wants whole seconds, rounded up so that a
// client that waits as told is never early.
import { policyName, windowMs } from './commands.js';

const seconds = (ms) => Math.ceil(ms / 1000);

// A structured-field string: quoted, with backslash and quote escaped.
const sfString = (s) => `"${String(s).replace(/[\\"]/g, '\\$&')}"`;

/**
 * @param {import('../index.js').Decision} decision
 * @param {{ legacy?: boolean }} [options] legacy: also X-RateLimit-Limit/-Remaining/-Reset,
 *   for the limit with the least remaining (Reset in seconds from now, like t=)
 * @returns {Record<string, string>} empty when Redis did not decide (failure policy)
 */
export function rateLimitHeaders(decision, { legacy = false } = {}) {
  if (decision.source === 'failure' || !decision.limits.length) return {};
  // A concurrency limit is no quota per window: it shows only in Retry-After.
  const limits = decision.limits.filter((d) => String(d.policy.algorithm).toLowerCase() !== 'concurrency');
  const headers = {};
  if (limits.length) {
    headers['RateLimit-Policy'] = limits
      .map(({ policy }) => `${sfString(policyName(policy))};q=${policy.limit};w=${seconds(windowMs(policy.window))}`)
      .join(', ');
    headers.RateLimit = limits
      .map((d) => `${sfString(policyName(d.policy))};r=${d.remaining};t=${seconds(d.resetAfter)}`)
      .join(', ');
  }
  // A request that can never pass (cost above the limit) gets no Retry-After: waiting won't help.
  if (!decision.allowed && Number.isFinite(decision.retryAfter)) {
    headers['Retry-After'] = String(seconds(decision.retryAfter));
  }
  if (legacy && limits.length) {
    const tightest = limits.reduce((a, b) => (b.remaining < a.remaining ? b : a));
    headers['X-RateLimit-Limit'] = String(tightest.policy.limit);
    headers['X-RateLimit-Remaining'] = String(tightest.remaining);
    headers['X-RateLimit-Reset'] = String(seconds(tightest.resetAfter));
  }
  return headers;
}
