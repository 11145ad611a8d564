<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use InvalidArgumentException;
use RedisRl\Backend;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Symfony\RateLimiterFactory;
use RedisRl\Tests\Support\ScriptedConnection;
use RedisRl\Tests\Support\Servers;

/**
 * A caller's mistake is refused where the limit is built, with what was wrong; it never
 * reaches Redis, so it can never be answered by the failure policy.
 */
final class ValidationTest extends KitTestCase
{
    /** @return iterable<string, array{\Closure(): mixed, string}> */
    public static function mistakes(): iterable
    {
        yield 'window in words' => [static fn () => Limit::fixed('a', 'k', 10, '10 minutes'), "window must be a positive duration such as 60 (seconds), '60s' or '1500ms'"];
        yield 'window 0' => [static fn () => Limit::gcra('a', 'k', 10, 0), 'window must be a positive duration'];
        yield 'window above 10 years' => [static fn () => Limit::slideCount('a', 'k', 10, '400000000s'), 'at most 315360000000ms (10 years)'];
        yield 'a counter window above 2^63 - 1 µs' => [static fn () => Limit::counter('a', 'k', 10, '9223372036854776ms'), "at most 9223372036854775ms (about 292,000 years), got '9223372036854776ms'"];
        yield 'a counter window above 2^63 - 1 µs, in seconds' => [static fn () => Limit::counter('a', 'k', 10, 9_223_372_036_855), 'at most 9223372036854775ms (about 292,000 years)'];
        yield 'a counter window of 16 digits in seconds' => [static fn () => Limit::counter('a', 'k', 10, 9_999_999_999_999_999), 'at most 9223372036854775ms'];
        yield 'a counter window of 17 digits' => [static fn () => Limit::counter('a', 'k', 10, '10000000000000000ms'), 'at most 9223372036854775ms'];
        yield 'a fixed window above 10 years' => [static fn () => Limit::fixed('a', 'k', 10, '315360001s'), 'at most 315360000000ms (10 years)'];
        yield 'a sliding counter one ms above 10 years' => [static fn () => Limit::slideCount('a', 'k', 10, '315360000001ms'), 'at most 315360000000ms (10 years)'];
        yield 'a token bucket interval above 10 years' => [static fn () => Limit::tokenBucket('a', 'k', 10, '315360000001ms'), 'at most 315360000000ms (10 years)'];
        yield 'renew and escalate' => [static fn () => Limit::counter('a', 'k', 10, 60, renew: true, escalate: true), "limit 'a': renew and escalate exclude each other"];
        yield 'limit 0' => [static fn () => Limit::fixed('a', 'k', 0, 60), "limit 'a': limit must be a positive integer no larger than 1000000000000000, got 0"];
        yield 'negative limit' => [static fn () => Limit::slideLog('a', 'k', -1, 60), 'limit must be a positive integer'];
        yield 'burst 0' => [static fn () => Limit::gcra('a', 'k', 10, 60, burst: 0), 'burst must be a positive integer'];
        yield 'cost 0' => [static fn () => Limit::fixed('a', 'k', 10, 60)->withCost(0), 'cost must be a positive integer'];
        yield 'gcra faster than 1 µs' => [static fn () => Limit::gcra('a', 'k', 2000, '1ms'), 'GCRA spaces requests at least 1 µs apart'];
        yield 'sliding log cost above 1000000' => [static fn () => Limit::slideLog('a', 'k', 5000, 60)->withCost(1_000_001), 'a call adds at most as many, got limit 5000, cost 1000001'];
        yield 'empty key' => [static fn () => Limit::fixed('a', '', 10, 60), 'the key must not be empty'];
        yield 'concurrency with a cost' => [static fn () => Limit::concurrency('c', 'k', 2, 30)->withCost(2), 'a concurrency limit holds one lease per request'];
        yield 'middleware key without {id}' => [static fn () => new \RedisRl\Middleware\RateLimitMiddleware(
            new \RedisRl\RateLimiter(new ScriptedConnection([]), FailurePolicy::Open),
            new \Nyholm\Psr7\Factory\Psr17Factory(),
            [Limit::fixed('api', 'rl:api', 10, 60)],
            static fn () => 'u',
        ), "limit 'api': the key 'rl:api' needs an {id} placeholder"];
        yield 'symfony limit 0, at construction' => [static fn () => self::symfony(['id' => 'api', 'policy' => 'fixed_window', 'limit' => 0, 'interval' => '1 minute']), "limit 'api': limit must be a positive integer"];
        yield 'symfony unknown option' => [static fn () => self::symfony(['id' => 'api', 'policy' => 'fixed_window', 'limit' => 5, 'interval' => '1 minute', 'lock_factory' => 'x']), 'The option "lock_factory" does not exist'];
        yield 'symfony interval below a second' => [static fn () => self::symfony(['id' => 'api', 'policy' => 'sliding_window', 'limit' => 5, 'interval' => '0 seconds']), 'window must be a positive duration'];
    }

