<?php

declare(strict_types=1);

namespace Symfony\Component\RateLimiter\Policy;

use RedisRl\Upstream\Symfony\Shim;
use RedisRl\Upstream\Symfony\Wraps;
use Symfony\Component\Lock\LockInterface;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Storage\StorageInterface;

/** Symfony's FixedWindowLimiter, built by redis-rl's factory (policy fixed_window); the storage only scopes keys. */
final class FixedWindowLimiter implements LimiterInterface
{
    use Wraps;

    public function __construct(string $id, int $limit, \DateInterval $interval, StorageInterface $storage, ?LockInterface $lock = null)
    {
        $this->inner = Shim::factory(['id' => $id, 'policy' => 'fixed_window', 'limit' => $limit, 'interval' => Shim::seconds($interval)], $storage)->create($id);
    }
}
