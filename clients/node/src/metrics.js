// The kit's metrics in prom-client (docs/metrics.md): one counter of decisions by limit,
// outcome and backend, one histogram of the calls' wall time by limit. Names, labels and
// buckets are every kit's, so one dashboard serves every language.
import { createRequire } from 'node:module';
import { windowMs } from './commands.js';

export const DECISIONS = 'redis_rl_decisions_total';
export const DURATION = 'redis_rl_call_duration_seconds';
export const OUTCOMES = ['allowed', 'denied', 'shadow_denied', 'failure_open', 'failure_closed', 'cache_denied'];
export const BACKENDS = ['module', 'scripts'];
/** Seconds: sub-millisecond calls on a local network, a tail up to the 300 ms timeout. */
export const BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5];

/**
 * The `limit` label: the limit's name, else `<algorithm>:<limit>/<window>` (fixed:100/60s),
 * never its key or identity, so an app with 5 limits has 5 values.
 */
export function limitLabel(limit) {
  if (limit.name !== undefined) return String(limit.name);
  const ms = windowMs(limit.window);
  const window = ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
  return `${String(limit.algorithm).toLowerCase()}:${limit.limit}/${window}`;
}

/** The backend that answers (or, before any answer, would): the `backend` label. */
export const backendOf = (limiter) => limiter.activeBackend ?? 'module';

// prom-client is an optional peer: loaded only when metrics are turned on, so an app
// without it runs as long as it does not ask for them.
function promClient() {
  try {
    return createRequire(import.meta.url)('prom-client');
  } catch (err) {
    if (err?.code !== 'MODULE_NOT_FOUND') throw err;
    throw new Error("redis-rl: metrics need prom-client, which is not installed: npm install prom-client (or leave the 'metrics' option out)", { cause: err });
  }
}

// Several limiters (an app's middleware, its adapters) share one registry: the first one
// registers the metrics, the others use them, since prom-client refuses a name twice.
function metric(registry, Type, config) {
  const existing = registry.getSingleMetric(config.name);
  if (existing) return existing;
  return new Type({ ...config, registers: [registry] });
}

export class Metrics {
  #decisions;
  #duration;

  /** @param {true | import('prom-client').Registry} option true: prom-client's default registry */
  constructor(option) {
    const prom = promClient();
    const registry = option === true ? prom.register : option;
    if (typeof registry?.getSingleMetric !== 'function' || typeof registry?.registerMetric !== 'function') {
      throw new TypeError('redis-rl: metrics is true (prom-client\'s default registry) or a prom-client Registry');
    }
    this.#decisions = metric(registry, prom.Counter, {
      name: DECISIONS,
      help: 'Rate-limit decisions by limit, outcome and backend.',
      labelNames: ['limit', 'outcome', 'backend'],
    });
    this.#duration = metric(registry, prom.Histogram, {
      name: DURATION,
      help: 'Wall time of each limiter call to Redis, in seconds.',
      labelNames: ['limit'],
      buckets: BUCKETS,
    });
  }

  /**
   * One decision, counted once per limit it names; `seconds` is the call's wall time,
   * undefined when no call was made (a deny-cache hit).
   */
  record(limits, outcome, backend, seconds) {
    for (const limit of limits) {
      const name = limitLabel(limit);
      this.#decisions.inc({ limit: name, outcome, backend });
      if (seconds !== undefined) this.#duration.observe({ limit: name }, seconds);
    }
  }
}

/**
 * What became of a decision, as the `outcome` label says it.
 * @param {'open' | 'closed' | 'library'} failure the limiter's policy
 * @param {boolean} shadow the caller lets a denial through
 */
export function outcomeOf(decision, failure, shadow) {
  if (decision.source === 'failure') return failure === 'open' ? 'failure_open' : 'failure_closed';
  if (decision.source === 'cache') return 'cache_denied';
  if (decision.allowed) return 'allowed';
  return shadow ? 'shadow_denied' : 'denied';
}

/** Seconds since `start` (a performance.now() reading). */
export const since = (start) => (performance.now() - start) / 1000;