    /** @dataProvider mistakes */
    public function testAMistakeIsRefusedWhereTheLimitIsBuilt(\Closure $build, string $message): void
    {
        try {
            $build();
            self::fail('accepted');
        } catch (InvalidArgumentException | \Symfony\Component\OptionsResolver\Exception\ExceptionInterface $e) {
            self::assertStringContainsString($message, $e->getMessage());
        }
    }

    public function testTheLongWindowIsTheCounters(): void
    {
        self::assertSame(Limit::MAX_COUNTER_WINDOW_MS, Limit::counter('a', 'k', 10, '9223372036854775ms')->windowMs);
        self::assertSame(Limit::MAX_WINDOW_MS + 1, Limit::counter('a', 'k', 10, '315360000001ms')->windowMs);
        self::assertSame(Limit::MAX_WINDOW_MS, Limit::fixed('a', 'k', 10, '315360000s')->windowMs);
    }

    /** The options are RL.COUNTER's: no other algorithm's builder takes them (PHP refuses the name). */
    public function testTheCounterOptionsOnAnotherAlgorithm(): void
    {
        foreach (['countAll', 'renew', 'escalate'] as $option) {
            try {
                Limit::fixed('a', 'k', 10, 60, ...[$option => true]);
                self::fail("{$option} accepted");
            } catch (\Error $e) {
                self::assertSame("Unknown named parameter \${$option}", $e->getMessage());
            }
        }
    }

    public function testTheCounterOptionsAreRefusedInRlAllAndNothingIsSent(): void
    {
        $redis = new ScriptedConnection([]);
        $rl = $this->limiter($redis);
        $fixed = Limit::fixed('f', 'rl:{u}:f', 5, 60);
        foreach (['countAll' => 'COUNTALL', 'renew' => 'RENEW', 'escalate' => 'ESCALATE'] as $option => $word) {
            $counter = Limit::counter('c', 'rl:{u}:c', 2, 60, ...[$option => true]);
            foreach ([fn () => $rl->hit($fixed, $counter), fn () => $rl->peek($counter, $fixed), fn () => $rl->acquire('l', $counter, Limit::concurrency('k', 'rl:{u}:k', 2, 30))] as $call) {
                try {
                    $call();
                    self::fail("{$word} accepted in RL.ALL");
                } catch (InvalidArgumentException $e) {
                    self::assertSame("limit 'c': {$word} is RL.COUNTER's alone, refused in RL.ALL (a denied RL.ALL spends nothing): check that limit on its own", $e->getMessage());
                }
            }
        }
        try {
            $rl->hit(Limit::counter('c', 'rl:{u}:c', 2, 60, countAll: true, escalate: true), $fixed);
            self::fail('accepted in RL.ALL');
        } catch (InvalidArgumentException $e) {
            self::assertStringStartsWith("limit 'c': COUNTALL and ESCALATE are RL.COUNTER's alone", $e->getMessage());
        }
        self::assertSame([], $redis->sent);
    }

    public function testAnEmptyLeaseIdIsRefusedBeforeAnyCall(): void
    {
        $redis = new ScriptedConnection([]);
        $this->expectExceptionObject(new InvalidArgumentException('a lease id must not be empty'));
        $this->limiter($redis, FailurePolicy::Open)->acquire('', Limit::concurrency('c', self::key('c'), 2, 30));
    }

    public function testTheModuleMissingGetsTheLoadmoduleHintAndThePolicy(): void
    {
        $this->backend = Backend::Module; // on auto, the scripts would answer
        $decision = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withoutModule()), FailurePolicy::Open)
            ->hit(Limit::fixed('a', self::key('a'), 5, 60));
        self::assertTrue($decision->allowed, 'failing open: a deployment problem, not a bug in the call');
        self::assertStringContainsString('the redis-rl module is not loaded on this server: add `loadmodule', $decision->failure?->getMessage() ?? '');
        self::assertStringContainsString('loadmodule', $this->logger->records[0][1]);
    }

    /** @param array<string, mixed> $config */
    private static function symfony(array $config): RateLimiterFactory
    {
        return new RateLimiterFactory($config, new \RedisRl\RateLimiter(new ScriptedConnection([]), FailurePolicy::Open));
    }
}
