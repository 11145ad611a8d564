// Turns limits into RL.* argument lists and RL.* replies into decisions. Nothing here
// decides anything: every number in a decision comes from the server.

const ALGORITHMS = new Set(['slidelog', 'slidecount', 'slidewindow', 'fixed', 'counter', 'gcra', 'tokenbucket', 'concurrency']);

/** @param {import('../index.js').Limit} limit */
export function policyName(limit) {
  return limit.name ?? limit.algorithm;
}

/**
 * The key the limit uses for this identity. The default puts the identity in the hash
 * tag, so in a cluster every limit of one identity shares a slot (RL.ALL needs that, and
 * RL.FIXED / RL.SLIDECOUNT refuse untagged keys).
 * @param {import('../index.js').Limit} limit
 * @param {string | undefined} identity
 */
export function keyFor(limit, identity) {
  if (typeof limit.key === 'function') return limit.key(identity);
  if (typeof limit.key === 'string') return limit.key;
  if (identity === undefined || identity === null) {
    throw new TypeError(`redis-rl: limit "${policyName(limit)}" has no key and no identity was given`);
  }
  return `rl:{${identity}}:${policyName(limit)}`;
}

/** Window in milliseconds: a number is seconds (as on the command line), a string '1500ms' or '60s'. */
export function windowMs(window) {
  if (typeof window === 'number') return window * 1000;
  const m = /^(\d+)(ms|s)?$/i.exec(String(window).trim());
  if (!m) return NaN;
  return m[2]?.toLowerCase() === 'ms' ? Number(m[1]) : Number(m[1]) * 1000;
}

function algorithmWord(limit) {
  const algorithm = String(limit.algorithm).toLowerCase();
  if (!ALGORITHMS.has(algorithm)) {
    throw new RateLimitConfigError(`redis-rl: unknown algorithm "${limit.algorithm}" (slidelog, slidecount, slidewindow, fixed, counter, gcra, tokenbucket or concurrency)`);
  }
  return algorithm.toUpperCase();
}

/** A caller's mistake (a limit, cost or lease the module would refuse): raised, never sent to the failure policy. */
export class RateLimitConfigError extends TypeError {
  name = 'RateLimitConfigError';
}

// The module's bounds (src/args.rs): amounts 1..=10^15, windows up to 10 years (RL.COUNTER's
// up to 2^63 - 1 µs, about 292,000 years: it keeps only the key's TTL), RL.SLIDELOG holds at
// most 1,000,000 members (one per unit), so its cost is at most that too. Windows compare as
// BigInt: a counter's longest is past 2^53 ms, where a Number is no longer exact.
const MAX_AMOUNT = 1e15;
const MAX_WINDOW_MS = 10n * 365n * 24n * 3600n * 1000n;
const MAX_COUNTER_WINDOW_MS = 9_223_372_036_854_775n;
const MAX_LOG_LIMIT = 1_000_000;
const windowFormats = (max) => `a number of seconds (60) or a string '60', '60s' or '1500ms', positive, at most ${max === MAX_WINDOW_MS ? '10 years' : `${max} ms (about 292,000 years)`}`;
const WINDOW_FORMATS = windowFormats(MAX_WINDOW_MS);

/** A window (or block duration) in ms as a BigInt, or undefined if it is none. */
function exactMs(window) {
  if (typeof window === 'number') return Number.isSafeInteger(window) ? BigInt(window) * 1000n : undefined;
  const m = /^(\d+)(ms|s)?$/i.exec(String(window).trim());
  if (!m) return undefined;
  return m[2]?.toLowerCase() === 'ms' ? BigInt(m[1]) : BigInt(m[1]) * 1000n;
}

const wholeAmount = (n) => Number.isInteger(n) && n >= 1 && n <= MAX_AMOUNT;

/** A whole amount from a number or a string of digits ('5'), else undefined. */
function amountOf(value) {
  if (typeof value === 'number') return wholeAmount(value) ? value : undefined;
  if (typeof value === 'string' && /^\d+$/.test(value.trim())) {
    const n = Number(value.trim());
    return wholeAmount(n) ? n : undefined;
  }
  return undefined;
}

