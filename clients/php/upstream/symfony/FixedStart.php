<?php

declare(strict_types=1);

namespace RedisRl\Upstream\Symfony;

use PHPUnit\Framework\Test;
use PHPUnit\Framework\TestListener;
use PHPUnit\Framework\TestListenerDefaultImplementation;
use Symfony\Bridge\PhpUnit\ClockMock;

/**
 * Symfony's listener starts each time-sensitive test's mocked clock at the real time.
 * This one, after it, moves that start, in the stock run and in ours alike:
 * - for the tests of the fixed window (RL.COUNTER), half a second ahead of the real
 *   time: RL.COUNTER's window ends when its key expires on the server clock, which the
 *   call compares with NOW, so NOW must start at the server's time. Half a second ahead
 *   makes a window from the first consume end up to half a second early, never late,
 *   and its whole-second waits Symfony's. (A window a later consume opens, after the
 *   test stepped the mocked clock, ends early by that step: the server clock did not
 *   move. No assertion of these tests depends on one.)
 * - for the others, at one fixed instant, so that which tests pass never depends on when
 *   the suite runs. The instant is deliberately not on a minute boundary (9.8 s past).
 */
final class FixedStart implements TestListener
{
    use TestListenerDefaultImplementation;

    public const START = 1_718_609_349.8;
    /** The test classes whose limiters are fixed windows. */
    private const REAL_TIME = ['FixedWindowLimiterTest', 'CompoundLimiterTest'];

    public function startTest(Test $test): void
    {
        if (ClockMock::withClockMock()) {
            $class = substr(strrchr('\\' . $test::class, '\\'), 1);
            ClockMock::withClockMock(in_array($class, self::REAL_TIME, true) ? microtime(true) + 0.5 : self::START);
        }
    }
}
