<?php

declare(strict_types=1);

namespace RedisRl\Tests\Support;

use RedisRl\Clock;

/** Time that moves only when the test says so. */
final class ManualClock implements Clock
{
    public function __construct(public int $micros)
    {
    }

    public function nowMicros(): int
    {
        return $this->micros;
    }

    public function advance(int $micros): void
    {
        $this->micros += $micros;
    }
}
