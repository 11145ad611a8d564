<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Backend;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/**
 * RL.SLIDEWINDOW, the sliding window anchored at the first admitted call (Symfony's
 * sliding_window), on whichever backend the suite runs (test.sh runs it on the module
 * and on the scripts). Its window's end is data in the key, so NOW is stepped freely.
 */
final class SlideWindowTest extends KitTestCase
{
    public function testTheCommandLineAndValidation(): void
    {
        $limit = Limit::slideWindow('w', 'k', 8, '1500ms');
        self::assertSame(['k', '8', '1500ms', 'COST', '2'], $limit->withCost(2)->arguments());
        self::assertSame('RL.SLIDEWINDOW', $limit->algorithm->command());
        $this->expectExceptionMessage("limit 'w': limit must be a positive integer");
        Limit::slideWindow('w', 'k', 0, 10);
    }

    /** Symfony's SlidingWindowLimiterTest::testConsume: 10 per 12 s, 8, then 15 s later 1 and 5, then 13 s later 10. */
    public function testSymfonysNumbers(): void
    {
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(clock: $clock);
        $key = self::key('w');
        $limit = Limit::slideWindow('w', $key, 10, 12);
        $redis = Servers::client(Servers::get()->standalone());
        $reply = static function ($d): array {
            return [$d->allowed, $d->remaining, $d->retryAfterMs, $d->resetAfterMs];
        };

        // The reset runs to the end of the window after this one (when its count stops counting).
        self::assertSame([true, 2, 0, 24_000], $reply($rl->hit($limit->withCost(8))));
        self::assertSame((self::T0 + 12_000_000) . ':8:0', $redis->get($key));
        $clock->advance(15_000_000);
        // 25 % into the next window: 8 × 9 / 12 = 6 still counted.
        self::assertSame([true, 3, 0, 21_000], $reply($rl->hit($limit)));
        self::assertSame([false, 3, 1_501, 21_000], $reply($rl->hit($limit->withCost(5))));
        self::assertSame((self::T0 + 24_000_000) . ':1:8', $redis->get($key), 'a denial spends nothing');
        $clock->advance(13_000_000);
        self::assertSame([true, 0, 0, 20_000], $reply($rl->hit($limit->withCost(10))));
        self::assertTrue($rl->hit($limit->withCost(11))->neverAdmitted());
    }

    public function testInRlAllWithAnotherLimit(): void
    {
        self::requireFeature('RL.ALL');
        $rl = $this->limiter(clock: new ManualClock(self::T0));
        $key = self::key('a');
        [$window, $fixed] = [Limit::slideWindow('w', "{$key}:w", 2, 60), Limit::fixed('f', "{$key}:f", 5, 60)];

        $results = array_map(static fn () => $rl->hit($window, $fixed), range(1, 3));

        self::assertSame([[true, 1, 4], [true, 0, 3], [false, 0, 2]], array_map(
            static fn ($d) => [$d->allowed, $d->limits[0]->remaining, $d->limits[1]->remaining],
            $results,
        ), "RL.ALL's denial: what each would leave");
        self::assertSame(60_001, $results[2]->retryAfterMs, 'the window fits one more a microsecond after its end');
        self::assertSame((self::T0 + 60_000_000) . ':2:0', Servers::client(Servers::get()->standalone())->get("{$key}:w"));
    }

    public function testTheScriptsAnswerAsTheModuleWhereTheModuleIs(): void
    {
        $port = Servers::get()->withModule();
        $answers = [];
        foreach ([Backend::Module, Backend::Scripts] as $backend) {
            $clock = new ManualClock(self::T0);
            $rl = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed, $this->logger, $clock, backend: $backend);
            $limit = Limit::slideWindow('w', self::key('s'), 2, 60);
            $before = self::callsOn($port);
            $answers[] = array_map(static function () use ($rl, $limit, $clock): array {
                $d = $rl->hit($limit);
                $clock->advance(20_000_000);

                return [$d->allowed, $d->remaining, $d->retryAfterMs, $d->resetAfterMs];
            }, range(1, 5));
            $calls = self::callsOn($port);
            self::assertSame($backend === Backend::Module ? 5 : 0, $calls['rl.slidewindow'] - $before['rl.slidewindow'], $backend->value);
            self::assertSame($backend === Backend::Scripts ? 5 : 0, $calls['scripts'] - $before['scripts'], $backend->value);
            self::assertSame((self::T0 + 120_000_000) . ':1:2', Servers::client($port)->get($limit->key));
        }
        // Every 20 s on 2 per minute: the third waits for the window's end and a
        // microsecond, the fourth comes at its end (still in it), the fifth fits as the
        // previous 2 fade (2 × 40 / 60 = 1 counted).
        self::assertSame([[true, 1, 0, 120_000], [true, 0, 0, 100_000], [false, 0, 20_001, 80_000], [false, 0, 1, 60_000], [true, 0, 0, 100_000]], $answers[0]);
        self::assertSame($answers[0], $answers[1]);
    }

    /** @return array{'rl.slidewindow': int, scripts: int} RL.SLIDEWINDOW calls, and scripts run (an EVALSHA answered NOSCRIPT ran none) */
    private static function callsOn(int $port): array
    {
        $stats = self::info($port, 'commandstats');
        $of = static fn (string $c, string $field = 'calls') => preg_match("/\\b{$field}=(\\d+)/", $stats["cmdstat_{$c}"] ?? '', $m) === 1 ? (int) $m[1] : 0;

        return ['rl.slidewindow' => $of('rl.slidewindow'), 'scripts' => $of('evalsha') - $of('evalsha', 'failed_calls') + $of('eval')];
    }
}
