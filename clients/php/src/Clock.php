<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * The time the kit decides at. Given to a RateLimiter, it is sent to Redis as NOW with
 * every call, so the server, the deny cache and the pseudonym's UTC day all read the
 * same clock (a fleet on one app clock, or a test stepping time).
 */
interface Clock
{
    /** Unix time in microseconds. */
    public function nowMicros(): int;
}
