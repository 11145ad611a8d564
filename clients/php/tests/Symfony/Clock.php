<?php

declare(strict_types=1);

namespace RedisRl\Tests\Symfony;

use Symfony\Bridge\PhpUnit\ClockMock;

/**
 * One stepped clock for both limiters: the kit sends it as NOW, and ClockMock gives it
 * to Symfony's own limiter (its microtime() calls), so the comparison runs on the same
 * instants without sleeping.
 */
final class Clock implements \RedisRl\Clock
{
    public static int $micros = 0;

    public static function set(int $micros): void
    {
        self::$micros = $micros;
        ClockMock::withClockMock($micros / 1e6);
    }

    public function nowMicros(): int
    {
        return self::$micros;
    }
}
