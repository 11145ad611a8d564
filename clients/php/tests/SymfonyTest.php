<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\RateLimiter;
use RedisRl\Symfony\CompoundLimiter;
use RedisRl\Symfony\RateLimiterFactory;
use RedisRl\Tests\Support\Servers;
use RedisRl\Tests\Symfony\App;
use RedisRl\Tests\Symfony\Clock;
use RedisRl\Tests\Symfony\Logger;
use Symfony\Bridge\PhpUnit\ClockMock;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\RateLimiter\CompoundLimiter as SymfonyCompoundLimiter;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\RateLimitExceededException;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\Policy\FixedWindowLimiter;
use Symfony\Component\RateLimiter\RateLimiterFactory as SymfonyRateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

foreach (['Bundle/FrameworkBundle', 'Bundle/SecurityBundle', 'Component/RateLimiter', 'Component/Lock'] as $package) {
    require_once "/usr/share/php/Symfony/{$package}/autoload.php";
}
// ClockMock alone: the bridge's autoload.php would also install its deprecation handler.
require_once '/usr/share/php/Symfony/Bridge/PhpUnit/ClockMock.php';
// Symfony's own limiter reads microtime(): ClockMock steps it with the kit's clock.
ClockMock::register(FixedWindowLimiter::class);
ClockMock::register(\Symfony\Component\RateLimiter\Reservation::class);

/** Symfony RateLimiter 5.4 on the module, inside a real Symfony HttpKernel application. */
final class SymfonyTest extends KitTestCase
{
    private static string $dir;
    private ManualClockAdapter $clock;

    public static function setUpBeforeClass(): void
    {
        self::$dir = sys_get_temp_dir() . '/redis-rl-symfony-' . getmypid();
    }

    public static function tearDownAfterClass(): void
    {
        exec('rm -rf ' . escapeshellarg(self::$dir));
        ClockMock::withClockMock(false);
    }

    protected function setUp(): void
    {
        parent::setUp();
        Logger::$records = [];
        Clock::set(self::T0);
        Servers::client(Servers::get()->standalone())->flushAll();
    }

    public function testTheDocsControllerRunsOnTheModuleWithNoLockAndNoCachePool(): void
    {
        $app = $this->app('ours');
        $container = $app->getContainer()->get('test.service_container');
        self::assertFalse($container->has('lock.factory'), 'no lock');
        self::assertFalse($container->has('limiter'), "framework.rate_limiter is off");
        self::assertFalse($container->has('limiter.storage.anonymous_api'), 'no limiter storage');

        $responses = array_map(fn () => $app->handle(Request::create('/api/trending')), range(1, 9));

        self::assertSame(array_fill(0, 8, 200) + [8 => 429], array_map(static fn (Response $r) => $r->getStatusCode(), $responses));
        self::assertSame(['7', '6', '5', '4', '3', '2', '1', '0', '0'], array_map(static fn (Response $r) => $r->headers->get('X-RateLimit-Remaining'), $responses));
        self::assertSame('8', $responses[8]->headers->get('X-RateLimit-Limit'));
        // The oldest of the 8 leaves the 10 s log at T0 + 10 s.
        self::assertSame((string) (intdiv(self::T0, 1_000_000) + 10), $responses[8]->headers->get('X-RateLimit-Retry-After'));
        self::assertSame(8, Servers::client(Servers::get()->standalone())->zCard('rl:{127.0.0.1}:anonymous_api'));
        self::assertDirectoryDoesNotExist($app->getCacheDir() . '/pools', 'nothing written to a cache pool');
    }

    public function testTheMetricsRouteCountsTheControllersDecisions(): void
    {
        $app = $this->app('ours');
        foreach (range(1, 9) as $_) {
            $app->handle(Request::create('/api/trending'));
        }

        $scrape = $app->handle(Request::create('/metrics'));

        self::assertSame(200, $scrape->getStatusCode());
        self::assertSame(\RedisRl\Metrics\Registry::CONTENT_TYPE, $scrape->headers->get('Content-Type'));
        $lines = array_values(array_filter(explode("\n", (string) $scrape->getContent()), static fn ($l) => str_starts_with($l, 'redis_rl_decisions_total{') || str_starts_with($l, 'redis_rl_call_duration_seconds_count')));
        sort($lines);
        $backend = Servers::backend();
        self::assertSame([
            'redis_rl_call_duration_seconds_count{limit="anonymous_api"} 9',
            "redis_rl_decisions_total{limit=\"anonymous_api\",outcome=\"allowed\",backend=\"{$backend}\"} 8",
            "redis_rl_decisions_total{limit=\"anonymous_api\",outcome=\"denied\",backend=\"{$backend}\"} 1",
        ], $lines);
    }