/** Throws RateLimitConfigError on a limit the module would refuse, naming what is accepted. */
export function validateLimit(limit) {
  if (limit === null || typeof limit !== 'object') throw new RateLimitConfigError(`redis-rl: a limit is an object { algorithm, limit, window }, got ${JSON.stringify(limit)}`);
  const word = algorithmWord(limit);
  const name = policyName(limit);
  if (amountOf(limit.limit) === undefined) {
    throw new RateLimitConfigError(`redis-rl: limit "${name}": limit must be a whole number from 1 to 10^15, got ${JSON.stringify(limit.limit)}`);
  }
  const longest = word === 'COUNTER' ? MAX_COUNTER_WINDOW_MS : MAX_WINDOW_MS;
  const ms = exactMs(limit.window);
  if (!(ms >= 1n && ms <= longest)) {
    throw new RateLimitConfigError(`redis-rl: limit "${name}": window must be ${windowFormats(longest)}; got ${JSON.stringify(limit.window)}`);
  }
  if (limit.burst !== undefined) {
    if (word !== 'GCRA') throw new RateLimitConfigError(`redis-rl: limit "${name}": burst is for algorithm 'gcra' only`);
    if (amountOf(limit.burst) === undefined) throw new RateLimitConfigError(`redis-rl: limit "${name}": burst must be a whole number from 1 to 10^15, got ${JSON.stringify(limit.burst)}`);
  }
  if (limit.refill !== undefined) {
    if (word !== 'TOKENBUCKET') throw new RateLimitConfigError(`redis-rl: limit "${name}": refill is for algorithm 'tokenbucket' only`);
    if (amountOf(limit.refill) === undefined) throw new RateLimitConfigError(`redis-rl: limit "${name}": refill must be a whole number from 1 to 10^15, got ${JSON.stringify(limit.refill)}`);
  }
  if (limit.block !== undefined) blockArgs(limit);
  for (const flag of ['countAll', 'renew', 'escalate']) {
    if (limit[flag] !== undefined && typeof limit[flag] !== 'boolean') throw new RateLimitConfigError(`redis-rl: limit "${name}": ${flag} must be true or false, got ${JSON.stringify(limit[flag])}`);
    if (limit[flag] && word !== 'COUNTER') throw new RateLimitConfigError(`redis-rl: limit "${name}": ${flag} is for algorithm 'counter' only`);
  }
  if (limit.renew && limit.escalate) throw new RateLimitConfigError(`redis-rl: limit "${name}": renew and escalate exclude each other`);
  keyFor(limit, 'probe');
  return limit;
}

const durationOk = (d) => {
  const ms = exactMs(d);
  return ms >= 1n && ms <= MAX_WINDOW_MS;
};

/**
 * The limit's penalty box, the module's `BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES]`:
 * `block` is a duration (as a window) or `{ duration, extend, backoff, strikes }`.
 */
function blockArgs(limit) {
  const name = policyName(limit);
  const spec = typeof limit.block === 'object' && limit.block !== null ? limit.block : { duration: limit.block };
  if (algorithmWord(limit) === 'CONCURRENCY') throw new RateLimitConfigError(`redis-rl: concurrency limit "${name}": block is for the rate limiters (a lease is not a misbehaviour)`);
  if (!durationOk(spec.duration)) throw new RateLimitConfigError(`redis-rl: limit "${name}": block must be a duration, ${WINDOW_FORMATS}; got ${JSON.stringify(spec.duration)}`);
  const args = ['BLOCK', String(spec.duration)];
  if (spec.extend && spec.backoff !== undefined) throw new RateLimitConfigError(`redis-rl: limit "${name}": block takes extend or backoff, not both`);
  if (spec.extend) args.push('EXTEND');
  if (spec.backoff !== undefined) {
    if (!durationOk(spec.backoff) || windowMs(spec.backoff) < windowMs(spec.duration)) {
      throw new RateLimitConfigError(`redis-rl: limit "${name}": block backoff (the longest block) must be a duration at least the block's; got ${JSON.stringify(spec.backoff)}`);
    }
    args.push('BACKOFF', String(spec.backoff));
  }
  if (spec.strikes) args.push('STRIKES');
  return args;
}

