// Types for the framework adapters: redis-rl/express-rate-limit, redis-rl/nestjs,
// redis-rl/fastify, redis-rl/rate-limiter-flexible (one file for the four entry points).
import type { Backend, Decision, FailureInfo, MetricsRegistry } from './index.js';

export interface AdapterOptions {
  /** node-redis createClient()/createCluster(), or ioredis new Redis()/new Redis.Cluster(). */
  client: unknown;
  /** The module's algorithm. Default 'slidecount'. */
  algorithm?: 'slidecount' | 'slidelog' | 'gcra' | 'fixed' | 'counter';
  /** GCRA only: how many may come at once (default: the limit). */
  burst?: number;
  /** Let would-be denials pass; report them to onShadow and count them. Default false. */
  shadow?: boolean;
  onShadow?: (decision: Decision, info: { keys: string[] }) => void;
  /** Told about every failure before the library's own switch decides. Default console.warn. */
  onError?: (err: Error, info: FailureInfo | { command: string; keys: string[]; failure: 'library' }) => void;
  /** Milliseconds to wait for Redis. Default 300. */
  timeout?: number;
  /** Unix ms; when given, sent as NOW with every call. */
  clock?: () => number;
  /**
   * Count decisions and time calls in prom-client (docs/metrics.md): true for its default
   * registry, or your Registry. Default off. Not in the rate-limiter-flexible adapter.
   */
  metrics?: true | MetricsRegistry;
  /** The module's commands or their scripts; default 'auto' (see LimiterOptions.backend). */
  backend?: Backend;
  /** The servers' RL_SECRET, for pseudonyms on the scripts backend (see LimiterOptions.secret). */
  secret?: string | Uint8Array;
}

// redis-rl/express-rate-limit
export class RedisRlStore {
  /** resetExpiryOnChange (rate-limit-redis 4): every request restarts the window; algorithm 'counter' only. */
  constructor(options: AdapterOptions & { prefix?: string; resetExpiryOnChange?: boolean });
  readonly localKeys: false;
  prefix: string;
  readonly shadowDenials: number;
  init(options: { limit: unknown; windowMs: number }): void;
  increment(key: string): Promise<{ totalHits: number; resetTime: Date }>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
  get(key: string): Promise<{ totalHits: number; resetTime: Date } | undefined>;
  /** Every client's limit reset: SCAN + UNLINK of `<prefix>{…}` on every primary. */
  resetAll(): Promise<void>;
}

// redis-rl/nestjs
export class RedisRlThrottlerStorage {
  constructor(options: AdapterOptions & { failure: 'open' | 'closed'; prefix?: string });
  readonly shadowDenials: number;
  increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<{
    totalHits: number; timeToExpire: number; isBlocked: boolean; timeToBlockExpire: number;
  }>;
}

// redis-rl/fastify
export function redisRlStore(options: AdapterOptions & { nameSpace?: string }): {
  new (params: object): {
    incr(key: string, cb: (err: Error | null, res: { current: number; ttl: number } | null) => void, timeWindow: number, max: number): void;
    read(key: string, cb: (err: Error | null, res: { current: number; ttl: number } | null) => void, timeWindow: number, max: number): void;
    child(routeOptions: object): unknown;
  };
  readonly shadowDenials: number;
};

// redis-rl/rate-limiter-flexible
export class RateLimiterRedisRl {
  constructor(options: Omit<AdapterOptions, 'client' | 'metrics'> & {
    storeClient: unknown; points: number; duration: number; keyPrefix?: string; insuranceLimiter?: unknown;
    blockDuration?: number; execEvenly?: boolean; execEvenlyMinDelayMs?: number;
    inMemoryBlockOnConsumed?: number; inMemoryBlockDuration?: number;
    rejectIfRedisNotReady?: boolean; useRedisPackage?: boolean;
    /** Your Lua script for RateLimiterRedis's key, run as RateLimiterRedis runs it; it decides instead of the module. */
    customIncrTtlLuaScript?: string;
  });
  readonly points: number;
  readonly keyPrefix: string;
  readonly shadowDenials: number;
  consume(key: string | number, points?: number | string, options?: object): Promise<unknown>;
  get(key: string | number, options?: object): Promise<unknown>;
  delete(key: string | number, options?: object): Promise<boolean>;
  reward(key: string | number, points?: number, options?: object): Promise<unknown>;
  penalty(key: string | number, points?: number, options?: object): Promise<unknown>;
  set(key: string | number, points: number, secDuration?: number, options?: object): Promise<unknown>;
  block(key: string | number, secDuration: number, options?: object): Promise<unknown>;
  deleteInMemoryBlockedAll(): void;
}

/** A caller's mistake (points '1.5', a bad option): rejected to the caller, never to the insuranceLimiter. */
export class RateLimiterArgumentError extends TypeError {}

export class RateLimiterUnionRl {
  constructor(...limiters: RateLimiterRedisRl[]);
  consume(key: string | number, points?: number | string): Promise<Record<string, unknown>>;
}
