<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Decision;
use RedisRl\FailurePolicy;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\RedisFailure;
use RedisRl\Tests\Support\ManualClock;

/** The exact header text, from real server replies at fixed instants (NOW). */
final class HeadersTest extends KitTestCase
{
    /**
     * @return array<string, array{0: Limit, 1: int, 2: array<string, string>}>
     *         limit, requests made before the one whose headers are pinned, the headers
     */
    public static function cases(): array
    {
        return [
            // T0 is 9.8 s into a 10 s window: 200 ms to its end.
            'FIXED allowed' => [Limit::fixed('fixed', self::key('f'), 3, 10), 0, [
                'RateLimit-Policy' => '"fixed";q=3;w=10',
                'RateLimit' => '"fixed";r=2;t=1',
            ]],
            'FIXED denied' => [Limit::fixed('fixed', self::key('f'), 3, 10), 3, [
                'RateLimit-Policy' => '"fixed";q=3;w=10',
                'RateLimit' => '"fixed";r=0;t=1',
                'Retry-After' => '1',
            ]],
            // In the next window the 3 weigh 3 × (10 − e) / 10: below 1 after e = 6.67 s.
            'SLIDECOUNT denied' => [Limit::slideCount('search', self::key('c'), 3, 10), 3, [
                'RateLimit-Policy' => '"search";q=3;w=10',
                'RateLimit' => '"search";r=0;t=7',
                'Retry-After' => '1',
            ]],
            'SLIDELOG denied' => [Limit::slideLog('feed', self::key('l'), 3, 10), 3, [
                'RateLimit-Policy' => '"feed";q=3;w=10',
                'RateLimit' => '"feed";r=0;t=10',
                'Retry-After' => '10',
            ]],
            'GCRA denied' => [Limit::gcra('upload', self::key('g'), 1, 90), 1, [
                'RateLimit-Policy' => '"upload";q=1;w=90',
                'RateLimit' => '"upload";r=0;t=90',
                'Retry-After' => '90',
            ]],
            // 1500 ms: w= rounds the window up to whole seconds.
            'GCRA sub-second' => [Limit::gcra('burst', self::key('g'), 3, '1500ms', burst: 2), 2, [
                'RateLimit-Policy' => '"burst";q=3;w=2',
                'RateLimit' => '"burst";r=0;t=1',
                'Retry-After' => '1',
            ]],
            // A cost above the limit: denied for good, so no Retry-After to wait for.
            'FIXED never admitted' => [Limit::fixed('fixed', self::key('f'), 3, 10)->withCost(4), 0, [
                'RateLimit-Policy' => '"fixed";q=3;w=10',
                'RateLimit' => '"fixed";r=3;t=0',
            ]],
            'SLIDELOG never admitted' => [Limit::slideLog('feed', self::key('l'), 3, 10)->withCost(9), 0, [
                'RateLimit-Policy' => '"feed";q=3;w=10',
                'RateLimit' => '"feed";r=3;t=0',
            ]],
            'GCRA never admitted' => [Limit::gcra('upload', self::key('g'), 10, 60, burst: 2)->withCost(3), 0, [
                'RateLimit-Policy' => '"upload";q=10;w=60',
                'RateLimit' => '"upload";r=2;t=0',
            ]],
        ];
    }

    /**
     * @dataProvider cases
     * @param array<string, string> $expected
     */
    public function testHeaderText(Limit $limit, int $before, array $expected): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        for ($i = 0; $i < $before; $i++) {
            $rl->hit($limit);
        }

        self::assertSame($expected, Headers::for($rl->hit($limit)));
    }

    public function testLegacyHeadersAsTheSeedSendsThem(): void
    {
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $limit = Limit::slideLog('trending', self::key('t'), 100, 60);

        self::assertSame([
            'RateLimit-Policy' => '"trending";q=100;w=60',
            'RateLimit' => '"trending";r=99;t=60',
            'X-RateLimit-Limit' => '100',
            'X-RateLimit-Remaining' => '99',
            'X-RateLimit-Reset' => '60',
        ], Headers::for($rl->hit($limit), legacy: true));
    }

    public function testAllHasOneItemPerLimitAndLegacyNamesTheDenyingOne(): void
    {
        self::requireFeature('RL.ALL');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $second = Limit::gcra('second', self::key('a'), 10, 1);
        $day = Limit::fixed('day', self::key('a'), 1, 86_400);
        $rl->hit($second, $day);

        self::assertSame([
            'RateLimit-Policy' => '"second";q=10;w=1, "day";q=1;w=86400',
            // T0 is 07:29:09.8 UTC: the day's fixed window ends in 59,450.2 s.
            'RateLimit' => '"second";r=8;t=1, "day";r=0;t=59451',
            'Retry-After' => '59451',
            'X-RateLimit-Limit' => '1',
            'X-RateLimit-Remaining' => '0',
            'X-RateLimit-Reset' => '59451',
        ], Headers::for($rl->hit($second, $day), legacy: true));
    }

    public function testAFailedCallHasNoRateLimitFieldsAndFailClosedSaysWhenToRetry(): void
    {
        $why = RedisFailure::unavailable('down');
        $open = $this->limiter(policy: FailurePolicy::Open)->policyDecision($why);
        $closed = $this->limiter(policy: FailurePolicy::Closed)->policyDecision($why);

        self::assertSame([], Headers::for($open, legacy: true));
        self::assertSame(['Retry-After' => '1'], Headers::for($closed, legacy: true));
    }

    public function testNamesAreQuotedAsStructuredFieldStrings(): void
    {
        $limit = Limit::fixed('a "quoted" \\ name', 'k', 5, 60);
        $d = Decision::single($limit, [1, 4, 0, 1]);

        self::assertSame('"a \\"quoted\\" \\\\ name";q=5;w=60', Headers::for($d)['RateLimit-Policy']);
        self::assertSame('"a \\"quoted\\" \\\\ name";r=4;t=1', Headers::for($d)['RateLimit']);
    }
}
