<?php

declare(strict_types=1);

namespace RedisRl\Laravel;

/** The `redis-rl` config the middleware reads (config/redis-rl.php, all optional). */
final readonly class Settings
{
    public const ALGORITHMS = ['sliding_counter', 'sliding_log', 'fixed', 'gcra'];

    public function __construct(
        /** sliding_counter (RL.SLIDECOUNT, the default), sliding_log, fixed or gcra. */
        public string $algorithm = 'sliding_counter',
        public string $prefix = 'laravel_rl:',
        public bool $shadow = false,
    ) {
        if (!in_array($algorithm, self::ALGORITHMS, true)) {
            throw new \InvalidArgumentException("redis-rl.algorithm must be one of " . implode(', ', self::ALGORITHMS) . ", got '{$algorithm}'");
        }
    }
}
