<?php

declare(strict_types=1);

namespace RedisRl\Upstream\Symfony;

use PHPUnit\Framework\Test;
use PHPUnit\Framework\TestListener;
use PHPUnit\Framework\TestListenerDefaultImplementation;
use Symfony\Bridge\PhpUnit\ClockMock;

/**
 * Symfony's listener starts each time-sensitive test's mocked clock at the real time.
 * This one, after it, moves that start to one fixed instant, in the stock run and in
 * ours alike: the module's windows are aligned to the clock (Symfony's start at the
 * first consume), so which tests pass must not depend on when the suite runs. The
 * instant is deliberately not on a window boundary (9.8 s past a minute).
 */
final class FixedStart implements TestListener
{
    use TestListenerDefaultImplementation;

    public const START = 1_718_609_349.8;

    public function startTest(Test $test): void
    {
        if (ClockMock::withClockMock()) {
            ClockMock::withClockMock(self::START);
        }
    }
}
