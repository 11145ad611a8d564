<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Backend;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Mode;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/**
 * RL.TOKENBUCKET, a token bucket refilled in steps (Symfony's token_bucket), on whichever
 * backend the suite runs (test.sh runs it on the module and on the scripts). Its decisions
 * depend on NOW only, so the clock is stepped from T0.
 */
final class TokenBucketTest extends KitTestCase
{
    public function testTheCommandLineAndValidation(): void
    {
        $limit = Limit::tokenBucket('b', 'k', 1000, 15, refill: 100);
        self::assertSame(['k', '1000', '15s', 'REFILL', '100', 'COST', '2'], $limit->withCost(2)->arguments());
        self::assertSame(['k', '5', '1500ms'], Limit::tokenBucket('b', 'k', 5, '1500ms')->arguments(), 'REFILL 1 is the default');
        self::assertSame('RL.TOKENBUCKET', $limit->algorithm->command());
        self::assertSame(['rl:{x}', '1', '1s', 'REFILL', '100'], Limit::tokenBucket('b', 'rl:{id}', 1, 1, 100)->forIdentity('x')->arguments());
        $this->expectExceptionMessage("limit 'b': refill must be a positive integer");
        Limit::tokenBucket('b', 'k', 10, 1, refill: 0);
    }

    /** Symfony's testBucketRefilledWithStrictFrequency: 100 tokens back at each 15 s step. */
    public function testRefillsInSteps(): void
    {
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(clock: $clock);
        $key = self::key('b');
        $limit = Limit::tokenBucket('b', $key, 1000, 15, refill: 100);

        $first = $rl->hit($limit->withCost(300));
        self::assertSame([true, 700, 0, 45_000], [$first->allowed, $first->remaining, $first->retryAfterMs, $first->resetAfterMs]);
        self::assertSame('700:' . self::T0, Servers::client(Servers::get()->standalone())->get($key));
        $seen = [];
        for ($i = 1; $i <= 20; ++$i) {
            $seen[] = $rl->hit($limit)->remaining;
            $clock->advance(4_000_000);
        }
        self::assertSame([699, 698, 697, 696, 795, 794, 793, 792, 891, 890, 889, 888, 987, 986, 985, 999, 998, 997, 996, 999], $seen);

        // Emptied, it waits for the next step, not for a smooth trickle.
        $rl->hit($limit->withCost(999));
        $denied = $rl->hit($limit);
        self::assertFalse($denied->allowed);
        self::assertSame(15_000 - 4_000, $denied->retryAfterMs);
        $peek = $rl->decide([$limit], Mode::Peek);
        self::assertSame([false, 0], [$peek->allowed, $peek->remaining]);
    }

    public function testTheScriptsAnswerAsTheModuleWhereTheModuleIs(): void
    {
        $port = Servers::get()->withModule();
        $answers = [];
        $stored = [];
        foreach ([Backend::Module, Backend::Scripts] as $backend) {
            $clock = new ManualClock(self::T0);
            $rl = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed, $this->logger, $clock, backend: $backend);
            $limit = Limit::tokenBucket('b', self::key('s'), 3, 10, refill: 2);
            $answers[] = array_map(static function (int $step) use ($rl, $limit, $clock): array {
                $clock->advance($step);
                $d = $rl->hit($limit->withCost(2));

                return [$d->allowed, $d->remaining, $d->retryAfterMs, $d->resetAfterMs];
            }, [0, 1, 9_999_999, 1, 5_000_000]);
            $stored[] = Servers::client($port)->get($limit->key);
        }
        self::assertSame([[true, 1, 0, 10_000], [false, 1, 10_000, 10_000], [true, 1, 0, 10_000], [false, 1, 10_000, 10_000], [false, 1, 5_000, 5_000]], $answers[0]);
        self::assertSame($answers[0], $answers[1]);
        self::assertSame('1:' . (self::T0 + 10_000_000), $stored[0]);
        self::assertSame($stored[0], $stored[1]);
    }
}
