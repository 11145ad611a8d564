// Turns limits into RL.* argument lists and RL.* replies into decisions. Nothing here
// decides anything: every number in a decision comes from the server.

const ALGORITHMS = new Set(['slidelog', 'slidecount', 'fixed', 'gcra']);

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
    throw new TypeError(`redis-rl: unknown algorithm "${limit.algorithm}" (slidelog, slidecount, fixed or gcra)`);
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

/**
 * @param {import('../index.js').Limit[]} limits
 * @param {string[]} keys
 * @param {number[]} costs
 * @param {{nowUs?: number, mode?: 'PEEK' | 'REFUND' | 'RESET'}} options
 * @returns {string[]}
 */
export function buildCommand(limits, keys, costs, { nowUs, mode }) {
  const args = limits.length === 1
    ? [`RL.${algorithmWord(limits[0])}`, ...limitArgs(limits[0], keys[0], costs[0])]
    : ['RL.ALL', String(limits.length),
        ...limits.flatMap((limit, i) => [algorithmWord(limit), ...limitArgs(limit, keys[i], costs[i])])];
  if (nowUs !== undefined) args.push('NOW', String(nowUs));
  if (mode) args.push(mode);
  return args;
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
