<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Decision;
use RedisRl\FailureKind;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\LimitDecision;
use RedisRl\RedisFailure;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/** Typed calls against a real module-enabled server; time stepped with NOW. */
final class CommandsTest extends KitTestCase
{
    /** @return array<string, array{0: Limit}> */
    public static function limits(): array
    {
        return [
            'SLIDELOG' => [Limit::slideLog('log', self::key('log'), 3, 10)],
            'SLIDECOUNT' => [Limit::slideCount('cnt', self::key('cnt'), 3, '10s')],
            'SLIDEWINDOW' => [Limit::slideWindow('window', self::key('window'), 3, '10s')],
            'FIXED' => [Limit::fixed('fixed', self::key('fixed'), 3, '10000ms')],
            'COUNTER' => [Limit::counter('counter', self::key('counter'), 3, 10)],
            'GCRA' => [Limit::gcra('gcra', self::key('gcra'), 3, 10, burst: 3)],
            'TOKENBUCKET' => [Limit::tokenBucket('bucket', self::key('bucket'), 3, 10, refill: 3)],
        ];
    }

    /** @dataProvider limits */
    public function testHitSpendsUntilTheLimitThenDeniesWithAWait(Limit $limit): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));

        $remaining = array_map(static fn () => $rl->hit($limit)->remaining, range(1, 3));
        $denied = $rl->hit($limit);

        self::assertSame([2, 1, 0], $remaining);
        self::assertFalse($denied->allowed);
        self::assertGreaterThan(0, $denied->retryAfterMs);
        self::assertGreaterThan(0, $denied->resetAfterMs);
        self::assertFalse($denied->neverAdmitted());
        self::assertSame($limit, $denied->limits[0]->limit);
    }

    /** @dataProvider limits */
    public function testPeekSpendsNothing(Limit $limit): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $rl->hit($limit);

        // A peek answers for this request as if it were made: 1 left after it.
        self::assertSame(1, $rl->peek($limit)->remaining);
        self::assertSame(1, $rl->peek($limit)->remaining);
        self::assertSame(1, $rl->hit($limit)->remaining);
    }

    /** @dataProvider limits */
    public function testACostAboveTheLimitIsNeverAdmittedAndSaysSoExplicitly(Limit $limit): void
    {
        $d = $this->limiter(clock: new ManualClock(self::T0))->hit($limit->withCost(4));

        self::assertFalse($d->allowed);
        self::assertTrue($d->neverAdmitted());
        self::assertNull($d->retryAfterMs, 'the server\'s -1 is "never", not a wait');
        self::assertNull($d->retryAfterSeconds());
    }

    public function testASlidingLogCallTakesAnyCostUpToItsLimit(): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $log = Limit::slideLog('log', self::key('costly'), 2000, 60);

        self::assertSame(500, $rl->hit($log->withCost(1500))->remaining);
        self::assertTrue($rl->hit($log->withCost(2001))->neverAdmitted());
    }

    /** @dataProvider limits */
    public function testRefundGivesUnitsBack(Limit $limit): void
    {
        self::requireFeature('REFUND');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $rl->hit($limit->withCost(3));

        self::assertFalse($rl->peek($limit)->allowed);
        $refund = $rl->refund($limit->withCost(2));

        // Two units are back: a request of one would leave one.
        self::assertTrue($refund->allowed);
        self::assertSame(1, $rl->peek($limit)->remaining);
        self::assertSame($rl->peek($limit->withCost(2))->remaining, $refund->remaining);
    }

    /** @dataProvider limits */
    public function testResetClearsTheLimiter(Limit $limit): void
    {
        self::requireFeature('RESET');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $rl->hit($limit->withCost(3));

        $reset = $rl->reset($limit);

        self::assertSame([true, 2, 0], [$reset->allowed, $reset->remaining, $reset->retryAfterMs]);
        self::assertSame(2, $rl->hit($limit)->remaining);
    }

    public function testGcraBurstIsSentAndUsed(): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $limit = Limit::gcra('gcra', self::key('gcra'), 10, '1s', burst: 2);

        $decisions = array_map(static fn () => $rl->hit($limit), range(1, 3));

        self::assertSame([true, true, false], array_map(static fn (Decision $d) => $d->allowed, $decisions));
        // One emission interval (100 ms) after the burst is spent.
        self::assertSame(100, $decisions[2]->retryAfterMs);
    }

    public function testAllIsAllOrNothingAndReturnsEachLimit(): void
    {
        self::requireFeature('RL.ALL');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $perSecond = Limit::gcra('second', self::key('s'), 10, 1);
        $perDay = Limit::fixed('day', self::key('d'), 2, 86_400);

        $first = $rl->hit($perSecond, $perDay->withCost(2));
        $second = $rl->hit($perSecond, $perDay);

        self::assertTrue($first->allowed);
        self::assertEquals([$perSecond, $perDay->withCost(2)], array_map(static fn (LimitDecision $d) => $d->limit, $first->limits));
        self::assertFalse($second->allowed);
        self::assertSame([true, false], array_map(static fn (LimitDecision $d) => $d->allowed, $second->limits));
        // The per-second limit admitted, yet spent nothing: a real hit now gets what it promised.
        self::assertSame($second->limits[0]->remaining, $rl->hit($perSecond)->remaining);
        self::assertSame(min($second->limits[0]->remaining, $second->limits[1]->remaining), $second->remaining);
    }

    public function testAllNeverAdmittedWhenOneLimitCanNeverPass(): void
    {
        self::requireFeature('RL.ALL');
        $d = $this->limiter(clock: new ManualClock(self::T0))
            ->hit(Limit::fixed('a', self::key('a'), 5, 60), Limit::slideLog('b', self::key('b'), 2, 60)->withCost(3));

        self::assertTrue($d->neverAdmitted());
        self::assertNull($d->limits[1]->retryAfterMs);
        self::assertSame(0, $d->limits[0]->retryAfterMs);
    }

    public function testAllRefundAndResetReachEveryLimit(): void
    {
        self::requireFeature('RL.ALL');
        self::requireFeature('RESET');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $a = Limit::slideLog('a', self::key('a'), 3, 60);
        $b = Limit::slideCount('b', self::key('b'), 3, 60);
        $rl->hit($a->withCost(2), $b->withCost(3));

        $refund = $rl->refund($a, $b);

        self::assertSame([1, 0], [$rl->peek($a)->remaining, $rl->peek($b)->remaining]);
        self::assertSame([1, 0], array_map(static fn (LimitDecision $d) => $d->remaining, $refund->limits));
        self::assertSame([2, 2], array_map(static fn (LimitDecision $d) => $d->remaining, $rl->reset($a, $b)->limits));
    }

    public function testPseudonymIsTheSeedsHmacOfTheCanonicalAddressAndTheUtcDay(): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $expected = substr(hash_hmac('sha256', '192.0.2.1|2024-06-17', Servers::SECRET), 0, 24);

        self::assertSame($expected, $rl->pseudonym('192.0.2.1'));
        self::assertSame($expected . ':search', $rl->pseudonym('::ffff:192.0.2.1', 'search'));
        self::assertSame(
            substr(hash_hmac('sha256', '2001:db8:1:2::/64|2024-06-17', Servers::SECRET), 0, 24),
            $rl->pseudonym('2001:db8:1:2:aaaa::1', prefix6: 64),
        );
    }

    public function testABadArgumentIsThrownWithTheServersMessageWhateverThePolicy(): void
    {
        foreach (FailurePolicy::cases() as $policy) {
            // A clock in seconds, not µs: the server refuses the NOW it sends.
            $rl = $this->limiter(policy: $policy, clock: new ManualClock(1_718_609_349));
            try {
                $rl->hit(Limit::fixed('a', self::key('a'), 5, 10));
                self::fail('a NOW in seconds was accepted');
            } catch (RedisFailure $e) {
                self::assertSame(FailureKind::Misuse, $e->kind);
                self::assertStringContainsString('looks like seconds', $e->getMessage());
            }
        }
        self::assertCount(2, $this->logger->records);
        self::assertSame('error', $this->logger->records[0][0]);
        self::assertStringContainsString('looks like seconds', $this->logger->records[0][1]);
    }

    public function testWithoutAClockTheServerClockDecides(): void
    {
        $limit = Limit::slideLog('log', self::key('log'), 2, 60);
        $rl = $this->limiter();

        self::assertSame([1, 0], [$rl->hit($limit)->remaining, $rl->hit($limit)->remaining]);
        $members = Servers::client(Servers::get()->standalone())->zRange($limit->key, 0, -1, true);
        // The scores are the server's own microseconds, within a minute of this machine's.
        foreach ($members as $score) {
            self::assertEqualsWithDelta(microtime(true) * 1e6, $score, 60e6);
        }
    }
}