    public function testLoginThrottlingIsOneAllOrNothingCallPerAttempt(): void
    {
        $app = $this->app('ours');
        $login = static fn (string $password) => $app->handle(Request::create('/login', 'POST', server: ['CONTENT_TYPE' => 'application/json'], content: json_encode(['username' => 'Alice', 'password' => $password])));
        $redis = Servers::client(Servers::get()->standalone());
        // fixed_window is RL.COUNTER, whose window ends when its key expires on the
        // server clock: this test's clock is the real time.
        $start = ManualClockAdapter::real();
        Clock::set($start);

        $attempts = array_map(static fn () => $login('wrong'), range(1, 3));
        $throttled = $login('wrong');
        $evenRight = $login('secret');

        self::assertSame([401, 401, 401], array_map(static fn (Response $r) => $r->getStatusCode(), $attempts));
        self::assertStringContainsString('Invalid credentials', (string) $attempts[2]->getContent());
        self::assertSame(401, $throttled->getStatusCode());
        self::assertStringContainsString('Too many failed login attempts', (string) $throttled->getContent());
        self::assertStringContainsString('Too many failed login attempts', (string) $evenRight->getContent());
        // Refused attempts were counted in neither limit: the per-IP counter holds the 3
        // the username limit admitted, not 5.
        self::assertSame('3', $redis->get('rl:{127.0.0.1}:login_ip'));
        self::assertSame('3', $redis->get('rl:{127.0.0.1}:login_user:alice'));

        // (A second past the window: its end is the key's expiry on the server clock.)
        Clock::set($start + 901_000_000);
        self::assertSame(200, $login('secret')->getStatusCode(), 'the next window lets the right password in');
        self::assertSame(0, $redis->exists('rl:{127.0.0.1}:login_ip', 'rl:{127.0.0.1}:login_user:alice'), 'a login resets both');
    }

    /**
     * The seed page's boundary burst, 8 per 10 s: one request at S opens Symfony's
     * fixed window, 7 come at S + 9.8 s, just before its boundary, and 8 at S + 10.2 s,
     * just after it. Same app, same stepped instants.
     */
    public function testTheBoundaryBurstStockAgainstOurs(): void
    {
        $app = $this->app('stock');
        $admitted = ['stock' => [], 'ours' => []];
        foreach ([[0, 1], [9_800_000, 7], [10_200_000, 8]] as [$offset, $count]) {
            Clock::set(self::T0 + $offset);
            foreach (['stock' => '/api/stock', 'ours' => '/api/trending'] as $who => $path) {
                for ($i = 0; $i < $count; $i++) {
                    $admitted[$who][] = $app->handle(Request::create($path))->getStatusCode() === 200 ? $offset : null;
                }
            }
        }
        $total = array_map(static fn (array $a) => count(array_filter($a, 'is_int')), $admitted);
        $nearBoundary = array_map(static fn (array $a) => count(array_filter($a, static fn ($o) => is_int($o) && $o > 0)), $admitted);
        fwrite(STDERR, sprintf("\nSymfony boundary burst, 8/10 s: stock fixed_window admitted %d of 16 (%d in the 0.4 s around the boundary), ours (sliding_log) %d (%d)\n", $total['stock'], $nearBoundary['stock'], $total['ours'], $nearBoundary['ours']));

        self::assertSame(['stock' => 16, 'ours' => 9], $total, 'ours: 8 in any 10 s; the 9th is the opener, 10.2 s old');
        self::assertSame(['stock' => 15, 'ours' => 8], $nearBoundary);
    }

