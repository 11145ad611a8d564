// Types for redis-rl (the code is plain ESM JavaScript, no build step).

/**
 * 'counter' is the window of rate-limit-redis, @fastify/rate-limit and RateLimiterRedis:
 * it starts at the first hit and ends when its one key (the limit's key itself) expires.
 * 'slidewindow' and 'tokenbucket' are Symfony's sliding window (anchored at the first
 * admitted call) and token bucket (`refill` tokens back at each whole window).
 */
export type Algorithm = 'slidelog' | 'slidecount' | 'slidewindow' | 'fixed' | 'counter' | 'gcra' | 'tokenbucket' | 'concurrency';

/** One limit: what the command needs (the reply does not repeat it) and what the headers show. */
export interface Limit {
  /** Shown in the headers and part of the default key. Default: the algorithm. */
  name?: string;
  algorithm: Algorithm;
  /** The budget per window. */
  limit: number;
  /** A number is seconds; a string '60s' or '1500ms'. */
  window: number | string;
  /** GCRA only: how many may arrive at once (default: limit). */
  burst?: number;
  /** 'tokenbucket' only: the tokens each whole window brings back (default 1); `limit` is the capacity. */
  refill?: number;
  /**
   * The penalty box (the module's BLOCK): a denied spending call blocks the identity for
   * this duration (as a window), or `{ duration, extend, backoff, strikes }`.
   */
  block?: number | string | { duration: number | string; extend?: boolean; backoff?: number | string; strikes?: boolean };
  /** 'counter' only, alone (not with other limits): every spending call adds its cost, denied ones too (COUNTALL). */
  countAll?: boolean;
  /** 'counter' only, alone: every counted call sets the TTL back to the full window (RENEW). */
  renew?: boolean;
  /**
   * 'counter' only, alone, not with renew: every call counts (as countAll), and each denial
   * sets the TTL to window × 2^(count − limit − 1), at most 2^53 − 1 ms (ESCALATE).
   */
  escalate?: boolean;
  /**
   * The Redis key, or a function from identity to key. Default `rl:{<identity>}:<name>`:
   * the hash tag keeps all limits of one identity in one cluster slot.
   */
  key?: string | ((identity: string | undefined) => string);
}

export interface CallOptions {
  /** Units this request spends: one number for every limit, or per limit name (default 1). */
  cost?: number | string | Record<string, number | string>;
  /** Decide at this unix time in milliseconds (sent as NOW in µs) instead of the server clock. */
  now?: number;
  /** The lease id for a concurrency limit among the limits (RL.ALL … LEASE id). */
  lease?: string;
  /** The caller lets a denial through (shadow mode): counted as shadow_denied in the metrics. */
  shadow?: boolean;
}

export interface Request extends CallOptions {
  limits: Limit | Limit[];
  identity?: string;
  mode?: 'PEEK' | 'REFUND' | 'RESET';
}

/** What one limit says. Times are milliseconds. */
export interface LimitDecision {
  allowed: boolean;
  remaining: number;
  /** 0 when allowed; else the wait after which the same request passes; Infinity: never (cost above the limit). */
  retryAfter: number;
  /** Until the limiter is back to its full budget; 0 when it is. */
  resetAfter: number;
  policy: Limit;
  key: string;
}

export interface Decision {
  /** Every limit admits (RL.ALL: then all spend, else none). */
  allowed: boolean;
  /** The smallest remaining. */
  remaining: number;
  /** The largest retry among the limits that deny; Infinity if one never can. */
  retryAfter: number;
  /** The largest reset. */
  resetAfter: number;
  /** One per limit, in order; empty when source is 'failure'. */
  limits: LimitDecision[];
  /** 'cache': denied by the local deny cache; 'failure': Redis did not decide, the failure policy did. */
  source: 'redis' | 'cache' | 'failure';
  /** Why Redis did not decide (source 'failure'). */
  error?: Error;
}

export interface FailureInfo {
  /** 'RL.FIXED', 'RL.ALL', 'RL.PSEUDONYM', 'identify', … */
  command: string;
  keys: string[];
  failure: 'open' | 'closed';
}

export interface LimiterOptions {
  /** node-redis createClient()/createCluster(), or ioredis new Redis()/new Redis.Cluster(). */
  client: unknown;
  /** Required: 'open' allows requests while Redis fails, 'closed' denies them. */
  failure: 'open' | 'closed';
  /** Told about every failure. Default: console.warn. */
  onError?: (err: Error, info: FailureInfo) => void;
  /** Told about every denial that shadow mode let pass. Default console.warn. */
  onShadow?: (decision: Decision, info: { keys: string[] }) => void;
  /** Milliseconds to wait for a reply before the failure policy decides. Default 300. */
  timeout?: number;
  /**
   * Unix time in ms. When given, every call sends it as NOW (one app clock for the
   * fleet), and the deny cache and the pseudonym day use it. Default: the server decides
   * by its clock, the kit measures with Date.now.
   */
  clock?: () => number;
  /** Deny locally until a denial's retry time has passed. Default false. */
  denyCache?: boolean | { maxEntries?: number };
  /**
   * What decides. 'auto' (default): the module's RL.* commands where the server has the
   * module, else the same commands as Lua scripts (EVALSHA), decided once per connection
   * and again after a reconnect. 'module': only the commands. 'scripts': only the scripts.
   */
  backend?: Backend;
  /**
   * The servers' RL_SECRET, for pseudonym() on the scripts backend: the kit computes the
   * module's pseudonym itself (Redis Lua has no SHA-256). Unused while the module answers.
   */
  secret?: string | Uint8Array;
  /**
   * Count every decision and time every call in prom-client (docs/metrics.md): true for
   * its default registry, or your Registry. Default off; needs prom-client installed.
   */
  metrics?: true | MetricsRegistry;
}

