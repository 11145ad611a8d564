import { asScript, BACKENDS, isNoScript, isUnknownRlCommand } from './backend.js';
import { adapt, connectionCount } from './clients.js';
import { buildCommand, costsFor, keyFor, RateLimitConfigError, throttleCommand, toDecision, toThrottle } from './commands.js';
import { DenyCache } from './deny-cache.js';
import { rateLimitHeaders } from './headers.js';
import { Metrics, backendOf, outcomeOf, since } from './metrics.js';
import { rateLimitMiddleware } from './middleware.js';
import { pseudonymOf } from './pseudonym.js';

export { RateLimitConfigError };

export class TimeoutError extends Error {
  name = 'TimeoutError';
}

// The clients' own timeouts depend on how the user configured them (and an offline
// queue can hold a command for as long as reconnecting takes), so every call is also
// bounded here.
export function withTimeout(promise, ms) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`redis-rl: no reply within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * An error reply that is the caller's to fix (a bad argument, a missing module, a wrong
 * key type, an ACL): raised to the caller, never sent to the failure policy.
 */
export class RedisCommandError extends Error {
  name = 'RedisCommandError';

  constructor(message, { command, cause }) {
    super(message, { cause });
    this.command = command;
  }
}

// Replies that mean Redis cannot serve now (loading, a read-only replica, a busy script,
// out of memory, a cluster in trouble): those are the failure policy's.
const UNAVAILABLE = /^(LOADING|READONLY|BUSY|OOM|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|MISCONF|MOVED|ASK)\b/;

const REPLY_CLASSES = new Set(['ReplyError', 'ErrorReply', 'SimpleError', 'BlobError']);

/** The caller's error for an error reply, or undefined when it is Redis failing. */
export function callerError(err, command) {
  // ioredis: ReplyError; node-redis: SimpleError / BlobError (ErrorReply in older versions).
  if (!isReply(err) || UNAVAILABLE.test(err.message)) return undefined;
  if (/^ERR unknown command/i.test(err.message) && /^'?RL\./i.test(command)) {
    return new RedisCommandError(`redis-rl: this server does not know ${command}: the redis-rl module is not loaded on it. `
      + "Load it at startup ('loadmodule /path/to/libredis_rl.so' in redis.conf, or redis-server --loadmodule /path/to/libredis_rl.so) "
      + `or at run time with MODULE LOAD /path/to/libredis_rl.so. (${err.message})`, { command, cause: err });
  }
  return new RedisCommandError(`redis-rl: ${command} was refused: ${err.message}`, { command, cause: err });
}

const isReply = (err) => err && (err.name === 'ReplyError' || REPLY_CLASSES.has(err.constructor?.name));

const settle = (promise) => promise.then(
  (value) => ({ status: 'fulfilled', value }),
  (reason) => ({ status: 'rejected', reason }),
);

function defaultOnError(err, { command, failure }) {
  const outcome = { open: 'allowing', closed: 'denying' }[failure] ?? `${failure} decides`;
  console.warn(`redis-rl: ${command} failed, ${outcome}: ${err.message}`);
}

function defaultOnShadow(decision, { keys }) {
  const retry = Number.isFinite(decision.retryAfter) ? `${decision.retryAfter} ms` : 'never';
  console.warn(`redis-rl: shadow: would deny ${keys.join(', ')} (retry after ${retry}), letting it pass`);
}

export class RateLimiter {
  #client;
  #failure;
  #onError;
  #timeout;
  #sendNow;
  #denyCache;
  #onShadow;
  #metrics;
  #backend;
  /** With backend 'auto': what the server answered with, and on which connection. */
  #detected;
  #detectedOn;
  #connections;
  #secret;

  /** Requests that shadow mode let through although Redis denied them. */
  shadowDenials = 0;

  /** @param {import('../index.js').LimiterOptions} options */
  constructor({
    client, failure, onError = defaultOnError, onShadow = defaultOnShadow, timeout = 300, clock, denyCache = false, backend = 'auto', secret,
    metrics = false,
  } = {}) {
    // 'library' is for the framework adapters: the error goes back to the library's own switch.
    if (failure !== 'open' && failure !== 'closed' && failure !== 'library') {
      throw new TypeError("redis-rl: choose a failure policy: failure: 'open' (allow while Redis fails) or 'closed' (deny)");
    }
    if (!BACKENDS.includes(backend)) {
      throw new RateLimitConfigError(`redis-rl: backend must be 'auto' (the module where the server has it, else the scripts), 'module' or 'scripts'; got ${JSON.stringify(backend)}`);
    }
    if (secret !== undefined && !(typeof secret === 'string' || secret instanceof Uint8Array) || secret === '') {
      throw new RateLimitConfigError('redis-rl: secret (the servers\' RL_SECRET, for pseudonym() on the scripts backend) must be a non-empty string or a Buffer (Uint8Array)');
    }
    this.#client = adapt(client);
    this.#backend = backend;
    this.#secret = secret;
    // A new connection may be to another server (a failover) or to one that has loaded
    // the module since: auto asks again.
    this.#connections = backend === 'auto' ? connectionCount(client) : () => 0;
    this.#failure = failure;
    this.#onError = onError;
    this.#onShadow = onShadow;
    this.#timeout = timeout;
    // An injected clock is the fleet's clock: the server decides at its time (NOW).
    this.#sendNow = clock !== undefined;
    /** Unix time in ms, the time base of the deny cache and of the pseudonym day. */
    this.clock = clock ?? Date.now;
    if (denyCache) this.#denyCache = new DenyCache(denyCache === true ? {} : denyCache);
    if (metrics) this.#metrics = new Metrics(metrics);
  }

  /** The client as the kit drives it: send(cmd), batch(cmds) (for adapters' own commands). */
  get connection() {
    return this.#client;
  }

  /**
   * What decides now: 'module' (the RL.* commands) or 'scripts' (their Lua twins). With
   * backend 'auto' it is what the server last answered with, 'module' until then (the
   * next call asks the module first).
   * @returns {'module' | 'scripts'}
   */
  get activeBackend() {
    return this.#backend === 'auto' ? this.#known() ?? 'module' : this.#backend;
  }

  /** How long a call may take before it fails with a TimeoutError. */
  get timeout() {
    return this.#timeout;
  }

  /** Spends `cost` if every limit admits it. */
  check(limits, identity, options = {}) {
    return this.#one({ ...options, limits, identity });
  }

  /** The decision `check` would make, spending nothing. */
  peek(limits, identity, options = {}) {
    return this.#one({ ...options, limits, identity, mode: 'PEEK' });
  }

  /** Gives back `cost` units an admitted call spent; replies as `peek`. */
  refund(limits, identity, options = {}) {
    return this.#one({ ...options, limits, identity, mode: 'REFUND' });
  }

  /** Starts the block of every limit that has `block` now, whatever the limits say (IMPOSE). */
  impose(limits, identity, options = {}) {
    return this.#one({ ...options, limits, identity, mode: 'IMPOSE' });
  }

  /** Clears the limiters' state; replies as `peek` on an empty limiter. */
  reset(limits, identity, options = {}) {
    return this.#one({ ...options, limits, identity, mode: 'RESET' });
  }

  /**
   * RL.CONCURRENCY: takes a slot of a concurrency limit ({ algorithm: 'concurrency',
   * limit, window: the lease ttl }) for `lease`, or renews it (a retried acquire never
   * takes a second slot). A decision, like check.
   */
  acquire(limit, identity, lease, options = {}) {
    return this.#one({ ...options, limits: limit, identity, lease });
  }

  /** Gives the lease's slot back (an unknown or expired lease is not an error). */
  release(limit, identity, lease, options = {}) {
    return this.#one({ ...options, limits: limit, identity, lease, mode: 'REFUND' });
  }

  /** Pushes a held lease's expiry to now + ttl; denied when the lease is gone. */
  heartbeat(limit, identity, lease, options = {}) {
    return this.#one({ ...options, limits: limit, identity, lease, mode: 'HEARTBEAT' });
  }

  /**
   * RL.THROTTLE, redis-cell's CL.THROTTLE: `{ maxBurst, count, period, quantity }`.
   * Resolves to { allowed, limit, remaining, retryAfter, resetAfter } in whole seconds
   * (retryAfter -1 when allowed), as redis-cell replies; on failure, the policy's
   * decision with source 'failure'.
   */
  async throttle(key, spec, { now } = {}) {
    const nowUs = now !== undefined || this.#sendNow ? Math.round((now ?? this.clock()) * 1000) : undefined;
    const args = throttleCommand(key, spec, nowUs);
    // Quantity 0 only reports: not a decision, as peek is not.
    const counted = spec.quantity !== 0 ? [{ name: `throttle:${spec.count}/${spec.period}s` }] : [];
    const start = performance.now();
    try {
      const [settled] = await this.#call([{ args, keys: [String(key)] }]);
      if (settled.status === 'rejected') throw settled.reason;
      const reply = { ...toThrottle(settled.value), source: 'redis' };
      this.record(counted, reply, { seconds: since(start) });
      return reply;
    } catch (err) {
      const mistake = callerError(err, 'RL.THROTTLE');
      if (mistake) throw mistake;
      const d = this.failed(err, { command: 'RL.THROTTLE', keys: [String(key)] });
      this.record(counted, d, { seconds: since(start) });
      return { allowed: d.allowed, limit: 0, remaining: 0, retryAfter: -1, resetAfter: 0, source: 'failure', error: err };
    }
  }

  /**
   * Many requests in one round trip per node (per slot on an ioredis cluster).
   * @param {import('../index.js').Request[]} requests
   */
  batch(requests) {
    return this.#run(requests);
  }

  /**
   * RL.PSEUDONYM: the daily pseudonym of an identity (an IP address, an API key). It is
   * not a decision, so a failure is not turned into one: the promise rejects (within
   * `timeout`), and the middleware hands that to the failure policy. On the scripts
   * backend the kit computes it (Redis Lua has no SHA-256) from the `secret` option.
   */
  async pseudonym(identity, { scope, prefix6, now } = {}) {
    const bits = typeof prefix6 === 'string' && /^\d+$/.test(prefix6) ? Number(prefix6) : prefix6;
    if (bits !== undefined && !(Number.isInteger(bits) && bits >= 1 && bits <= 128)) {
      throw new RateLimitConfigError(`redis-rl: prefix6 must be a prefix length from 1 to 128, got ${JSON.stringify(prefix6)}`);
    }
    const local = () => this.#localPseudonym(String(identity), { scope: scope === undefined ? undefined : String(scope), prefix6: bits }, now ?? this.clock());
    if (this.#onScripts()) return local();
    const args = ['RL.PSEUDONYM', String(identity)];
    if (scope !== undefined) args.push(String(scope));
    if (prefix6 !== undefined) args.push('PREFIX6', String(prefix6));
    if (now !== undefined || this.#sendNow) args.push('NOW', String(Math.round((now ?? this.clock()) * 1000)));
    const [settled] = await this.#dispatch([{ args }]);
    if (settled.status === 'fulfilled') {
      if (this.#backend === 'auto') this.#detect('module');
      return String(settled.value);
    }
    if (this.#backend === 'auto' && isUnknownRlCommand(settled.reason)) {
      this.#detect('scripts');
      return local();
    }
    throw callerError(settled.reason, 'RL.PSEUDONYM') ?? settled.reason;
  }

  #localPseudonym(identity, options, nowMs) {
    if (this.#secret === undefined) {
      throw new RateLimitConfigError('redis-rl: pseudonym() on the scripts backend needs the secret option (the RL_SECRET the servers\' module uses): '
        + 'there is no script for RL.PSEUDONYM (Redis Lua has no SHA-256), so the kit computes it, and cannot without the secret');
    }
    return pseudonymOf(this.#secret, identity, options, nowMs);
  }

  /** The RateLimit headers for a decision; see headers.js. */
  headers(decision, options) {
    return rateLimitHeaders(decision, options);
  }

  /** Express/Connect middleware; see middleware.js. */
  middleware(options) {
    return rateLimitMiddleware(this, options);
  }

  /**
   * The decision the failure policy gives when Redis could not decide, after reporting
   * the error. Public so that callers (the middleware) apply the same policy.
   */
  failed(err, info) {
    this.#onError(err, { ...info, failure: this.#failure });
    return { allowed: this.#failure === 'open', remaining: 0, retryAfter: 0, resetAfter: 0, limits: [], source: 'failure', error: err };
  }

  /**
   * Shadow mode: Redis denied, the caller lets the request pass. Counted and reported
   * to `onShadow`, so a team sees what a new limit would do before enforcing it.
   */
  shadowed(decision, info) {
    this.shadowDenials += 1;
    this.#onShadow(decision, info);
  }

  /**
   * Counts a decision in the metrics (when on), once per limit; `seconds` is the call's
   * wall time (none for a deny-cache hit). Public for the middleware, whose failure to
   * identify the caller is a decision that made no limiter call.
   */
  record(limits, decision, { seconds, shadow = false, failure = this.#failure } = {}) {
    if (!this.#metrics) return;
    this.#metrics.record(limits, outcomeOf(decision, failure, shadow), backendOf(this), decision.source === 'cache' ? undefined : seconds);
  }

  async #one(request) {
    return (await this.#run([request]))[0];
  }

  #prepare({ limits, identity, cost, now, mode, lease, shadow, libraryFailure }) {
    const list = Array.isArray(limits) ? limits : [limits];
    const keys = list.map((limit) => keyFor(limit, identity));
    const costs = costsFor(list, cost);
    const atMs = now ?? this.clock();
    const nowUs = now !== undefined || this.#sendNow ? Math.round(atMs * 1000) : undefined;
    return {
      list,
      keys,
      costs,
      atMs,
      mode,
      // Spends are the decisions the metrics count (a peek, a refund... would count one request twice).
      counted: mode === undefined ? list : [],
      shadow,
      // An adapter's library applies its own switch ('open' | 'closed') to a failure.
      libraryFailure,
      args: buildCommand(list, keys, costs, { nowUs, mode, lease }),
      // A lease can be released any moment by another request, and a counter that counts
      // its denials (countAll, escalate) must see each one: neither denial is cached.
      cacheable: !list.some((l) => String(l.algorithm).toLowerCase() === 'concurrency' || l.countAll || l.escalate),
      signature: list.map((l, i) => `${l.algorithm} ${keys[i]} ${l.limit} ${l.window} ${l.burst ?? ''} ${JSON.stringify(l.block ?? '')}`).join('\n'),
    };
  }

  async #run(requests) {
    const prepared = requests.map((r) => this.#prepare(r));
    const decisions = new Array(prepared.length);
    const pending = [];
    prepared.forEach((p, i) => {
      if (p.mode === 'REFUND' || p.mode === 'RESET' || p.mode === 'IMPOSE') {
        this.#denyCache?.forget(p.keys);
      } else if (p.cacheable) {
        decisions[i] = this.#denyCache?.lookup(p.signature, p.costs, p.atMs);
      }
      if (!decisions[i]) pending.push(i);
    });
    if (!pending.length) return this.#recorded(prepared, decisions);

    const start = performance.now();
    const settled = await this.#call(pending.map((i) => ({ args: prepared[i].args, keys: prepared[i].keys })));
    const seconds = since(start);

    pending.forEach((i, j) => {
      const mistake = settled[j].status === 'rejected' && callerError(settled[j].reason, prepared[i].args[0]);
      if (mistake) throw mistake;
    });
    pending.forEach((i, j) => {
      const p = prepared[i];
      const info = { command: p.args[0], keys: p.keys };
      if (settled[j].status === 'rejected') {
        decisions[i] = this.failed(settled[j].reason, info);
        return;
      }
      try {
        decisions[i] = toDecision(settled[j].value, p.list, p.keys);
      } catch (err) {
        decisions[i] = this.failed(err, info);
        return;
      }
      if ((!p.mode || p.mode === 'PEEK') && p.cacheable) this.#denyCache?.remember(p.signature, p.costs, p.atMs, decisions[i]);
    });
    return this.#recorded(prepared, decisions, seconds);
  }

  #recorded(prepared, decisions, seconds) {
    prepared.forEach((p, i) => this.record(p.counted, decisions[i], { seconds, shadow: p.shadow, failure: p.libraryFailure }));
    return decisions;
  }

  #onScripts() {
    return this.#backend === 'scripts' || (this.#backend === 'auto' && this.#known() === 'scripts');
  }

  /** Auto: what this connection answered with, undefined before its first answer. */
  #known() {
    return this.#detectedOn === this.#connections() ? this.#detected : undefined;
  }

  #detect(backend) {
    this.#detected = backend;
    this.#detectedOn = this.#connections();
  }

  /**
   * Module command lines (`{ args, keys }`: keys are the command's own, in order) on the
   * backend in force; settles each. With 'auto', an `unknown command 'RL.…'` reply marks
   * the server as one without the module and that call runs on the scripts at once, so
   * no decision is lost.
   */
  async #call(cmds) {
    if (this.#onScripts()) return this.#scripts(cmds);
    const settled = await this.#dispatch(cmds.map(({ args, keys }) => ({ args, key: keys[0] })));
    if (this.#backend !== 'auto') return settled;
    const unknown = [];
    settled.forEach((s, i) => {
      if (s.status === 'rejected' && isUnknownRlCommand(s.reason)) unknown.push(i);
    });
    if (unknown.length) {
      this.#detect('scripts');
      const again = await this.#scripts(unknown.map((i) => cmds[i]));
      unknown.forEach((i, j) => { settled[i] = again[j]; });
    } else if (settled.some((s) => s.status === 'fulfilled')) {
      this.#detect('module');
    }
    return settled;
  }

  /**
   * The commands as their scripts, by EVALSHA. A restart, a failover or SCRIPT FLUSH
   * empties the server's script cache (NOSCRIPT): those calls are sent again with the
   * script's text (EVAL, which caches it again), else every call would fail from then on.
   */
  async #scripts(cmds) {
    const settled = await this.#dispatch(cmds.map((cmd) => asScript(cmd)));
    const missing = [];
    settled.forEach((s, i) => {
      if (s.status === 'rejected' && isNoScript(s.reason)) missing.push(i);
    });
    if (missing.length) {
      const again = await this.#dispatch(missing.map((i) => asScript(cmds[i], { eval: true })));
      missing.forEach((i, j) => { settled[i] = again[j]; });
    }
    return settled;
  }

  /** One round trip (a pipeline for several), bounded by `timeout`; settles each command. */
  async #dispatch(cmds) {
    let settled;
    if (cmds.length === 1) {
      settled = [await settle(withTimeout(this.#client.send(cmds[0]), this.#timeout))];
    } else {
      const all = await settle(withTimeout(this.#client.batch(cmds), this.#timeout));
      settled = all.status === 'fulfilled' ? all.value : cmds.map(() => all);
    }
    // No answer (a lost connection, a timeout): the next one may come from another
    // server, so auto asks the module again.
    if (this.#backend === 'auto' && settled.some((s) => s.status === 'rejected' && !isReply(s.reason))) this.#detected = undefined;
    return settled;
  }
}

/** @param {import('../index.js').LimiterOptions} options */
export function createRateLimiter(options) {
  return new RateLimiter(options);
}
