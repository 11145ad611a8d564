// redis-rl/rate-limiter-flexible: RateLimiterRedisRl takes RateLimiterRedis's options and
// methods, and the module decides. It extends the library's RateLimiterStoreAbstract, as
// RateLimiterRedis does, so the library's own code runs on top of the module's numbers:
// blockDuration, inMemoryBlockOnConsumed / inMemoryBlockDuration, execEvenly (with
// execEvenlyMinDelayMs), the insuranceLimiter (blockDuration and execEvenly copied into
// it), and RateLimiterUnion, BurstyRateLimiter and RLWrapperBlackAndWhite around it.
//
// What the module does not keep is emulated on one extra key per identity, in the same
// cluster slot (`<key>:set`): set(), block(), the block that blockDuration starts, and
// limiters the module cannot express (points < 1, duration 0: a counter that never
// expires). While that key exists it is the identity's state, counted as
// RateLimiterRedis counts its key; the module's limit is not spent meanwhile.
//
// customIncrTtlLuaScript is the app's own script for RateLimiterRedis's key: a limiter
// given one runs it as RateLimiterRedis does (EVAL on the key, same KEYS and ARGV) and
// reads its reply the same way, so it decides exactly as the stock store with that
// script; the module's commands are not used for it.
//
// RateLimiterUnionRl is the atomic union: its limiters are one RL.ALL, all or nothing.
import { createRequire } from 'node:module';
import { RateLimitConfigError, RedisCommandError, withTimeout } from '../limiter.js';
import { limitFor, makeLimiter, tagged, usedBefore } from './core.js';

const WHO = 'redis-rl/rate-limiter-flexible';
const require = createRequire(import.meta.url);
const RateLimiterStoreAbstract = require('rate-limiter-flexible/lib/RateLimiterStoreAbstract.js');
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes.js');

/** A caller's mistake: raised to the caller, never handed to the insuranceLimiter. */
export class RateLimiterArgumentError extends TypeError {
  name = 'RateLimiterArgumentError';
}

/**
 * Points as RateLimiterRedis accepts them: an integer, or a string of digits ('5'), with
 * its messages. Returns the number.
 */
export function pointsOf(points) {
  if (typeof points === 'string') {
    if (!/^[1-9][0-9]*$/.test(points)) throw new RateLimiterArgumentError('Consuming string different than integer values is not supported by this package');
    return Number(points);
  }
  if (!Number.isInteger(points)) throw new RateLimiterArgumentError('Consuming decimal number of points is not supported by this package');
  return points;
}

// rejectIfRedisNotReady's test, as RateLimiterRedis reads each client's readiness.
const isReady = (client, key) => {
  if (typeof client.status === 'string') return client.status === 'ready';
  if (typeof client.isReady === 'function') return client.isReady();
  if (typeof client.isReady === 'boolean') return client.isReady;
  if (typeof client._slots?.getClient === 'function') {
    if (typeof client.isOpen === 'boolean' && !client.isOpen) return false;
    try {
      return client._slots.getClient(key, false)?.isReady === true;
    } catch {
      return false;
    }
  }
  return true;
};

export class RateLimiterRedisRl extends RateLimiterStoreAbstract {
  #made;
  #rejectIfNotReady;
  // Keys whose block the module started in the reply being settled: the library's
  // _afterConsume then asks to write it, and there is nothing left to write.
  #justBlocked = new Set();

