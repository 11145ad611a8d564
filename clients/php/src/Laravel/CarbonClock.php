<?php

declare(strict_types=1);

namespace RedisRl\Laravel;

use Illuminate\Support\Carbon;
use RedisRl\Clock;

/**
 * The application's clock (Carbon, so `Carbon::setTestNow()` and `$this->travel()` in
 * tests move it), sent as NOW. Opt-in (`redis-rl.clock` = 'carbon'): by default the
 * Redis server's clock decides, one clock for the whole fleet.
 */
final class CarbonClock implements Clock
{
    public function nowMicros(): int
    {
        return (int) Carbon::now()->format('Uu');
    }
}
