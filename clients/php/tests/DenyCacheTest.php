<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\DenyCache;
use RedisRl\Limit;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/** The local deny cache, checked step by step against the server's own answer. */
final class DenyCacheTest extends KitTestCase
{
    /** @return array<string, array{0: Limit}> */
    public static function traffic(): array
    {
        return [
            // 333.33 ms between emissions, so the server's whole-ms wait is rounded up.
            'GCRA 3/s' => [Limit::gcra('g', self::key('g'), 3, 1, burst: 1)],
            'SLIDELOG 2/s' => [Limit::slideLog('l', self::key('l'), 2, 1)],
            'SLIDECOUNT 3/s' => [Limit::slideCount('c', self::key('c'), 3, 1)],
            'FIXED 2/s' => [Limit::fixed('f', self::key('f'), 2, 1)],
        ];
    }

    /**
     * 20 s of traffic at random gaps (1 µs to 20 ms, a fixed seed), each request first
     * asked of the server with PEEK. The gaps land anywhere, the last millisecond before
     * each admission included. Time runs far faster than the wall clock, as it must: the
     * keys' TTLs run on the server's own clock (SPEC: NOW does not move expiry).
     *
     * @dataProvider traffic
     */
    public function testNeverDeniesWhatTheServerWouldAdmit(Limit $limit): void
    {
        $clock = new ManualClock(self::T0);
        $cached = $this->limiter(clock: $clock, cache: new DenyCache());
        $server = $this->limiter(clock: $clock);
        $fromCache = $admitted = 0;
        mt_srand(20240617);

        for ($t = 0; $t < 20_000_000; $t += $step, $clock->advance($step)) {
            $step = mt_rand(1, 20_000);
            $truth = $server->peek($limit);
            $decision = $cached->hit($limit);
            if ($decision->cached) {
                $fromCache++;
                self::assertFalse($truth->allowed, "at +{$t} µs the cache denied what the server admits");
                self::assertGreaterThanOrEqual(1, $decision->retryAfterMs);
            } else {
                self::assertSame($truth->allowed, $decision->allowed, "at +{$t} µs");
            }
            $admitted += (int) $decision->allowed;
        }

        self::assertGreaterThan(100, $fromCache, 'the cache answered denials');
        self::assertGreaterThan(3, $admitted, 'requests were admitted again after cached denials');
    }

    public function testACachedDenialCostsNoRoundTrip(): void
    {
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(clock: $clock, cache: new DenyCache());
        $limit = Limit::gcra('g', self::key('g'), 1, 60);
        $rl->hit($limit);
        $first = $rl->hit($limit);
        $before = self::gcraCalls();

        $clock->advance(30_000_000);
        $later = $rl->hit($limit);

        self::assertFalse($first->cached);
        self::assertTrue($later->cached);
        self::assertFalse($later->allowed);
        self::assertSame($first->retryAfterMs - 30_000, $later->retryAfterMs);
        self::assertSame($before, self::gcraCalls());
    }

    public function testADenialIsOnlyReusedForTheSameRequest(): void
    {
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(clock: $clock, cache: new DenyCache());
        $limit = Limit::fixed('f', self::key('f'), 3, 60);
        $rl->hit($limit->withCost(2));

        self::assertFalse($rl->hit($limit->withCost(2))->allowed);
        // One unit is left: a cheaper request is the server's to decide, and it admits.
        $cheaper = $rl->hit($limit);
        self::assertTrue($cheaper->allowed);
        self::assertFalse($cheaper->cached);
    }

    public function testNeverAdmittedIsNotCached(): void
    {
        $cache = new DenyCache();
        $rl = $this->limiter(clock: new ManualClock(self::T0), cache: $cache);

        self::assertTrue($rl->hit(Limit::fixed('f', self::key('f'), 3, 60)->withCost(4))->neverAdmitted());
        self::assertSame(0, $cache->count());
    }

    public function testRefundAndResetFromThisProcessForgetCachedDenials(): void
    {
        self::requireFeature('RESET');
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(clock: $clock, cache: new DenyCache());
        $limit = Limit::slideLog('l', self::key('l'), 1, 60);
        $rl->hit($limit);
        self::assertFalse($rl->hit($limit)->allowed);

        $rl->reset($limit);

        self::assertTrue($rl->hit($limit)->allowed);
    }

    public function testWorksOnTheServerClockToo(): void
    {
        $rl = $this->limiter(cache: new DenyCache());
        $limit = Limit::slideLog('l', self::key('l'), 1, 60);
        $rl->hit($limit);

        self::assertFalse($rl->hit($limit)->cached);
        self::assertTrue($rl->hit($limit)->cached);
    }

    private static function gcraCalls(): int
    {
        return self::calls('rl.gcra');
    }
}
