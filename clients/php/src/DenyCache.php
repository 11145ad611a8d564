<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * Opt-in, in-process: after the server denies a request with a finite wait, the same
 * request (same limits, keys and costs) is denied here until that wait is over, without
 * a round trip. It only ever repeats a denial the server gave, for less time than the
 * server said, so it cannot deny what the server would admit, except after a REFUND or
 * RESET made elsewhere (this process's own clear it).
 */
final class DenyCache
{
    /** @var array<string, array{0: Decision, 1: int}> request signature => [denial, when, µs] */
    private array $denials = [];

    public function __construct(private readonly int $capacity = 10_000)
    {
    }

    public function lookup(string $signature, int $nowMicros): ?Decision
    {
        if (!isset($this->denials[$signature])) {
            return null;
        }
        [$denial, $at] = $this->denials[$signature];
        $elapsed = $nowMicros - $at;
        // The server rounds its wait up to whole milliseconds, so the true wait may be
        // almost 1 ms shorter than it says: stop 1 ms early. A clock that went back
        // proves nothing either.
        if ($elapsed < 0 || $elapsed >= ($denial->retryAfterMs - 1) * 1000) {
            unset($this->denials[$signature]);

            return null;
        }

        return $denial->aged(intdiv($elapsed, 1000));
    }

    public function remember(string $signature, Decision $decision, int $decidedAtMicros): void
    {
        if ($decision->allowed || $decision->failure !== null || ($decision->retryAfterMs ?? 0) <= 1) {
            return;
        }
        if (count($this->denials) >= $this->capacity) {
            // Oldest first: PHP arrays keep insertion order.
            unset($this->denials[array_key_first($this->denials)]);
        }
        unset($this->denials[$signature]);
        $this->denials[$signature] = [$decision, $decidedAtMicros];
    }

    public function clear(): void
    {
        $this->denials = [];
    }

    public function count(): int
    {
        return count($this->denials);
    }
}
