<?php

declare(strict_types=1);

namespace RedisRl\Symfony;

use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

/**
 * Symfony's CompoundLimiter consumes from each limiter in turn: a request the last one
 * refuses has already been counted by the others. This one is a single RL.ALL: the
 * request spends on every limiter or, when any refuses, on none.
 *
 * The limiters must come from this package's factories, created for the same key, so
 * their keys share a hash tag (cluster) and one command can hold them all.
 */
final class CompoundLimiter implements LimiterInterface
{
    private readonly ModuleLimiter $all;

    /** @param non-empty-list<LimiterInterface> $limiters */
    public function __construct(array $limiters)
    {
        $limits = [];
        $shadow = false;
        $rateLimiter = null;
        foreach ($limiters as $limiter) {
            if (!$limiter instanceof ModuleLimiter) {
                throw new \InvalidArgumentException('an atomic compound limiter takes only limiters of RedisRl\\Symfony\\RateLimiterFactory, got ' . get_debug_type($limiter));
            }
            array_push($limits, ...$limiter->limits());
            $shadow = $shadow || $limiter->isShadow();
            $rateLimiter ??= $limiter->rateLimiter();
        }
        if ($rateLimiter === null) {
            throw new \LogicException('CompoundLimiter needs at least one limiter.');
        }
        $this->all = new ModuleLimiter($rateLimiter, $limits, $shadow);
    }

    /** As Symfony's CompoundLimiter, whatever it holds (one limiter too): ReserveNotSupportedException. */
    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        throw new ReserveNotSupportedException(self::class);
    }

    public function consume(int $tokens = 1): RateLimit
    {
        return $this->all->consume($tokens);
    }

    public function reset(): void
    {
        $this->all->reset();
    }
}