/** A prom-client Registry (typed by shape, so the kit's types need no prom-client). */
export interface MetricsRegistry {
  getSingleMetric(name: string): unknown;
  registerMetric(metric: any): void;
}

export type Backend = 'auto' | 'module' | 'scripts';

export interface MiddlewareOptions {
  /** Rate limits; optional when `concurrency` is given. */
  limits?: Limit | Limit[];
  /** Let would-be denials pass, reported to onShadow and counted; headers show the real state. */
  shadow?: boolean;
  /**
   * At most `limit` requests of one identity in flight: a lease (RL.CONCURRENCY, in the
   * same RL.ALL as the limits) taken before the handler and given back when the response
   * ends; a lease not given back expires after `ttl` (seconds, or '1500ms').
   */
  concurrency?: { limit: number; ttl: number | string; name?: string; key?: string | ((identity: string | undefined) => string) };
  /** The lease id of a request. Default: crypto.randomUUID(). Available as res.rateLimitLease. */
  requestId?: (req: any) => string;
  /** Request to identity. Default: RL.PSEUDONYM of req.ip (or the socket address), cached per address and UTC day. */
  identify?: (req: any) => string | Promise<string>;
  /** Request to cost. Default 1. */
  cost?: (req: any) => number | Record<string, number>;
  /** Also send X-RateLimit-Limit/-Remaining/-Reset. Default false. */
  legacyHeaders?: boolean;
  /** Scope and PREFIX6 for the default pseudonym. */
  scope?: string;
  prefix6?: number;
}

export type Middleware = (req: any, res: any, next: (err?: unknown) => void) => Promise<void>;

export class RateLimiter {
  constructor(options: LimiterOptions);
  readonly clock: () => number;
  /** What decides now; with backend 'auto', what the server last answered with ('module' until then). */
  readonly activeBackend: 'module' | 'scripts';
  check(limits: Limit | Limit[], identity?: string, options?: CallOptions): Promise<Decision>;
  peek(limits: Limit | Limit[], identity?: string, options?: CallOptions): Promise<Decision>;
  refund(limits: Limit | Limit[], identity?: string, options?: CallOptions): Promise<Decision>;
  reset(limits: Limit | Limit[], identity?: string, options?: CallOptions): Promise<Decision>;
  batch(requests: Request[]): Promise<Decision[]>;
  /** RL.CONCURRENCY ACQUIRE / RELEASE / HEARTBEAT for a limit with algorithm 'concurrency' (window = the lease ttl). */
  acquire(limit: Limit, identity: string | undefined, lease: string, options?: { now?: number; shadow?: boolean }): Promise<Decision>;
  release(limit: Limit, identity: string | undefined, lease: string, options?: { now?: number }): Promise<Decision>;
  heartbeat(limit: Limit, identity: string | undefined, lease: string, options?: { now?: number }): Promise<Decision>;
  /** RL.THROTTLE (redis-cell's CL.THROTTLE); times in whole seconds as redis-cell replies, retryAfter -1 when allowed. */
  throttle(key: string, spec: { maxBurst: number; count: number; period: number; quantity?: number }, options?: { now?: number }): Promise<{
    allowed: boolean; limit: number; remaining: number; retryAfter: number; resetAfter: number; source: 'redis' | 'failure'; error?: Error;
  }>;
  /** Denials that shadow mode let pass. */
  readonly shadowDenials: number;
  pseudonym(identity: string, options?: { scope?: string; prefix6?: number; now?: number }): Promise<string>;
  headers(decision: Decision, options?: { legacy?: boolean }): Record<string, string>;
  middleware(options: MiddlewareOptions): Middleware;
  /**
   * Counts a decision the limiter did not make itself (your middleware's failure
   * decision, say) in the metrics, once per limit; seconds: the time it took. No-op when
   * metrics are off.
   */
  record(limits: Limit[], decision: Decision, options?: { seconds?: number; shadow?: boolean }): void;
  /** Reports err and returns the failure policy's decision. */
  failed(err: Error, info: Omit<FailureInfo, 'failure'>): Decision;
}

export function createRateLimiter(options: LimiterOptions): RateLimiter;
export function rateLimitHeaders(decision: Decision, options?: { legacy?: boolean }): Record<string, string>;
export function nodeRedisOptions<T extends object>(overrides?: T): T & Record<string, unknown>;
export function ioredisOptions<T extends object>(overrides?: T): T & Record<string, unknown>;
export function ioredisClusterOptions<T extends object>(overrides?: T): T & Record<string, unknown>;
export class TimeoutError extends Error {}

/** One RL.TOP entry (see docs/top.md): the true denial count is between denied - error and denied. */
export interface TopEntry {
  key: string;
  denied: number;
  admitted: number;
  error: number;
  lastDeniedMs: number;
  command: string;
  algorithm: string;
}

/** RL.TOP on one server, or on every primary of a cluster client, merged: worst first. */
export function top(client: unknown, options?: { count?: number; algorithm?: string; reset?: boolean }): Promise<TopEntry[]>;

/** Several servers' RL.TOP answers as one list, worst first. */
export function mergeTop(answers: TopEntry[][], count?: number): TopEntry[];

/** A limit, cost or lease the module would refuse: thrown by the kit, never sent to the failure policy. */
export class RateLimitConfigError extends TypeError {}

/** An error reply that is the caller's to fix (a bad argument, the module not loaded, an ACL): raised, not sent to the failure policy. */
export class RedisCommandError extends Error {
  command: string;
}

/** Throws RateLimitConfigError on a limit the module would refuse (call it at startup). */
export function validateLimits(limits: Limit | Limit[]): void;
