<?php

declare(strict_types=1);

namespace RedisRl\Symfony;

use RedisRl\Algorithm;
use RedisRl\Decision;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\Mode;
use RedisRl\RateLimiter;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

/**
 * A Symfony limiter whose every decision is one module command: the limit's own
 * (RL.COUNTER, RL.SLIDEWINDOW, RL.SLIDECOUNT, RL.TOKENBUCKET, RL.GCRA, RL.SLIDELOG,
 * RL.FIXED), or one RL.ALL for several limits, which spends on all of them or on none.
 */
final class ModuleLimiter implements LimiterInterface
{
    /** @param non-empty-list<Limit> $limits */
    public function __construct(
        private readonly RateLimiter $limiter,
        private readonly array $limits,
        private readonly bool $shadow = false,
    ) {
    }

    /**
     * As Symfony's fixed window and token bucket: the tokens are taken now if they are
     * there, else at the instant they will be (the server's retry_after), and the
     * reservation is due then; reserve() never sleeps, Reservation::wait() does. A
     * token-bucket reservation in the future is a spend decided at that instant (sent as
     * NOW), so later calls see the tokens gone. A fixed-window one spends nothing, as in
     * Symfony, which adds it to the ending window and starts the next one empty (and a
     * counter written at a future NOW would get its TTL from the server's now). The
     * sliding window cannot reserve in Symfony either: ReserveNotSupportedException.
     */
    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        $algorithm = $this->limits[0]->algorithm;
        if (count($this->limits) > 1 || !in_array($algorithm, [Algorithm::Counter, Algorithm::Fixed, Algorithm::Gcra, Algorithm::TokenBucket], true)) {
            throw new ReserveNotSupportedException(self::class);
        }
        $this->refuseOversized($tokens);
        // Another client can take the tokens between the two calls: then ask again.
        for ($attempt = 0; ; $attempt++) {
            $now = $this->limiter->now();
            $decision = $this->decide($tokens);
            $rateLimit = $this->rateLimit($decision, $tokens);
            if ($rateLimit->isAccepted()) {
                return new Reservation($now / 1e6, $rateLimit);
            }
            $waitMs = $decision->failure !== null ? null : $this->waitMs($decision);
            if ($waitMs === null || ($maxTime !== null && $waitMs > $maxTime * 1000) || $attempt >= 3) {
                $seconds = $waitMs === null ? PHP_INT_MAX : $waitMs / 1000;
                throw new MaxWaitDurationExceededException(sprintf('The rate limiter wait time ("%d" seconds) is longer than the provided maximum time ("%d" seconds).', $seconds, (int) $maxTime), $rateLimit);
            }
            $at = $now + $waitMs * 1000;
            if ($algorithm === Algorithm::Counter) {
                return new Reservation($at / 1e6, $rateLimit);
            }
            $future = $this->decide($tokens, $at);
            if ($future->allowed && $future->failure === null) {
                return new Reservation($at / 1e6, new RateLimit(0, self::instant($at), false, self::size($this->limits[0])));
            }
        }
    }

    public function consume(int $tokens = 1): RateLimit
    {
        $this->refuseOversized($tokens);

        return $this->rateLimit($this->decide($tokens), $tokens);
    }

    public function reset(): void
    {
        $this->limiter->decide($this->limits, Mode::Reset);
    }

    /** @internal for CompoundLimiter @return non-empty-list<Limit> */
    public function limits(): array
    {
        return $this->limits;
    }

    /** @internal */
    public function rateLimiter(): RateLimiter
    {
        return $this->limiter;
    }

    /** @internal */
    public function isShadow(): bool
    {
        return $this->shadow;
    }

    private function decide(int $tokens, ?int $at = null): Decision
    {
        if ($tokens === 0) {
            // Symfony's consume(0) asks without spending: PEEK.
            return $this->limiter->decide($this->limits, Mode::Peek, null, $at);
        }

        return $this->limiter->decide(array_map(static fn (Limit $l) => $l->withCost($tokens), $this->limits), Mode::Hit, null, $at, $this->shadow);
    }

    /** As Symfony's fixed window and token bucket: asking for more than the limit holds is a bug. */
    private function refuseOversized(int $tokens): void
    {
        if ($tokens < 0) {
            throw new \InvalidArgumentException("Cannot consume a negative number of tokens ({$tokens}).");
        }
        foreach ($this->limits as $limit) {
            if ($tokens > self::size($limit)) {
                // Symfony's two messages: the token bucket's names its burst.
                $bucket = $limit->burst !== null || $limit->algorithm === Algorithm::TokenBucket;
                throw new \InvalidArgumentException(sprintf('Cannot reserve more tokens (%d) than the %s of the rate limiter (%d).', $tokens, $bucket ? 'burst size' : 'size', self::size($limit)));
            }
        }
    }

    /** What Symfony calls the limit: the burst of a token bucket, else the limit. */
    private static function size(Limit $limit): int
    {
        return $limit->burst ?? $limit->limit;
    }

    /**
     * Symfony's RateLimit for a decision: the remaining tokens and the retry instant
     * are the server's (now when accepted, as Symfony's fixed window and token bucket
     * say); the limit is the tightest limit's. When Redis could not decide, the failure
     * policy's answer: open accepts with the full limit (nothing is known), closed
     * refuses for its retry time.
     */
    private function rateLimit(Decision $decision, int $tokens): RateLimit
    {
        $now = $this->limiter->now();
        $tightest = $decision->limits === [] ? null : Headers::tightest($decision->limits);
        $size = self::size($tightest?->limit ?? $this->limits[0]);
        // consume(0) takes nothing, so Symfony accepts it even on an exhausted limiter.
        $accepted = $this->limiter->admits($decision, $this->shadow, 'consume(' . $tokens . ') on ' . $this->limits[0]->key)
            || ($tokens === 0 && $decision->failure === null);
        $retryMs = $decision->allowed || $tokens === 0 ? 0 : ($this->waitMs($decision) ?? 0);
        $remaining = match (true) {
            $decision->failure !== null => $decision->allowed ? $size : 0,
            // consume(0) was a PEEK of one unit, which says what would be left after it:
            // Symfony's consume(0) says what is available now.
            $tokens === 0 => $decision->allowed ? $decision->remaining + 1 : $decision->remaining,
            default => $decision->remaining,
        };

        $retryAt = $now + $retryMs * 1000;
        if ($this->wholeSeconds()) {
            $retryAt -= $retryAt % 1_000_000;
        }
        if ($decision->failure === null && $this->limits[0]->algorithm === Algorithm::SlideWindow && count($this->limits) === 1) {
            // Symfony's sliding window answers with its window's end, admitted or not. The
            // server's reset is until the end of the window after it (when what the window
            // counted stops counting); 0 when no window is in force, which Symfony would
            // start now.
            $windowMs = $this->limits[0]->windowMs;
            $retryAt = $now + ($decision->resetAfterMs > 0 ? $decision->resetAfterMs - $windowMs : $windowMs) * 1000;
        }

        return new RateLimit($remaining, self::instant($retryAt), $accepted, $size);
    }

    /**
     * The server's retry_after, in ms; for the fixed window rounded up to whole seconds,
     * and its retry instant (wholeSeconds) floored to one, as Symfony's fixed window
     * computes both: the same Retry-After, X-RateLimit-Retry-After and wait().
     */
    private function waitMs(Decision $decision): ?int
    {
        $ms = $decision->retryAfterMs;

        return $ms !== null && $this->wholeSeconds() ? intdiv($ms + 999, 1000) * 1000 : $ms;
    }

    private function wholeSeconds(): bool
    {
        return array_filter($this->limits, static fn (Limit $l) => $l->algorithm !== Algorithm::Counter) === [];
    }

    private static function instant(int $micros): \DateTimeImmutable
    {
        return \DateTimeImmutable::createFromFormat('U.u', sprintf('%d.%06d', intdiv($micros, 1_000_000), $micros % 1_000_000))
            ?: new \DateTimeImmutable('@' . intdiv($micros, 1_000_000));
    }
}
