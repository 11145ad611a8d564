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
    /** The module's bounds (it refuses anything outside them): amounts and windows. */
    public const MAX_AMOUNT = 1_000_000_000_000_000;
    public const MAX_WINDOW_MS = 10 * 365 * 24 * 3600 * 1000;
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
     */
    public static function counter(string $name, string $key, int $limit, int|string $window): self
    {
        return new self($name, Algorithm::Counter, $key, $limit, self::windowMs($window));
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
        return new self($this->name, $this->algorithm, $this->key, $this->limit, $this->windowMs, $this->burst, $cost, $this->refill);
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

        return new self($this->name, $this->algorithm, $key, $this->limit, $this->windowMs, $this->burst, $this->cost, $this->refill);
    }

    /** @return list<string> `<key> <limit> <window> [BURST b] [REFILL r] [COST n]` */
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

        return $args;
    }

    /** Whole seconds when exact, as RL.FIXED names its counter by seconds then. */
    private function windowArgument(): string
    {
        return $this->windowMs % 1000 === 0 ? ($this->windowMs / 1000) . 's' : $this->windowMs . 'ms';
    }

    /** Accepts what the module accepts: seconds as an int, or "60", "60s", "1500ms". */
    private static function windowMs(int|string $window): int
    {
        if (is_int($window)) {
            $window = (string) $window;
        }
        $ms = preg_match('/^([1-9][0-9]{0,14})(s|ms)?$/i', $window, $m) !== 1 ? 0
            : (strtolower($m[2] ?? 's') === 'ms' ? (int) $m[1] : (int) $m[1] * 1000);
        if ($ms < 1 || $ms > self::MAX_WINDOW_MS) {
            throw new InvalidArgumentException("window must be a positive duration such as 60 (seconds), '60s' or '1500ms', at most " . self::MAX_WINDOW_MS . "ms (10 years), got '{$window}'");
        }

        return $ms;
    }
}
