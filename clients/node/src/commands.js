// Turns limits into RL.* argument lists and RL.* replies into decisions. Nothing here
// decides anything: every number in a decision comes from the server.

const ALGORITHMS = new Set(['slidelog', 'slidecount', 'fixed', 'gcra', 'concurrency']);

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
    throw new TypeError(`redis-rl: unknown algorithm "${limit.algorithm}" (slidelog, slidecount, fixed, gcra or concurrency)`);
  }
  return algorithm.toUpperCase();
}

/** Throws on a limit that could never make a command (for start-up checks). */
export function assertLimits(limits) {
  for (const limit of limits) {
    algorithmWord(limit);
    keyFor(limit, 'probe');
  }
}

// node-redis refuses numbers as arguments, so everything is sent as a string.
function limitArgs(limit, key, cost) {
  const args = [key, String(limit.limit), String(limit.window)];
  if (limit.burst !== undefined) args.push('BURST', String(limit.burst));
  if (cost !== 1) args.push('COST', String(cost));
  return args;
}

// RL.CONCURRENCY has subcommands where the others have modes: a spend acquires the
// lease, REFUND releases it, HEARTBEAT renews it.
function concurrencyArgs(limit, key, lease, mode) {
  const args = ['RL.CONCURRENCY', key, String(limit.limit), String(limit.window)];
  if (mode === 'PEEK' || mode === 'RESET') return args.concat(mode);
  if (lease === undefined || lease === null || lease === '') {
    throw new TypeError(`redis-rl: concurrency limit "${policyName(limit)}" needs a lease id (option lease)`);
  }
  return args.concat({ REFUND: 'RELEASE', HEARTBEAT: 'HEARTBEAT' }[mode] ?? 'ACQUIRE', String(lease));
}

/**
 * @param {import('../index.js').Limit[]} limits
 * @param {string[]} keys
 * @param {number[]} costs
 * @param {{nowUs?: number, mode?: 'PEEK' | 'REFUND' | 'RESET' | 'HEARTBEAT', lease?: string}} options
 * @returns {string[]}
 */
export function buildCommand(limits, keys, costs, { nowUs, mode, lease }) {
  const now = nowUs !== undefined ? ['NOW', String(nowUs)] : [];
  const concurrent = limits.map((l) => algorithmWord(l) === 'CONCURRENCY');
  if (limits.length === 1 && concurrent[0]) return [...concurrencyArgs(limits[0], keys[0], lease, mode), ...now];
  if (mode === 'HEARTBEAT') throw new TypeError('redis-rl: HEARTBEAT is for one concurrency limit');
  const args = limits.length === 1
    ? [`RL.${algorithmWord(limits[0])}`, ...limitArgs(limits[0], keys[0], costs[0])]
    : ['RL.ALL', String(limits.length),
        ...limits.flatMap((limit, i) => [algorithmWord(limit), ...limitArgs(limit, keys[i], concurrent[i] ? 1 : costs[i])])];
  if (concurrent.some(Boolean)) {
    if (lease === undefined || lease === null || lease === '') throw new TypeError('redis-rl: a concurrency limit in RL.ALL needs a lease id (option lease)');
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

/** Costs per limit from a number (every limit) or an object by limit name (missing ones cost 1). */
export function costsFor(limits, cost = 1) {
  if (typeof cost === 'number') return limits.map(() => cost);
  return limits.map((limit) => cost[policyName(limit)] ?? 1);
}

function fromReply(reply) {
  if (!Array.isArray(reply) || reply.length < 4) {
    throw new TypeError(`redis-rl: unexpected reply ${JSON.stringify(reply)}`);
  }
  const retry = Number(reply[2]);
  return {
    allowed: Number(reply[0]) === 1,
    remaining: Number(reply[1]),
    // The server's -1 means "never": Infinity keeps comparisons and Math.max right.
    retryAfter: retry < 0 ? Infinity : retry,
    resetAfter: Number(reply[3]),
  };
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
