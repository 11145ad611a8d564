<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Backend;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/**
 * RL.COUNTER, the fixed window from the first hit (one counter at the key, TTL = window),
 * on whichever backend the suite runs (test.sh runs it on the module and on the scripts).
 *
 * Its window ends when the key expires on the server clock, which the call compares with
 * NOW, so the clock here starts at the real time (half a second behind the server, so a
 * window is never reported early), not at T0.
 */
final class CounterTest extends KitTestCase
{
    /** How far the server's clock may run ahead of a NOW read just before a call. */
    private const SLACK_MS = 1000;
    private const BEHIND_US = 500_000;

    private static function realClock(): ManualClock
    {
        return new ManualClock((int) (microtime(true) * 1e6) - self::BEHIND_US);
    }

    public function testTheCommandLineAndValidation(): void
    {
        $limit = Limit::counter('c', 'k', 8, '1500ms');
        self::assertSame(['k', '8', '1500ms', 'COST', '2'], $limit->withCost(2)->arguments());
        self::assertSame('RL.COUNTER', $limit->algorithm->command());
        $this->expectExceptionMessage("limit 'c': limit must be a positive integer");
        Limit::counter('c', 'k', 0, 10);
    }

    public function testTheWindowStartsAtTheFirstHitAndEndsWhenTheKeyExpires(): void
    {
        $clock = self::realClock();
        $rl = $this->limiter(clock: $clock);
        $key = self::key('c');
        $limit = Limit::counter('c', $key, 8, 10);
        $redis = Servers::client(Servers::get()->standalone());

        $first = $rl->hit($limit);
        // A whole window from the first hit, at the key itself: no clock boundary, no `:<n>`.
        self::assertSame([true, 7, 0, 10_000], [$first->allowed, $first->remaining, $first->retryAfterMs, $first->resetAfterMs]);
        self::assertSame(['1', [$key]], [$redis->get($key), $redis->keys($key . '*')]);
        self::assertGreaterThan(10_000 - self::SLACK_MS, $redis->pttl($key));
        self::assertLessThanOrEqual(10_000, $redis->pttl($key));

        self::assertTrue($rl->hit($limit->withCost(7))->allowed);
        $clock->advance(4_000_000);
        $denied = $rl->hit($limit);
        self::assertSame([false, 0], [$denied->allowed, $denied->remaining]);
        self::assertSame($denied->retryAfterMs, $denied->resetAfterMs);
        // The window ends 10 s after the first hit, 6 s (and the clock's half second) from here.
        self::assertGreaterThanOrEqual(6_500, $denied->retryAfterMs);
        self::assertLessThanOrEqual(6_500 + self::SLACK_MS, $denied->retryAfterMs);
        self::assertSame('8', $redis->get($key), 'a denial spends nothing');
        self::assertTrue($rl->hit($limit->withCost(9))->neverAdmitted());

        // NOW past the key's expiry: that window ended, the next hit starts a new one.
        $clock->advance((6_500 + self::SLACK_MS) * 1000);
        $again = $rl->hit($limit->withCost(2));
        self::assertSame([true, 6, 10_000], [$again->allowed, $again->remaining, $again->resetAfterMs]);
        self::assertSame('2', $redis->get($key));
    }

    public function testInRlAllWithAnotherLimit(): void
    {
        self::requireFeature('RL.ALL');
        $rl = $this->limiter(clock: self::realClock());
        $key = self::key('a');
        [$counter, $fixed] = [Limit::counter('c', "{$key}:c", 2, 60), Limit::fixed('f', "{$key}:f", 5, 60)];

        $results = array_map(static fn () => $rl->hit($counter, $fixed), range(1, 3));

        self::assertSame([[true, 1, 4], [true, 0, 3], [false, 0, 2]], array_map(
            static fn ($d) => [$d->allowed, $d->limits[0]->remaining, $d->limits[1]->remaining],
            $results,
        ), "RL.ALL's denial: what each would leave");
        self::assertFalse($results[2]->limits[0]->allowed);
        self::assertGreaterThan(60_000 - self::SLACK_MS, $results[2]->retryAfterMs);
        self::assertSame('2', Servers::client(Servers::get()->standalone())->get("{$key}:c"));
    }

