<?php

declare(strict_types=1);

namespace RedisRl;

/** The module's limiters; the value is both the command suffix and RL.ALL's algo word. */
enum Algorithm: string
{
    case SlideLog = 'SLIDELOG';
    case SlideCount = 'SLIDECOUNT';
    /** A sliding window anchored at the first admitted call (Symfony's sliding_window). */
    case SlideWindow = 'SLIDEWINDOW';
    case Fixed = 'FIXED';
    /** A fixed window from the first hit: one counter at the key, its TTL the window. */
    case Counter = 'COUNTER';
    case Gcra = 'GCRA';
    /** A token bucket refilled in steps: `refill` tokens at each whole interval (Symfony's). */
    case TokenBucket = 'TOKENBUCKET';
    /** In-flight leases (RL.CONCURRENCY): the window is the lease ttl. */
    case Concurrency = 'CONCURRENCY';

    public function command(): string
    {
        return 'RL.' . $this->value;
    }
}
