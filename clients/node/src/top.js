// RL.TOP across a deployment: the keys the servers denied most, merged. Each server
// keeps its own summary (RL.TOP is not replicated), so on a cluster client every primary
// is asked. A key lives on one primary, so merging is a union sorted by denials (after
// a slot migration a key may appear on two: its counts add, errors included).
import { primaries } from './clients.js';

function text(v) {
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}

/** One row: a RESP2 field/value array, or a RESP3 map (a Map or a plain object). */
function entry(row) {
  let pairs;
  if (Array.isArray(row)) {
    pairs = [];
    for (let i = 0; i + 1 < row.length; i += 2) pairs.push([row[i], row[i + 1]]);
  } else if (row instanceof Map) {
    pairs = [...row.entries()];
  } else {
    pairs = Object.entries(row);
  }
  const f = Object.fromEntries(pairs.map(([k, v]) => [text(k), v]));
  return {
    key: text(f.key),
    denied: Number(f.denied),
    admitted: Number(f.admitted),
    // The true denial count is between denied - error and denied.
    error: Number(f.error),
    lastDeniedMs: Number(f.last_denied_ms),
    command: text(f.command),
    algorithm: text(f.algorithm),
  };
}

function args({ count = 10, algorithm, reset = false } = {}) {
  if (!Number.isSafeInteger(count) || count < 1) throw new TypeError('redis-rl: top(): count must be a positive integer');
  const a = ['RL.TOP', 'COUNT', String(count)];
  if (algorithm !== undefined) a.push('ALGORITHM', String(algorithm));
  if (reset) a.push('RESET');
  return a;
}

/** The servers' answers as one list, worst first. */
export function mergeTop(answers, count = 10) {
  const byKey = new Map();
  for (const answer of answers) {
    for (const e of answer) {
      const seen = byKey.get(e.key);
      if (!seen) {
        byKey.set(e.key, e);
        continue;
      }
      const latest = e.lastDeniedMs >= seen.lastDeniedMs ? e : seen;
      byKey.set(e.key, {
        key: e.key,
        denied: seen.denied + e.denied,
        admitted: seen.admitted + e.admitted,
        error: seen.error + e.error,
        lastDeniedMs: latest.lastDeniedMs,
        command: latest.command,
        algorithm: latest.algorithm,
      });
    }
  }
  return [...byKey.values()]
    .sort((a, b) => b.denied - a.denied || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .slice(0, count);
}

/**
 * RL.TOP on one server, or on every primary of a cluster client, merged: the keys
 * denied most, worst first. Errors (an unknown algorithm, a server without the module)
 * reject as the client rejects them.
 * @param {object} client node-redis or ioredis, standalone or cluster
 * @param {{ count?: number, algorithm?: string, reset?: boolean }} [options]
 */
export async function top(client, options = {}) {
  const a = args(options);
  const answers = await Promise.all((await primaries(client)).map(async (send) => {
    const rows = await send(a);
    return (rows ?? []).map(entry);
  }));
  return mergeTop(answers, options.count ?? 10);
}