  /**
   * @param {{ storeClient: unknown, points: number, duration: number, keyPrefix?: string,
   *   insuranceLimiter?: object, blockDuration?: number, execEvenly?: boolean, execEvenlyMinDelayMs?: number,
   *   inMemoryBlockOnConsumed?: number, inMemoryBlockDuration?: number, rejectIfRedisNotReady?: boolean,
   *   useRedisPackage?: boolean, customIncrTtlLuaScript?: string, algorithm?: 'slidecount'|'slidelog'|'gcra'|'fixed'|'counter', burst?: number,
   *   shadow?: boolean, onShadow?: Function, onError?: Function, timeout?: number, clock?: () => number }} opts
   */
  constructor(opts = {}) {
    if (opts.customIncrTtlLuaScript !== undefined && (typeof opts.customIncrTtlLuaScript !== 'string' || !opts.customIncrTtlLuaScript.trim())) {
      throw new RateLimiterArgumentError(`${WHO}: option 'customIncrTtlLuaScript' must be the text of a Lua script, got ${typeof opts.customIncrTtlLuaScript}`);
    }
    if (opts.customIncrTtlLuaScript && (opts.shadow || opts.onShadow)) throw new RateLimiterArgumentError(`${WHO}: shadow mode is the module's; a limiter with customIncrTtlLuaScript decides with your script, which has no shadow mode`);
    if (opts.useRedis3AndLowerPackage) throw new RateLimiterArgumentError(`${WHO}: option 'useRedis3AndLowerPackage': node-redis 3 has no sendCommand the kit can route; use node-redis 4+ or ioredis`);
    if (opts.failure !== undefined) {
      throw new RateLimiterArgumentError(`${WHO}: the failure policy is rate-limiter-flexible's insuranceLimiter (or the rejected promise), not a 'failure' option`);
    }
    if (opts.metrics) {
      // A failure goes to the insuranceLimiter or to the app's catch: neither outcome is the kit's to know.
      throw new RateLimiterArgumentError(`${WHO}: this adapter records no metrics (a failure is decided by the insuranceLimiter or your catch, which the kit cannot see); count in your consume() handlers, or use the kit's limiter with metrics`);
    }
    super(opts);
    this.client = opts.storeClient;
    if (!(this.duration >= 0)) throw new RateLimiterArgumentError(`${WHO}: duration must be 0 (never expires) or a positive number of seconds, got ${opts.duration}`);
    // useRedisPackage only chose RateLimiterRedis's call style; the kit tells the clients apart itself.
    this.useRedisPackage = Boolean(opts.useRedisPackage);
    this.#rejectIfNotReady = Boolean(opts.rejectIfRedisNotReady);
    try {
      this.#made = makeLimiter(WHO, { ...opts, client: opts.storeClient }, 'library');
    } catch (err) {
      // rejectIfRedisNotReady reads the client's readiness first, as RateLimiterRedis does,
      // so a client the kit cannot drive fails then (not-ready wins); without it, now.
      if (!this.#rejectIfNotReady || !(err instanceof TypeError)) throw err;
      this.#made = err;
    }
    // The module takes whole positive limits over a positive window; the library also
    // accepts 0 or negative points (everything is refused) and duration 0 (never
    // expires): those limiters count on the emulation key, as RateLimiterRedis does.
    this.counterOnly = !(Number.isInteger(this.points) && this.points >= 1 && this.duration > 0);
    this.script = opts.customIncrTtlLuaScript || null;
    if (!this.counterOnly && !this.script && !(this.#made instanceof Error)) {
      this.policy = limitFor(this.#adapter, this.keyPrefix || 'rlflx', this.points, Math.round(this.duration * 1000), (key) => this.#keyOf(key));
      // blockDuration is the module's BLOCK: the denial that starts it and every call while
      // it holds are one atomic call each (STRIKES counts the calls made while blocked).
      if (this.blockDuration > 0) this.policy.block = { duration: `${Math.round(this.blockDuration * 1000)}ms`, strikes: true };
      // On RateLimiterRedis's own window the counter counts as its INCRBY does, denied
      // calls included, so consumedPoints (and get()) say what the stock store's would.
      if (this.policy.algorithm === 'counter') this.policy.countAll = true;
    }
  }

  get #adapter() {
    if (this.#made instanceof Error) throw this.#made;
    return this.#made;
  }

  get shadowDenials() {
    return this.#adapter.rl.shadowDenials;
  }

  #keyOf(key) {
    return tagged(this.keyPrefix ? `${this.keyPrefix}:` : '', key);
  }

  #policyFor(msDuration) {
    if (msDuration === this.policy.window) return this.policy;
    return { ...this.policy, window: `${Math.round(msDuration)}ms` };
  }

  /** The limiter's own commands (the emulation key), with the kit's timeout; errors reject. */
  async #raw(cmds) {
    const settled = await withTimeout(this.#adapter.rl.connection.batch(cmds), this.#adapter.rl.timeout);
    return settled.map((s) => {
      if (s.status === 'rejected') throw s.reason;
      return s.value;
    });
  }

  #assertReady(rlKey) {
    if (this.#rejectIfNotReady && !isReady(this.client, rlKey)) throw new Error('Redis connection is not ready');
    return this.#adapter;
  }

  // Caller errors go back to the caller; everything else (Redis failing) to the library's
  // insuranceLimiter, as RateLimiterRedis does.
  _handleError(err, funcName, resolve, reject, params) {
    if (err instanceof RateLimiterArgumentError || err instanceof RateLimitConfigError || err instanceof RedisCommandError) return reject(err);
    return super._handleError(err, funcName, resolve, reject, params);
  }

  _getRateLimiterRes(rlKey, changedPoints, { consumed, ms }) {
    const res = new RateLimiterRes();
    res.consumedPoints = consumed;
    res.isFirstInDuration = consumed === changedPoints;
    res.remainingPoints = Math.max(this.points - consumed, 0);
    res.msBeforeNext = ms;
    return res;
  }

  /**
   * RateLimiterRedis's upsert, on the module: `points` spent (negative: given back) over
   * `msDuration`; forceExpire writes the state (set, block) on the emulation key.
   * Resolves to { consumed, ms } as RateLimiterRedis's counter and PTTL would say.
   */
  async _upsert(rlKey, points, msDuration, forceExpire = false, options = {}) {
    const n = pointsOf(points);
    this.#assertReady(rlKey);
    const key = this.#keyOf(this.parseKey(rlKey));
    const over = `${key}:set`;
    const px = msDuration >= 1 ? ['PX', String(Math.round(msDuration))] : [];
    if (this.script) return this.#scripted(rlKey, n, msDuration, forceExpire);
    if (forceExpire) {
      const [, ttl] = await this.#raw([{ args: ['SET', over, String(n), ...px], key: over }, { args: ['PTTL', over], key: over }]);
      return { consumed: n, ms: Number(ttl) };
    }
    if (this.counterOnly || msDuration < 1) return this.#count(over, n, px);

    const policy = this.#policyFor(msDuration);
    const cost = Math.abs(n);
    const mode = n < 0 ? 'REFUND' : n === 0 ? 'PEEK' : undefined;
    const [[ttl], decision] = await Promise.all([
      this.#raw([{ args: ['PTTL', over], key: over }]),
      this.#adapter.rl.check(policy, this.parseKey(rlKey), { cost: cost || 1, mode }),
    ]);
    if (decision.source === 'failure') throw decision.error;
    if (Number(ttl) !== -2) {
      // The emulation key holds the state: what the module just spent goes back.
      if (!mode && (decision.allowed || policy.countAll)) await this.#adapter.rl.refund(policy, this.parseKey(rlKey), { cost });
      return this.#count(over, n, []);
    }
    return this.#fromDecision(decision, n, policy, options, rlKey);
  }

  _block(rlKey, initPoints, msDuration, options = {}) {
    if (this.#justBlocked.delete(rlKey)) return Promise.resolve(new RateLimiterRes(0, msDuration, initPoints));
    return super._block(rlKey, initPoints, msDuration, options);
  }

  // RateLimiterRedis's _upsert with the app's script, on RateLimiterRedis's own key: the
  // same EVAL (KEYS[1] = the key; ARGV = points, whole seconds, the limiter's points and
  // duration), and the same SET or INCRBY where RateLimiterRedis runs no script.
  async #scripted(rlKey, n, msDuration, forceExpire) {
    const secs = Math.floor(msDuration / 1000);
    let reply;
    if (forceExpire) {
      reply = (await this.#raw([{ args: ['SET', rlKey, String(n), ...(secs > 0 ? ['EX', String(secs)] : [])], key: rlKey }, { args: ['PTTL', rlKey], key: rlKey }])).slice(1);
      reply.unshift(n);
    } else if (secs > 0) {
      [reply] = await this.#raw([{ args: ['EVAL', this.script, '1', rlKey, String(n), String(secs), String(this.points), String(this.duration)], key: rlKey }]);
      if (!Array.isArray(reply) || reply.length < 2) throw new RedisCommandError(`${WHO}: customIncrTtlLuaScript must return {consumed, ttl_ms}, got ${JSON.stringify(reply)}`, { command: 'EVAL' });
    } else {
      reply = await this.#raw([{ args: ['INCRBY', rlKey, String(n)], key: rlKey }, { args: ['PTTL', rlKey], key: rlKey }]);
    }
    return { consumed: Number.parseInt(reply[0], 10), ms: Number(reply[1]) };
  }

  // RateLimiterRedis's own counting, on the emulation key.
  async #count(over, n, px) {
    const [, consumed, ttl] = await this.#raw([
      { args: ['SET', over, '0', ...px, 'NX'], key: over },
      { args: ['INCRBY', over, String(n)], key: over },
      { args: ['PTTL', over], key: over },
    ]);
    return { consumed: Number(consumed), ms: Number(ttl) };
  }

  async #fromDecision(d, n, policy, options, rlKey) {
    const windowMs = Number.parseInt(policy.window, 10);
    if (d.strikes > 0) {
      // Blocked by the module. The call that started the block reads as the library's
      // first overflow (points + cost), so its own block logic runs once; later calls
      // count past it, as RateLimiterRedis's counter does while blocked.
      if (d.strikes === 1 && n > 0 && !options.penalty) this.#justBlocked.add(rlKey);
      return { consumed: this.points + Math.max(n, 0) + d.strikes - 1, ms: d.retryAfter };
    }
    if (n <= 0) {
      const used = usedBefore(d, this.points);
      return { consumed: used, ms: used > 0 ? d.resetAfter : 0 };
    }
    const used = this.points - d.remaining;
    if (d.allowed) {
      return { consumed: used, ms: d.resetAfter };
    }
    if (this.#adapter.shadow) {
      this.#adapter.rl.shadowed(d, { keys: d.limits.map((l) => l.key) });
      return { consumed: this.points, ms: Number.isFinite(d.retryAfter) ? d.retryAfter : windowMs };
    }
    if (options.penalty && d.remaining > 0) {
      // A penalty is never refused: what is left is spent, and the count says the rest.
      const spent = await this.#adapter.rl.check(policy, options.penalty, { cost: d.remaining });
      if (spent.source === 'failure') throw spent.error;
    }
    // A cost that can never fit has no retry time: the window is the honest wait.
    const ms = Number.isFinite(d.retryAfter) ? d.retryAfter : windowMs;
    if (policy.countAll) {
      // The denial was counted, and the reply's remaining stops at 0: the counter says how
      // far past the limit it is (inMemoryBlockOnConsumed above points + cost needs that).
      const key = this.#keyOf(this.parseKey(rlKey));
      const [count] = await this.#raw([{ args: ['GET', key], key }]);
      return { consumed: Math.max(used + n, Number(count) || 0), ms };
    }
    return { consumed: used + n, ms };
  }

  _penalty(key, points = 1, options = {}) {
    const rlKey = this.getKey(key);
    return this._upsert(rlKey, points, this._getKeySecDuration(options) * 1000, false, { ...options, penalty: key })
      .then((res) => this._getRateLimiterRes(rlKey, pointsOf(points), res));
  }

  async _get(rlKey) {
    this.#assertReady(rlKey);
    if (this.script) {
      const [value, ttl] = await this.#raw([{ args: ['GET', rlKey], key: rlKey }, { args: ['PTTL', rlKey], key: rlKey }]);
      return value === null || value === undefined ? null : { consumed: Number(value), ms: Number(ttl) };
    }
    const key = this.#keyOf(this.parseKey(rlKey));
    const over = `${key}:set`;
    // A counter that counts denials is read as RateLimiterRedis reads its key: past the
    // limit too, where a PEEK's remaining stops at 0.
    const counted = this.policy?.countAll ? [{ args: ['GET', key], key }] : [];
    const [[value, ttl, count], peek] = await Promise.all([
      this.#raw([{ args: ['GET', over], key: over }, { args: ['PTTL', over], key: over }, ...counted]),
      this.counterOnly ? null : this.#adapter.rl.peek(this.policy, this.parseKey(rlKey)),
    ]);
    if (value !== null && value !== undefined) return { consumed: Number(value), ms: Number(ttl) };
    if (!peek) return null;
    if (peek.source === 'failure') throw peek.error;
    if (peek.strikes > 0) return { consumed: this.points + peek.strikes, ms: peek.retryAfter };
    if (count !== null && count !== undefined) return { consumed: Number(count), ms: peek.resetAfter };
    const used = usedBefore(peek, this.points);
    return used > 0 ? { consumed: used, ms: peek.resetAfter } : null;
  }

  async _delete(rlKey) {
    this.#assertReady(rlKey);
    if (this.script) return Number((await this.#raw([{ args: ['DEL', rlKey], key: rlKey }]))[0]) > 0;
    const identity = this.parseKey(rlKey);
    const over = `${this.#keyOf(identity)}:set`;
    const [[removed], [before, reset] = []] = await Promise.all([
      this.#raw([{ args: ['DEL', over], key: over }]),
      this.counterOnly ? undefined : this.#adapter.rl.batch([
        { limits: this.policy, identity, mode: 'PEEK' },
        { limits: this.policy, identity, mode: 'RESET' },
      ]),
    ]);
    for (const d of [before, reset]) if (d?.source === 'failure') throw d.error;
    return Number(removed) > 0 || (before ? usedBefore(before, this.points) > 0 : false);
  }

  /** @internal for RateLimiterUnionRl */
  get _adapter() {
    return this.#adapter;
  }
}

