<?php

declare(strict_types=1);

namespace Symfony\Component\RateLimiter\Policy;

use RedisRl\Upstream\Symfony\Shim;
use RedisRl\Upstream\Symfony\Wraps;
use Symfony\Component\Lock\LockInterface;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Storage\StorageInterface;

/** Symfony's TokenBucketLimiter, built by redis-rl's factory (policy token_bucket). */
final class TokenBucketLimiter implements LimiterInterface
{
    use Wraps;

    public function __construct(string $id, int $maxBurst, Rate $rate, StorageInterface $storage, ?LockInterface $lock = null)
    {
        // Rate keeps its interval and amount private; its string form is what the factory parses back.
        $interval = (new \ReflectionProperty(Rate::class, 'refillTime'))->getValue($rate);
        $amount = (new \ReflectionProperty(Rate::class, 'refillAmount'))->getValue($rate);
        $this->inner = Shim::factory([
            'id' => $id,
            'policy' => 'token_bucket',
            'limit' => $maxBurst,
            'rate' => ['interval' => Shim::seconds($interval), 'amount' => $amount],
        ], $storage)->create($id);
    }
}
