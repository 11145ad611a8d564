<?php

declare(strict_types=1);

namespace Symfony\Component\RateLimiter;

use RedisRl\Symfony\CompoundLimiter as ModuleCompoundLimiter;
use RedisRl\Upstream\Symfony\Wraps;

/** Symfony's CompoundLimiter as redis-rl's (one RL.ALL), over the adapter's limiters. */
final class CompoundLimiter implements LimiterInterface
{
    use Wraps;

    /** @param LimiterInterface[] $limiters */
    public function __construct(array $limiters)
    {
        $this->inner = new ModuleCompoundLimiter(array_map(
            static fn (LimiterInterface $l) => method_exists($l, 'inner') ? $l->inner() : $l,
            array_values($limiters),
        ));
    }
}