    public function testTheScriptsAnswerAsTheModuleWhereTheModuleIs(): void
    {
        $port = Servers::get()->withModule();
        $clock = self::realClock();
        $answers = [];
        foreach ([Backend::Module, Backend::Scripts] as $backend) {
            $rl = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed, $this->logger, $clock, backend: $backend);
            $limit = Limit::counter('c', self::key('s'), 2, 60);
            $before = self::callsOn($port);
            $answers[] = array_map(static function () use ($rl, $limit): array {
                $d = $rl->hit($limit);

                return [$d->allowed, $d->remaining, $d->retryAfterMs > 59_000, $d->resetAfterMs > 59_000];
            }, range(1, 3));
            $calls = self::callsOn($port);
            self::assertSame($backend === Backend::Module ? 3 : 0, $calls['rl.counter'] - $before['rl.counter'], $backend->value);
            self::assertSame($backend === Backend::Scripts ? 3 : 0, $calls['scripts'] - $before['scripts'], $backend->value);
            self::assertSame('2', Servers::client($port)->get($limit->key));
        }
        self::assertSame([[true, 1, false, true], [true, 0, false, true], [false, 0, true, true]], $answers[0]);
        self::assertSame($answers[0], $answers[1]);
    }

    public function testTheOptionsAreSentAfterTheOthersAndKeptByWithCostAndForIdentity(): void
    {
        $limit = Limit::counter('c', 'k:{id}', 8, 60, countAll: true, renew: true);
        self::assertSame(['k:{u}', '8', '60s', 'COST', '2', 'COUNTALL', 'RENEW'], $limit->forIdentity('u')->withCost(2)->arguments());
        self::assertSame(['k', '8', '60s', 'ESCALATE'], Limit::counter('c', 'k', 8, 60, escalate: true)->arguments());
        self::assertSame(['k', '8', '60s'], Limit::counter('c', 'k', 8, 60)->arguments());
    }

    public function testCountAllCountsADeniedCall(): void
    {
        $rl = $this->limiter();
        $redis = Servers::client(Servers::get()->standalone());
        foreach ([false, true] as $countAll) {
            $limit = Limit::counter('c', self::key('all'), 2, 60, countAll: $countAll);
            $third = array_map(static fn () => $rl->hit($limit), range(1, 3))[2];
            self::assertSame([false, 0], [$third->allowed, $third->remaining]);
            self::assertSame($countAll ? '3' : '2', $redis->get($limit->key), $countAll ? 'COUNTALL counts the denial' : 'a denial spends nothing');
        }
    }

    public function testADenialThatCountsIsNeverRepeatedByTheDenyCache(): void
    {
        $rl = $this->limiter(cache: new DenyCache());
        $redis = Servers::client(Servers::get()->standalone());
        $plain = Limit::counter('c', self::key('p'), 1, 60);
        $counting = Limit::counter('c', self::key('c'), 1, 60, countAll: true);
        $escalating = Limit::counter('c', self::key('e'), 1, 60, escalate: true);
        foreach ([$plain, $counting, $escalating] as $limit) {
            $decisions = array_map(static fn () => $rl->hit($limit), range(1, 4));
            self::assertSame([true, false, false, false], array_map(static fn ($d) => $d->allowed, $decisions));
        }
        self::assertSame(['1', '4', '4'], [$redis->get($plain->key), $redis->get($counting->key), $redis->get($escalating->key)]);
        // ESCALATE's third denial waits four windows: the server saw every one.
        self::assertGreaterThan(240_000 - self::SLACK_MS, $redis->pttl($escalating->key));
    }

    /**
     * RENEW: every counted call sets the TTL to the full window again. The window ends on
     * the server clock, so the test shortens the TTL with PEXPIRE instead of waiting.
     */
    public function testRenewRestartsTheWindowOnEveryCountedCall(): void
    {
        $rl = $this->limiter();
        $redis = Servers::client(Servers::get()->standalone());
        $renewing = Limit::counter('c', self::key('r'), 2, 60, renew: true);
        $plain = Limit::counter('c', self::key('p'), 2, 60);
        foreach ([$renewing, $plain] as $limit) {
            $rl->hit($limit);
            $redis->pexpire($limit->key, 5000); // as if 55 s had passed
            $second = $rl->hit($limit);
            self::assertTrue($second->allowed);
            $ttl = $redis->pttl($limit->key);
            if ($limit === $renewing) {
                self::assertSame(60_000, $second->resetAfterMs);
                self::assertGreaterThan(60_000 - self::SLACK_MS, $ttl, 'RENEW restarted the window');
            } else {
                self::assertLessThanOrEqual(5000, $second->resetAfterMs);
                self::assertLessThanOrEqual(5000, $ttl, 'without RENEW the window keeps its end');
            }
        }
        // Without COUNTALL a denial writes nothing, so it renews nothing; with it, it does.
        $redis->pexpire($renewing->key, 5000);
        self::assertFalse($rl->hit($renewing)->allowed);
        self::assertLessThanOrEqual(5000, $redis->pttl($renewing->key));
        $both = Limit::counter('c', self::key('b'), 1, 60, countAll: true, renew: true);
        $rl->hit($both);
        $redis->pexpire($both->key, 5000);
        $denied = $rl->hit($both);
        self::assertSame([false, 60_000, 60_000], [$denied->allowed, $denied->retryAfterMs, $denied->resetAfterMs]);
        self::assertGreaterThan(60_000 - self::SLACK_MS, $redis->pttl($both->key));
        self::assertSame('2', $redis->get($both->key));
    }

    /** ESCALATE: the n-th denial (from 0) sets the TTL to window × 2^n (count − limit − 1 = n). */
    public function testEscalateDoublesTheWaitOnEachDenial(): void
    {
        $rl = $this->limiter();
        $redis = Servers::client(Servers::get()->standalone());
        $limit = Limit::counter('c', self::key('e'), 1, 10, escalate: true);
        self::assertTrue($rl->hit($limit)->allowed);
        foreach ([0, 1, 2, 3] as $n) {
            $wait = 10_000 * 2 ** $n;
            $denied = $rl->hit($limit);
            self::assertSame([false, $wait, $wait], [$denied->allowed, $denied->retryAfterMs, $denied->resetAfterMs], "denial {$n}");
            $ttl = $redis->pttl($limit->key);
            self::assertGreaterThan($wait - self::SLACK_MS, $ttl, "denial {$n}");
            self::assertLessThanOrEqual($wait, $ttl, "denial {$n}");
        }
        self::assertSame('5', $redis->get($limit->key), 'every call counted');
    }

    public function testACounterWindowUpTo292000Years(): void
    {
        $rl = $this->limiter();
        $limit = Limit::counter('c', self::key('long'), 2, '9223372036854775ms');
        self::assertSame(['9223372036854775ms', '9223372036854s'], [$limit->arguments()[2], Limit::counter('c', 'k', 2, '9223372036854s')->arguments()[2]]);
        $first = $rl->hit($limit);
        // The scripts read and reply past 2^53 as doubles (2 apart there): within 2 ms.
        self::assertTrue($first->allowed);
        self::assertEqualsWithDelta(Limit::MAX_COUNTER_WINDOW_MS, $first->resetAfterMs, 2);
        self::assertGreaterThan(Limit::MAX_COUNTER_WINDOW_MS - self::SLACK_MS, Servers::client(Servers::get()->standalone())->pttl($limit->key));
    }

    /** @return array{'rl.counter': int, scripts: int} RL.COUNTER calls, and scripts run (an EVALSHA answered NOSCRIPT ran none) */
    private static function callsOn(int $port): array
    {
        $stats = self::info($port, 'commandstats');
        $of = static fn (string $c, string $field = 'calls') => preg_match("/\\b{$field}=(\\d+)/", $stats["cmdstat_{$c}"] ?? '', $m) === 1 ? (int) $m[1] : 0;

        return ['rl.counter' => $of('rl.counter'), 'scripts' => $of('evalsha') - $of('evalsha', 'failed_calls') + $of('eval')];
    }
}