    public function testPoliciesReturnSymfonysRateLimit(): void
    {
        $limiter = $this->limiter(clock: $this->clock = ManualClockAdapter::atRealTime());
        $fixed = (new RateLimiterFactory(['id' => 'f', 'policy' => 'fixed_window', 'limit' => 2, 'interval' => '1 minute'], $limiter))->create('u1');
        $start = $this->clock->micros;

        self::assertSame(1, $fixed->consume()->getRemainingTokens());
        $this->clock->micros += 20_000_000;
        self::assertSame(2, $fixed->consume()->getLimit());
        $denied = $fixed->consume();
        self::assertFalse($denied->isAccepted());
        // As Symfony's fixed window: it ends a minute after the first consume (not on the
        // clock's minute), and the retry instant is in whole seconds, floor(now + ceil(wait)).
        self::assertSame((intdiv($start, 1_000_000) + 60) * 1_000_000, (int) $denied->getRetryAfter()->format('Uu'));
        self::assertSame('2', Servers::client(Servers::get()->standalone())->get('rl:{u1}:f'), 'one counter at the key itself');
        try {
            $denied->ensureAccepted();
            self::fail('ensureAccepted() must throw');
        } catch (RateLimitExceededException $e) {
            self::assertSame($denied, $e->getRateLimit());
        }
        $fixed->reset();
        self::assertTrue($fixed->consume()->isAccepted(), 'reset() cleared the window');
        $this->expectExceptionObject(new \InvalidArgumentException('Cannot reserve more tokens (3) than the size of the rate limiter (2).'));
        $fixed->consume(3);
    }

    public function testTokenBucketReservesInTheFutureAndSlidingWindowCannotReserve(): void
    {
        // Reservation::getWaitDuration() reads microtime(): ClockMock's, which Clock steps.
        $limiter = $this->limiter(clock: new Clock());
        $factory = new RateLimiterFactory(['id' => 'tb', 'policy' => 'token_bucket', 'limit' => 2, 'rate' => ['interval' => '10 seconds', 'amount' => 1]], $limiter);
        $bucket = $factory->create('u2');

        self::assertSame(2, $bucket->consume(2)->getLimit());
        // As Symfony's: reserve() does not wait, the reservation is due when the token is.
        $reservation = $bucket->reserve(1, 15.0);
        self::assertSame(10.0, round($reservation->getWaitDuration(), 3), 'due at the next refill step');
        self::assertSame(self::T0 + 10_000_000, (int) $reservation->getRateLimit()->getRetryAfter()->format('Uu'));
        self::assertFalse($reservation->getRateLimit()->isAccepted(), 'a future reservation, as Symfony reports it');
        try {
            // The reserved token is spent at T0 + 10 s: the next one is due at T0 + 20 s.
            $bucket->reserve(1, 15.0);
            self::fail('a wait above maxTime must throw');
        } catch (MaxWaitDurationExceededException $e) {
            self::assertFalse($e->getRateLimit()->isAccepted());
        }
        Clock::set(Clock::$micros + 10_000_000);
        self::assertFalse($bucket->consume()->isAccepted(), 'the token due now was reserved');
        Clock::set(Clock::$micros + 10_000_000);
        self::assertTrue($bucket->consume()->isAccepted(), 'and the next one is free');

        $this->expectException(ReserveNotSupportedException::class);
        (new RateLimiterFactory(['id' => 's', 'policy' => 'sliding_window', 'limit' => 2, 'interval' => '1 minute'], $limiter))->create('u2')->reserve();
    }

    public function testTheSlidingWindowIsSymfonysAnchoredAtTheFirstConsume(): void
    {
        $limiter = $this->limiter(clock: new Clock());
        $window = (new RateLimiterFactory(['id' => 'sw', 'policy' => 'sliding_window', 'limit' => 10, 'interval' => '12 seconds'], $limiter))->create('u7');
        $at = static fn ($r) => [$r->isAccepted(), $r->getRemainingTokens(), (int) $r->getRetryAfter()->format('Uu')];

        // Symfony's retryAfter is its window's end, admitted or not; a window from now before any.
        self::assertSame([true, 10, self::T0 + 12_000_000], $at($window->consume(0)));
        self::assertSame([true, 2, self::T0 + 12_000_000], $at($window->consume(8)));
        Clock::set(self::T0 + 15_000_000);
        self::assertSame([true, 3, self::T0 + 24_000_000], $at($window->consume()));
        self::assertSame([false, 3, self::T0 + 24_000_000], $at($window->consume(5)));
        self::assertSame((self::T0 + 24_000_000) . ':1:8', Servers::client(Servers::get()->standalone())->get('rl:{u7}:sw'));
        Clock::set(self::T0 + 28_000_000);
        self::assertSame([true, 0, self::T0 + 36_000_000], $at($window->consume(10)));
        $window->reset();
        self::assertSame([true, 10, self::T0 + 40_000_000], $at($window->consume(0)));
    }