/** Throws on a limit that could never make a command (for start-up checks). */
export function assertLimits(limits) {
  for (const limit of Array.isArray(limits) ? limits : [limits]) validateLimit(limit);
}

/** The cost of one limit: a whole number or a string of digits, within the module's bounds. */
function costOf(limit, cost) {
  const n = amountOf(cost);
  if (n === undefined) {
    throw new RateLimitConfigError(`redis-rl: cost must be a whole number from 1 to 10^15 (or a string of digits, '5'), or an object of such costs by limit name; got ${JSON.stringify(cost)}`);
  }
  const word = algorithmWord(limit);
  if (word === 'SLIDELOG' && n > MAX_LOG_LIMIT) {
    throw new RateLimitConfigError(`redis-rl: limit "${policyName(limit)}": a slidelog call spends at most ${MAX_LOG_LIMIT}, its largest limit (one log entry each); got cost ${n}: use slidecount, fixed, counter or gcra for larger costs`);
  }
  if (word === 'CONCURRENCY' && n !== 1) {
    throw new RateLimitConfigError(`redis-rl: concurrency limit "${policyName(limit)}": a lease is one slot; cost must be 1, got ${n}`);
  }
  return n;
}

const hasLease = (lease) => (typeof lease === 'string' && lease !== '') || (typeof lease === 'number' && Number.isFinite(lease));

// node-redis refuses numbers as arguments, so everything is sent as a string.
function limitArgs(limit, key, cost) {
  const args = [key, String(limit.limit), String(limit.window)];
  if (limit.burst !== undefined) args.push('BURST', String(limit.burst));
  // REFILL 1 is the module's default.
  if (limit.refill !== undefined && Number(limit.refill) !== 1) args.push('REFILL', String(limit.refill));
  if (cost !== 1) args.push('COST', String(cost));
  if (limit.block !== undefined) args.push(...blockArgs(limit));
  // The stock stores' counting (every call adds its cost) and their re-armed TTL.
  if (limit.countAll) args.push('COUNTALL');
  if (limit.renew) args.push('RENEW');
  // @fastify/rate-limit's exponential backoff: each denial doubles the TTL.
  if (limit.escalate) args.push('ESCALATE');
  return args;
}

// RL.CONCURRENCY has subcommands where the others have modes: a spend acquires the
// lease, REFUND releases it, HEARTBEAT renews it.
function concurrencyArgs(limit, key, lease, mode) {
  const args = ['RL.CONCURRENCY', key, String(limit.limit), String(limit.window)];
  if (mode === 'PEEK' || mode === 'RESET') return args.concat(mode);
  if (!hasLease(lease)) {
    throw new RateLimitConfigError(`redis-rl: concurrency limit "${policyName(limit)}" needs a lease id (option lease: a non-empty string), got ${JSON.stringify(lease)}`);
  }
  return args.concat({ REFUND: 'RELEASE', HEARTBEAT: 'HEARTBEAT' }[mode] ?? 'ACQUIRE', String(lease));
}

/**
 * @param {import('../index.js').Limit[]} limits
 * @param {string[]} keys
 * @param {number[]} costs
 * @param {{nowUs?: number, mode?: 'PEEK' | 'REFUND' | 'RESET' | 'HEARTBEAT' | 'IMPOSE', lease?: string}} options
 * @returns {string[]}
 */