/**
 * RateLimiterUnion's shape (resolve/reject with an object keyed by keyPrefix), but all
 * limiters are one RL.ALL: either all spend or none does. When Redis fails and every
 * limiter has an insuranceLimiter, a RateLimiterUnion of those decides (give them
 * distinct keyPrefixes, as for RateLimiterUnion). RateLimiterUnion itself also
 * takes RateLimiterRedisRl, and then spends each one separately, as it does for others.
 */
export class RateLimiterUnionRl {
  #limiters;

  constructor(...limiters) {
    if (!limiters.length) throw new RateLimiterArgumentError(`${WHO}: RateLimiterUnionRl needs at least one limiter`);
    if (!limiters.every((l) => l instanceof RateLimiterRedisRl)) {
      throw new RateLimiterArgumentError(`${WHO}: RateLimiterUnionRl takes RateLimiterRedisRl limiters (use the library's RateLimiterUnion for others)`);
    }
    if (limiters.some((l) => l.counterOnly || l.script)) {
      throw new RateLimiterArgumentError(`${WHO}: RateLimiterUnionRl needs limiters the module decides (points >= 1, duration > 0, no customIncrTtlLuaScript); use RateLimiterUnion for the others`);
    }
    this.#limiters = limiters;
  }

  async consume(key, points = 1) {
    const cost = pointsOf(points);
    if (cost < 1) throw new RateLimiterArgumentError(`${WHO}: RateLimiterUnionRl consumes at least 1 point, got ${points}`);
    const [first] = this.#limiters;
    // All or nothing: a denied union spends on no limiter (countAll is RL.COUNTER's alone).
    const policies = this.#limiters.map(({ policy: { countAll, ...policy } }) => policy);
    const decision = await first._adapter.rl.check(policies, key, { cost });
    if (decision.source === 'failure') {
      // Redis could not decide: the limiters' insurance limiters do, as a union of their own.
      const insurance = this.#limiters.map((l) => l.insuranceLimiter);
      if (!insurance.every(Boolean)) throw decision.error;
      const { RateLimiterUnion } = require('rate-limiter-flexible');
      return new RateLimiterUnion(...insurance).consume(key, cost);
    }
    // Shadow mode is the union's (its first limiter's): a would-be denial passes,
    // reported once, having spent nothing, like a single limiter's.
    const shadow = !decision.allowed && first._adapter.shadow;
    if (shadow) first._adapter.rl.shadowed(decision, { keys: decision.limits.map((d) => d.key) });
    const result = {};
    this.#limiters.forEach((limiter, i) => {
      const one = decision.limits[i];
      const consumed = limiter.points - one.remaining + (one.allowed && decision.allowed ? 0 : cost);
      const windowMs = Number.parseInt(limiter.policy.window, 10);
      const ms = one.allowed ? one.resetAfter : (Number.isFinite(one.retryAfter) ? one.retryAfter : windowMs);
      // As RateLimiterUnion: on a denial, only the limiters that denied are in the result.
      if (decision.allowed || shadow || !one.allowed) {
        result[limiter.keyPrefix] = new RateLimiterRes(one.remaining, ms, shadow ? Math.min(consumed, limiter.points) : consumed, false);
      }
    });
    if (!decision.allowed && !shadow) throw result;
    return result;
  }
}

export default RateLimiterRedisRl;