    public function testAFixedWindowReservationIsDueAtTheWindowsEndAndSpendsNothingAsInSymfony(): void
    {
        // Reservation::getWaitDuration() reads ClockMock's microtime(), which Clock steps.
        Clock::set($start = ManualClockAdapter::real());
        $fixed = (new RateLimiterFactory(['id' => 'r', 'policy' => 'fixed_window', 'limit' => 2, 'interval' => '10 seconds'], $this->limiter(clock: new Clock())))->create('u7');
        $redis = Servers::client(Servers::get()->standalone());

        self::assertTrue($fixed->reserve(2)->getRateLimit()->isAccepted(), 'taken now');
        Clock::set($start + 3_000_000);
        $reservation = $fixed->reserve(1, 15.0);

        // The window ends 10 s after the first consume: 7 s from here, in Symfony's whole seconds.
        self::assertSame(7.0, round($reservation->getWaitDuration(), 3));
        self::assertFalse($reservation->getRateLimit()->isAccepted());
        self::assertSame('2', $redis->get('rl:{u7}:r'), 'nothing spent, now or at the reservation');
        self::assertFalse($fixed->consume()->isAccepted(), 'the window stays full');
        Clock::set($start + 10_000_000);
        self::assertTrue($fixed->consume(2)->isAccepted(), 'the next window starts empty, as in Symfony');
    }

    public function testACompoundOfOneLimiterCannotReserveAndConsumeZeroIsAcceptedWhenExhausted(): void
    {
        $limiter = $this->limiter(clock: new ManualClockAdapter());
        $factory = new RateLimiterFactory(['id' => 'one', 'policy' => 'fixed_window', 'limit' => 2, 'interval' => '1 minute'], $limiter);
        $fixed = $factory->create('u5');
        self::assertTrue($fixed->consume(2)->isAccepted());
        $zero = $fixed->consume(0);
        self::assertTrue($zero->isAccepted(), 'consume(0) takes nothing: Symfony accepts it on an exhausted window');
        self::assertSame(0, $zero->getRemainingTokens());
        self::assertFalse($fixed->consume()->isAccepted(), 'and it spent nothing');
        try {
            (new RateLimiterFactory(['id' => 'tb', 'policy' => 'token_bucket', 'limit' => 2, 'rate' => ['interval' => '1 second']], $limiter))->create('u5')->consume(3);
            self::fail('more than the burst must throw');
        } catch (\InvalidArgumentException $e) {
            self::assertSame('Cannot reserve more tokens (3) than the burst size of the rate limiter (2).', $e->getMessage());
        }

        $this->expectException(ReserveNotSupportedException::class);
        (new CompoundLimiter([$factory->create('u5')]))->reserve();
    }

