<?php

declare(strict_types=1);

namespace RedisRl;

/** The module's limiters; the value is both the command suffix and RL.ALL's algo word. */
enum Algorithm: string
{
    case SlideLog = 'SLIDELOG';
    case SlideCount = 'SLIDECOUNT';
    case Fixed = 'FIXED';
    case Gcra = 'GCRA';
    /** In-flight leases (RL.CONCURRENCY): the window is the lease ttl. */
    case Concurrency = 'CONCURRENCY';

    public function command(): string
    {
        return 'RL.' . $this->value;
    }
}
