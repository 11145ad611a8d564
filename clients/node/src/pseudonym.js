// RL.PSEUDONYM computed in the app, for the scripts backend (Redis Lua has no SHA-256):
// the module's output byte for byte, from the same secret, so keys stay the same when a
// fleet moves between the backends.
//
//   pseudonym = first 24 hex of HMAC-SHA256(secret, canonical identity "|" UTC day) [":" scope]
import { createHmac } from 'node:crypto';
import { isIPv4 } from 'node:net';

/** The eight 16-bit groups of an IPv6 address in any RFC 4291 text form, else undefined. */
function ipv6Groups(text) {
  if (!/^[0-9A-Fa-f:.]+$/.test(text)) return undefined;
  let head = text;
  const tail = [];
  // A dotted IPv4 address may end it, standing for the last two groups.
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    if (!isIPv4(dotted[2])) return undefined;
    const [a, b, c, d] = dotted[2].split('.').map(Number);
    tail.push((a << 8) | b, (c << 8) | d);
    head = dotted[1].endsWith('::') ? dotted[1] : dotted[1].slice(0, -1);
  } else if (text.includes('.')) {
    return undefined;
  }
  const parts = head.split('::');
  if (parts.length > 2) return undefined;
  const groups = (s) => (s === '' ? [] : s.split(':'));
  const valid = (g) => /^[0-9A-Fa-f]{1,4}$/.test(g);
  const left = groups(parts[0]);
  const right = parts.length === 2 ? groups(parts[1]) : [];
  if (![...left, ...right].every(valid)) return undefined;
  const known = left.length + right.length + tail.length;
  if (parts.length === 1 ? known !== 8 : known > 7) return undefined;
  const hex = (g) => parseInt(g, 16);
  return [...left.map(hex), ...Array(8 - known).fill(0), ...right.map(hex), ...tail];
}

/** RFC 5952: lowercase, no leading zeros, the first longest run of 2+ zero groups as "::". */
function ipv6Text(groups) {
  let best = -1;
  let bestLen = 0;
  for (let i = 0, run = 0; i < 8; i++) {
    run = groups[i] === 0 ? run + 1 : 0;
    if (run > bestLen) [best, bestLen] = [i - run + 1, run];
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * The identity as the module hashes it: an IPv4 address as is, an IPv4-mapped IPv6
 * address as its IPv4 address, IPv6 in RFC 5952 form (with `prefix6`, its network as
 * "net/bits"), anything else unchanged.
 */
export function canonicalIdentity(identity, prefix6) {
  if (isIPv4(identity)) return identity;
  const groups = ipv6Groups(identity);
  if (!groups) return identity;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
  }
  if (prefix6 === undefined) return ipv6Text(groups);
  const masked = groups.map((g, i) => {
    const bits = Math.max(0, Math.min(16, prefix6 - 16 * i));
    return g & ((0xffff << (16 - bits)) & 0xffff);
  });
  return `${ipv6Text(masked)}/${prefix6}`;
}

/** The UTC calendar day of a unix time in ms, YYYY-MM-DD. */
export const utcDay = (ms) => new Date(ms).toISOString().slice(0, 10);

/**
 * @param {string | Buffer} secret the module's RL_SECRET
 * @param {number} nowMs unix time in ms (the day the pseudonym belongs to)
 */
export function pseudonymOf(secret, identity, { scope, prefix6 } = {}, nowMs) {
  const hex = createHmac('sha256', secret)
    .update(`${canonicalIdentity(identity, prefix6)}|${utcDay(nowMs)}`)
    .digest('hex')
    .slice(0, 24);
  return scope === undefined ? hex : `${hex}:${scope}`;
}