    public function testTheCompoundLimiterIsAtomicWhereSymfonysIsNot(): void
    {
        $limiter = $this->limiter(clock: new ManualClockAdapter());
        $perMinute = new RateLimiterFactory(['id' => 'minute', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 minute'], $limiter);
        $perDay = new RateLimiterFactory(['id' => 'day', 'policy' => 'fixed_window', 'limit' => 100, 'interval' => '1 day'], $limiter);
        $ours = new CompoundLimiter([$perDay->create('u3'), $perMinute->create('u3')]);
        $storage = new InMemoryStorage();
        $stockDay = new SymfonyRateLimiterFactory(['id' => 'day', 'policy' => 'fixed_window', 'limit' => 100, 'interval' => '1 day'], $storage);
        $stock = new SymfonyCompoundLimiter([
            $stockDay->create('u3'),
            (new SymfonyRateLimiterFactory(['id' => 'minute', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 minute'], $storage))->create('u3'),
        ]);

        foreach ([$ours, $stock] as $compound) {
            self::assertTrue($compound->consume()->isAccepted());
            for ($i = 0; $i < 5; $i++) {
                self::assertFalse($compound->consume()->isAccepted());
            }
        }

        self::assertSame(99, $perDay->create('u3')->consume(0)->getRemainingTokens(), 'ours: the 5 refused spent nothing');
        self::assertSame(94, $stockDay->create('u3')->consume(0)->getRemainingTokens(), "Symfony's: the day paid for them");
    }

    public function testShadowModePassesTheDenialReportsItAndKeepsTheRealState(): void
    {
        $limiter = $this->limiter(clock: $clock = ManualClockAdapter::atRealTime());
        $shadow = (new RateLimiterFactory(['id' => 'sh', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 minute', 'shadow' => true], $limiter))->create('u4');

        $shadow->consume();
        $wouldDeny = $shadow->consume();

        self::assertTrue($wouldDeny->isAccepted());
        self::assertSame(0, $wouldDeny->getRemainingTokens());
        self::assertSame((intdiv($clock->micros, 1_000_000) + 60) * 1_000_000, (int) $wouldDeny->getRetryAfter()->format('Uu'));
        self::assertSame(1, $limiter->shadowDenials());
        self::assertSame('notice', $this->logger->records[0][0]);
        self::assertStringContainsString('shadow mode, would have denied consume(1) on rl:{u4}:sh (sh)', $this->logger->records[0][1]);
    }

    public function testTheFailurePolicyAnswersWhenRedisCannot(): void
    {
        $dead = new RedisConnection('127.0.0.1', Servers::freePort());
        $config = ['id' => 'x', 'policy' => 'sliding_window', 'limit' => 5, 'interval' => '1 minute'];

        $open = (new RateLimiterFactory($config, $this->limiter($dead, FailurePolicy::Open)))->create('u5')->consume();
        $closed = (new RateLimiterFactory($config, $this->limiter($dead, FailurePolicy::Closed)))->create('u5')->consume();

        self::assertTrue($open->isAccepted());
        self::assertFalse($closed->isAccepted());
        self::assertGreaterThan(time(), $closed->getRetryAfter()->getTimestamp() + 1);
        self::assertCount(2, $this->logger->records);
    }

    public function testTheDenyCacheRepeatsADenialWithoutARoundTrip(): void
    {
        $clock = new ManualClockAdapter();
        $limiter = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, $clock, new \RedisRl\DenyCache());
        $fixed = (new RateLimiterFactory(['id' => 'dc', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 minute'], $limiter))->create('u6');
        $calls = static fn () => self::calls('rl.counter');
        $before = $calls();

        $results = [$fixed->consume(), $fixed->consume(), $fixed->consume()];

        self::assertSame([true, false, false], array_map(static fn ($r) => $r->isAccepted(), $results));
        self::assertSame(2, $calls() - $before, 'the third came from the deny cache');
        self::assertEquals($results[1]->getRetryAfter(), $results[2]->getRetryAfter(), 'the same instant to retry at');
    }

    public function testACompoundLimiterIsOneCallInACluster(): void
    {
        $ports = Servers::get()->cluster();
        $limiter = new RateLimiter(new ClusterConnection(array_map(static fn (int $p) => "127.0.0.1:{$p}", $ports)), FailurePolicy::Closed, $this->logger);
        $key = 'user-' . bin2hex(random_bytes(4));
        $compound = new CompoundLimiter([
            (new RateLimiterFactory(['id' => 'burst', 'policy' => 'token_bucket', 'limit' => 2, 'rate' => ['interval' => '1 second', 'amount' => 1]], $limiter))->create($key),
            (new RateLimiterFactory(['id' => 'hour', 'policy' => 'sliding_window', 'limit' => 100, 'interval' => '1 hour'], $limiter))->create($key),
        ]);

        self::assertSame([true, true, false], [$compound->consume()->isAccepted(), $compound->consume()->isAccepted(), $compound->consume()->isAccepted()]);
        self::assertSame([], $this->logger->records, 'no CROSSSLOT, no failure');
    }

    private function app(string $environment): App
    {
        $app = new App($environment, Servers::get()->standalone(), self::$dir);
        $app->boot();

        return $app;
    }
}

/** The kit's Clock over the stepped test clock. */
final class ManualClockAdapter implements \RedisRl\Clock
{
    public int $micros = KitTestCase::T0;

    /**
     * Half a second ahead of the server clock, for the fixed window (RL.COUNTER), whose
     * window ends when its key expires on the server clock: its whole-second waits are
     * then Symfony's (a window from the first consume, stepped in whole seconds, has
     * less than a second less to go than Symfony says, which rounds up to the same).
     */
    public static function real(): int
    {
        return (int) (microtime(true) * 1e6) + 500_000;
    }

    public static function atRealTime(): self
    {
        $clock = new self();
        $clock->micros = self::real();

        return $clock;
    }

    public function nowMicros(): int
    {
        return $this->micros;
    }
}
