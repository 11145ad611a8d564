<?php

declare(strict_types=1);

namespace RedisRl;

final class SystemClock implements Clock
{
    public function nowMicros(): int
    {
        return (int) (microtime(true) * 1_000_000);
    }
}
