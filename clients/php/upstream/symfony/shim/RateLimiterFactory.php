<?php

declare(strict_types=1);

namespace Symfony\Component\RateLimiter;

use RedisRl\Symfony\ModuleLimiter;
use RedisRl\Upstream\Symfony\Shim;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\RateLimiter\Policy\FixedWindowLimiter;
use Symfony\Component\RateLimiter\Policy\SlidingWindowLimiter;
use Symfony\Component\RateLimiter\Policy\TokenBucketLimiter;
use Symfony\Component\RateLimiter\Storage\StorageInterface;

/**
 * Symfony's RateLimiterFactory as redis-rl's: the options are resolved (and refused) by
 * RedisRl\Symfony\RateLimiterFactory; its limiters come back wrapped in the policy's
 * class name, which is what the tests check.
 */
final class RateLimiterFactory
{
    private \RedisRl\Symfony\RateLimiterFactory $inner;
    private string $policy;

    public function __construct(array $config, StorageInterface $storage, ?LockFactory $lockFactory = null)
    {
        $this->inner = Shim::factory($config, $storage);
        $this->policy = (string) ($config['policy'] ?? '');
    }

    public function create(?string $key = null): LimiterInterface
    {
        $limiter = $this->inner->create($key);
        if (!$limiter instanceof ModuleLimiter) {
            return $limiter;
        }

        return match ($this->policy) {
            'token_bucket' => TokenBucketLimiter::wrap($limiter),
            'fixed_window' => FixedWindowLimiter::wrap($limiter),
            'sliding_window' => SlidingWindowLimiter::wrap($limiter),
            default => $limiter,
        };
    }
}