export function buildCommand(limits, keys, costs, { nowUs, mode, lease }) {
  limits.forEach(validateLimit);
  const now = nowUs !== undefined ? ['NOW', String(nowUs)] : [];
  const concurrent = limits.map((l) => algorithmWord(l) === 'CONCURRENCY');
  if (limits.length === 1 && concurrent[0]) return [...concurrencyArgs(limits[0], keys[0], lease, mode), ...now];
  if (mode === 'HEARTBEAT') throw new TypeError('redis-rl: HEARTBEAT is for one concurrency limit');
  const single = limits.length > 1 && limits.find((l) => l.countAll || l.renew || l.escalate);
  if (single) throw new RateLimitConfigError(`redis-rl: limit "${policyName(single)}": countAll, renew and escalate are RL.COUNTER's alone, not a limit's in RL.ALL (check it on its own)`);
  const args = limits.length === 1
    ? [`RL.${algorithmWord(limits[0])}`, ...limitArgs(limits[0], keys[0], costs[0])]
    : ['RL.ALL', String(limits.length),
        ...limits.flatMap((limit, i) => [algorithmWord(limit), ...limitArgs(limit, keys[i], concurrent[i] ? 1 : costs[i])])];
  if (concurrent.some(Boolean)) {
    if (!hasLease(lease)) throw new RateLimitConfigError(`redis-rl: a concurrency limit in RL.ALL needs a lease id (option lease: a non-empty string), got ${JSON.stringify(lease)}`);
    args.push('LEASE', String(lease));
  }
  args.push(...now);
  if (mode) args.push(mode);
  return args;
}

/**
 * RL.THROTTLE (redis-cell's CL.THROTTLE): `count` per `period` seconds, `maxBurst + 1` at
 * once, `quantity` the cost (0 only reports).
 */
export function throttleCommand(key, { maxBurst, count, period, quantity = 1 }, nowUs) {
  const args = ['RL.THROTTLE', String(key), String(maxBurst), String(count), String(period), String(quantity)];
  if (nowUs !== undefined) args.push('NOW', String(nowUs));
  return args;
}

/** CL.THROTTLE's reply: [limited, limit, remaining, retry_after_s (-1 when allowed), reset_after_s]. */
export function toThrottle(reply) {
  if (!Array.isArray(reply) || reply.length !== 5) throw new TypeError(`redis-rl: unexpected RL.THROTTLE reply ${JSON.stringify(reply)}`);
  const [limited, limit, remaining, retryAfter, resetAfter] = reply.map(Number);
  return { allowed: limited === 0, limit, remaining, retryAfter, resetAfter };
}

/**
 * Costs per limit from a number or a string of digits (every limit), or an object by
 * limit name (missing ones cost 1). A concurrency limit always costs its one slot.
 */
export function costsFor(limits, cost = 1) {
  if (cost !== null && typeof cost === 'object' && !Array.isArray(cost)) {
    return limits.map((limit) => costOf(limit, cost[policyName(limit)] ?? 1));
  }
  return limits.map((limit) => (algorithmWord(limit) === 'CONCURRENCY' && limits.length > 1 ? 1 : costOf(limit, cost)));
}

function fromReply(reply) {
  if (!Array.isArray(reply) || reply.length < 4) {
    throw new TypeError(`redis-rl: unexpected reply ${JSON.stringify(reply)}`);
  }
  const retry = Number(reply[2]);
  const decision = {
    allowed: Number(reply[0]) === 1,
    remaining: Number(reply[1]),
    // The server's -1 means "never": Infinity keeps comparisons and Math.max right.
    retryAfter: retry < 0 ? Infinity : retry,
    resetAfter: Number(reply[3]),
  };
  // BLOCK … STRIKES: the denied calls of the current block (RL.ALL's fifth is its list).
  if (reply.length >= 5 && !Array.isArray(reply[4])) decision.strikes = Number(reply[4]);
  return decision;
}

/**
 * @param {unknown} reply a 4-integer reply, or RL.ALL's 5-element one
 * @param {import('../index.js').Limit[]} limits
 * @param {string[]} keys
 * @returns {import('../index.js').Decision}
 */
export function toDecision(reply, limits, keys) {
  const aggregate = fromReply(reply);
  const perLimit = limits.length === 1 ? [reply] : reply[4];
  if (!Array.isArray(perLimit) || perLimit.length !== limits.length) {
    throw new TypeError(`redis-rl: unexpected RL.ALL reply ${JSON.stringify(reply)}`);
  }
  return {
    ...aggregate,
    limits: perLimit.map((r, i) => ({ ...fromReply(r), policy: limits[i], key: keys[i] })),
    source: 'redis',
  };
}
