<?php

declare(strict_types=1);

namespace RedisRl;

use InvalidArgumentException;

/**
 * One limit: what the server needs to decide (algorithm, key, limit, window, burst,
 * cost) plus what it does not return but headers need (a name, the limit, the window).
 */
final readonly class Limit
{
    /**
     * The module's bounds (it refuses anything outside them): amounts and windows. A
     * counter keeps no instant of its own, only the key's TTL, so its window may be up to
     * 2^63 − 1 µs; every other window (and lease ttl, refill interval) at most ten years.
     */
    public const MAX_AMOUNT = 1_000_000_000_000_000;
    public const MAX_WINDOW_MS = 10 * 365 * 24 * 3600 * 1000;
    public const MAX_COUNTER_WINDOW_MS = 9_223_372_036_854_775;
    public const MAX_LOG_LIMIT = 1_000_000;

    private function __construct(
        public string $name,
        public Algorithm $algorithm,
        public string $key,
        public int $limit,
        public int $windowMs,
        public ?int $burst = null,
        public int $cost = 1,
        public ?int $refill = null,
        public bool $countAll = false,
        public bool $renew = false,
        public bool $escalate = false,
    ) {
        if ($name === '' || preg_match('/^[\x20-\x7e]+$/', $name) !== 1) {
            // The name goes into a structured-field string, which is printable ASCII.
            throw new InvalidArgumentException("limit name must be printable ASCII, got '{$name}'");
        }
        // What the module would refuse is refused here, where the limit is built (at
        // startup), so a caller's mistake never reaches Redis or the failure policy.
        if ($key === '') {
            throw new InvalidArgumentException("limit '{$name}': the key must not be empty");
        }
        self::amount($name, 'limit', $limit);
        self::amount($name, 'cost', $cost);
        if ($burst !== null) {
            self::amount($name, 'burst', $burst);
        }
        if ($refill !== null) {
            self::amount($name, 'refill', $refill);
        }
        if ($algorithm === Algorithm::Gcra && $limit > $windowMs * 1000) {
            throw new InvalidArgumentException("limit '{$name}': GCRA spaces requests at least 1 µs apart, so the limit ({$limit}) may not exceed the window in microseconds (" . ($windowMs * 1000) . ')');
        }
        if ($algorithm === Algorithm::SlideLog && ($limit > self::MAX_LOG_LIMIT || $cost > self::MAX_LOG_LIMIT)) {
            // One member per unit: the log's size and a call's work stay bounded. A cost
            // above the limit (and within the bound) is no mistake: it never fits.
            throw new InvalidArgumentException("limit '{$name}': a sliding log holds at most " . self::MAX_LOG_LIMIT . " units and a call adds at most as many, got limit {$limit}, cost {$cost}");
        }
        if ($algorithm === Algorithm::Concurrency && $cost !== 1) {
            throw new InvalidArgumentException("limit '{$name}': a concurrency limit holds one lease per request; it has no cost");
        }
        if ($renew && $escalate) {
            throw new InvalidArgumentException("limit '{$name}': renew and escalate exclude each other (one restarts the window on every counted call, the other lengthens it on every denial)");
        }
    }

    private static function amount(string $name, string $what, int $value): void
    {
        if ($value < 1 || $value > self::MAX_AMOUNT) {
            throw new InvalidArgumentException("limit '{$name}': {$what} must be a positive integer no larger than " . self::MAX_AMOUNT . ", got {$value}");
        }
    }

    /** Exact sliding-window log (a sorted set at $key). */
    public static function slideLog(string $name, string $key, int $limit, int|string $window): self
    {
        return new self($name, Algorithm::SlideLog, $key, $limit, self::windowMs($window));
    }

    /** Approximate sliding window on two counters `<key>:<i>`; cluster keys need a {hash tag}. */
    public static function slideCount(string $name, string $key, int $limit, int|string $window): self
    {
        return new self($name, Algorithm::SlideCount, $key, $limit, self::windowMs($window));
    }

    /**
     * Sliding window anchored at the first admitted call (RL.SLIDEWINDOW, Symfony's
     * sliding_window): its end, its count and the previous window's, one string at $key.
     */
    public static function slideWindow(string $name, string $key, int $limit, int|string $window): self
    {
        return new self($name, Algorithm::SlideWindow, $key, $limit, self::windowMs($window));
    }

    /** Fixed window counter `<key>:<start>`; cluster keys need a {hash tag}. */
    public static function fixed(string $name, string $key, int $limit, int|string $window): self
    {
        return new self($name, Algorithm::Fixed, $key, $limit, self::windowMs($window));
    }

    /**
     * Fixed window from the first hit (RL.COUNTER): one counter at $key itself, whose TTL
     * is the window, so the window ends when the key expires on the server clock (the
     * window of Symfony's fixed_window); a clock sent as NOW must be the server's time.
     * The window may be up to MAX_COUNTER_WINDOW_MS (about 292,000 years).
     *
     * The stock stores' ways, opt-in (a denial spends nothing by default): $countAll
     * (COUNTALL) counts denied calls too; $renew (RENEW) restarts the window on every
     * counted call; $escalate (ESCALATE, @fastify/rate-limit's exponential backoff)
     * counts every call and sets the TTL on each denial to window × 2^(count − limit − 1).
     * Such a limit is checked on its own, never in RL.ALL (whose denial writes nothing).
     */
    public static function counter(
        string $name,
        string $key,
        int $limit,
        int|string $window,
        bool $countAll = false,
        bool $renew = false,
        bool $escalate = false,
    ): self {
        return new self($name, Algorithm::Counter, $key, $limit, self::windowMs($window, self::MAX_COUNTER_WINDOW_MS), countAll: $countAll, renew: $renew, escalate: $escalate);
    }

    /** Smooth limiting: $limit per $window on average, up to $burst at once (default $limit). */
    public static function gcra(string $name, string $key, int $limit, int|string $window, ?int $burst = null): self
    {
        return new self($name, Algorithm::Gcra, $key, $limit, self::windowMs($window), $burst);
    }

    /**
     * A token bucket refilled in steps (RL.TOKENBUCKET, Symfony's token_bucket): it holds
     * up to $capacity tokens and gets $refill back at each whole $interval since its first
     * spend, all at once, never beyond the capacity.
     */
    public static function tokenBucket(string $name, string $key, int $capacity, int|string $interval, int $refill = 1): self
    {
        return new self($name, Algorithm::TokenBucket, $key, $capacity, self::windowMs($interval), null, 1, $refill);
    }

    /**
     * At most $limit requests in flight (RL.CONCURRENCY): each holds a lease that lasts
     * $ttl unless released or heartbeaten first, so a crashed worker's slot comes back.
     */
    public static function concurrency(string $name, string $key, int $limit, int|string $ttl): self
    {
        return new self($name, Algorithm::Concurrency, $key, $limit, self::windowMs($ttl));
    }

    /** The same limit for a request that spends $cost units (tokens, bytes, ...). */
    public function withCost(int $cost): self
    {
        if ($this->algorithm === Algorithm::Concurrency) {
            throw new InvalidArgumentException('a concurrency limit holds one lease per request; it has no cost');
        }
        return new self($this->name, $this->algorithm, $this->key, $this->limit, $this->windowMs, $this->burst, $cost, $this->refill, $this->countAll, $this->renew, $this->escalate);
    }

    /**
     * The same limit for one caller: `{id}` in the key becomes `{<identity>}`, so all of
     * a caller's limiter keys share a hash tag and RL.ALL over them works in a cluster.
     */
    public function forIdentity(string $identity): self
    {
        if (!str_contains($this->key, '{id}')) {
            throw new InvalidArgumentException("key '{$this->key}' has no {id} placeholder");
        }
        $key = str_replace('{id}', '{' . $identity . '}', $this->key);

        return new self($this->name, $this->algorithm, $key, $this->limit, $this->windowMs, $this->burst, $this->cost, $this->refill, $this->countAll, $this->renew, $this->escalate);
    }

    /**
     * RL.COUNTER's options that RL.ALL refuses (its denial writes nothing): the words set.
     *
     * @return list<string>
     */
    public function counterOptions(): array
    {
        return array_keys(array_filter(['COUNTALL' => $this->countAll, 'RENEW' => $this->renew, 'ESCALATE' => $this->escalate]));
    }

    /** @return list<string> `<key> <limit> <window> [BURST b] [REFILL r] [COST n] [COUNTALL] [RENEW] [ESCALATE]` */
    public function arguments(): array
    {
        $args = [$this->key, (string) $this->limit, $this->windowArgument()];
        if ($this->burst !== null) {
            $args[] = 'BURST';
            $args[] = (string) $this->burst;
        }
        if ($this->refill !== null && $this->refill !== 1) {
            $args[] = 'REFILL';
            $args[] = (string) $this->refill;
        }
        if ($this->cost !== 1) {
            $args[] = 'COST';
            $args[] = (string) $this->cost;
        }

        return [...$args, ...$this->counterOptions()];
    }

    /** Whole seconds when exact, as RL.FIXED names its counter by seconds then. */
    private function windowArgument(): string
    {
        return $this->windowMs % 1000 === 0 ? ($this->windowMs / 1000) . 's' : $this->windowMs . 'ms';
    }

    /** Accepts what the module accepts: seconds as an int, or "60", "60s", "1500ms", up to $max ms. */
    private static function windowMs(int|string $window, int $max = self::MAX_WINDOW_MS): int
    {
        if (is_int($window)) {
            $window = (string) $window;
        }
        // 16 digits hold the longest window in ms (seconds past an int become a float, refused).
        $ms = preg_match('/^([1-9][0-9]{0,15})(s|ms)?$/i', $window, $m) !== 1 ? 0
            : (strtolower($m[2] ?? 's') === 'ms' ? (int) $m[1] : (int) $m[1] * 1000);
        if ($ms < 1 || $ms > $max) {
            $longest = $max === self::MAX_WINDOW_MS ? '10 years' : 'about 292,000 years';
            throw new InvalidArgumentException("window must be a positive duration such as 60 (seconds), '60s' or '1500ms', at most {$max}ms ({$longest}), got '{$window}'");
        }

        return $ms;
    }
}
