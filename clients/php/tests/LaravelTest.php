<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use Illuminate\Contracts\Console\Kernel as ConsoleKernel;
use Illuminate\Contracts\Http\Kernel as HttpKernelContract;
use Illuminate\Foundation\Application;
use Illuminate\Foundation\Testing\TestCase;
use Illuminate\Redis\Limiters\DurationLimiter;
use Illuminate\Support\Carbon;
use Monolog\Handler\TestHandler;
use RedisRl\Laravel\Settings;
use RedisRl\RateLimiter;
use RedisRl\Tests\Laravel\Kernel;
use RedisRl\Tests\Support\Servers;
use Symfony\Bridge\PhpUnit\ClockMock;

require_once '/usr/share/php/Illuminate/autoload.php';
require_once '/usr/share/php/Symfony/Bridge/PhpUnit/ClockMock.php';
// ThrottleRequestsWithRedis sends microtime() and time() to its script: ClockMock steps
// them with Carbon's test clock, which the rest of Laravel and redis-rl read.
ClockMock::register(DurationLimiter::class);

/** The `throttle` middleware on the module, in a real Laravel 8 application. */
final class LaravelTest extends TestCase
{
    /** 2024-06-17 07:30:00 UTC, on a minute boundary. */
    private const S = 1_718_609_400;

    private static string $dir;

    public static function setUpBeforeClass(): void
    {
        self::$dir = sys_get_temp_dir() . '/redis-rl-laravel-' . getmypid();
        @mkdir(self::$dir, 0700, true);
        foreach (['APP_SERVICES_CACHE' => 'services.php', 'APP_PACKAGES_CACHE' => 'packages.php', 'APP_CONFIG_CACHE' => 'config.php', 'APP_ROUTES_CACHE' => 'routes.php', 'APP_EVENTS_CACHE' => 'events.php'] as $name => $file) {
            $_ENV[$name] = $_SERVER[$name] = self::$dir . '/' . $file;
        }
        $_ENV['TEST_REDIS_PORT'] = $_SERVER['TEST_REDIS_PORT'] = (string) Servers::get()->standalone();
    }

    public static function tearDownAfterClass(): void
    {
        exec('rm -rf ' . escapeshellarg(self::$dir));
        ClockMock::withClockMock(false);
    }

    public function createApplication(): Application
    {
        $app = new Application(__DIR__ . '/Laravel');
        $app->useStoragePath(self::$dir);
        $app->singleton(HttpKernelContract::class, Kernel::class);
        $app->singleton(ConsoleKernel::class, \Illuminate\Foundation\Console\Kernel::class);
        $app->singleton(\Illuminate\Contracts\Debug\ExceptionHandler::class, \Illuminate\Foundation\Exceptions\Handler::class);
        $app->make(ConsoleKernel::class)->bootstrap();

        return $app;
    }

    protected function setUp(): void
    {
        parent::setUp();
        Servers::client(Servers::get()->standalone())->flushAll();
        $this->stepTo(self::S * 1_000_000 + 500_000);
    }

    public function testThrottleSixtyOneKeepsLaravelsSyntaxHeadersAnd429(): void
    {
        $ok = array_map(fn () => $this->getJson('/api/plain'), range(1, 3));
        $denied = $this->getJson('/api/plain');

        foreach ($ok as $i => $response) {
            $response->assertOk()->assertHeader('X-RateLimit-Limit', '3')->assertHeader('X-RateLimit-Remaining', (string) (2 - $i));
            $response->assertHeaderMissing('Retry-After');
        }
        $denied->assertStatus(429)->assertHeader('X-RateLimit-Limit', '3')->assertHeader('X-RateLimit-Remaining', '0');
        // sliding_counter at 07:30:00.5: the window ends in 59.5 s; Retry-After rounds up.
        $denied->assertHeader('Retry-After', '60')->assertHeader('X-RateLimit-Reset', (string) (self::S + 60));
        self::assertSame('Too Many Attempts.', $denied->json('message'));
        $key = 'laravel_rl:{' . sha1('|127.0.0.1') . '}:60s:' . (self::S / 60);
        self::assertSame('3', Servers::client(Servers::get()->standalone())->get($key), 'one counter, the denied request not in it');
    }

    public function testTheMetricsRouteCountsEveryDecision(): void
    {
        foreach (range(1, 4) as $_) {
            $this->getJson('/api/plain');
        }

        $scrape = $this->get('/metrics');

        $scrape->assertOk()->assertHeader('Content-Type', \RedisRl\Metrics\Registry::CONTENT_TYPE);
        $lines = array_values(array_filter(explode("\n", (string) $scrape->getContent()), static fn ($l) => str_starts_with($l, 'redis_rl_decisions_total{') || str_starts_with($l, 'redis_rl_call_duration_seconds_count')));
        sort($lines);
        $backend = Servers::backend();
        self::assertSame([
            "redis_rl_call_duration_seconds_count{limit=\"limit0\"} 4",
            "redis_rl_decisions_total{limit=\"limit0\",outcome=\"allowed\",backend=\"{$backend}\"} 3",
            "redis_rl_decisions_total{limit=\"limit0\",outcome=\"denied\",backend=\"{$backend}\"} 1",
        ], $lines);
    }

    /** @return iterable<string, array{array<string, mixed>, string}> */
    public static function badConfig(): iterable
    {
        yield 'unknown backend' => [['redis-rl.backend' => 'lua'], "backend must be 'auto', 'module' or 'scripts', got 'lua'"];
        yield 'metrics not a path' => [['redis-rl.metrics' => true], 'config/redis-rl.php: metrics must be false or a route path'];
        yield 'unknown option' => [['redis-rl.blockDuration' => 60], "config/redis-rl.php: unknown option 'blockDuration'"];
        yield 'unknown algorithm' => [['redis-rl.algorithm' => 'token_bucket'], "redis-rl.algorithm must be one of sliding_counter, sliding_log, fixed, gcra, got 'token_bucket'"];
        yield 'unknown failure policy' => [['redis-rl.failure' => 'ignore'], "failure policy must be 'open' or 'closed', got 'ignore'"];
        yield 'unknown clock' => [['redis-rl.clock' => 'system'], "clock must be null (the server's) or 'carbon'"];
    }

    /**
     * A mistake in config/redis-rl.php fails when the application boots, naming it.
     *
     * @dataProvider badConfig
     * @param array<string, mixed> $config
     */
    public function testABadConfigIsRefusedAtBootWithItsName(array $config, string $message): void
    {
        try {
            $this->reconfigure($config);
            self::fail('accepted');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString($message, $e->getMessage());
        }
    }

    /**
     * As Laravel 8.83: nested throttles show the tightest limiter's fields, on its 429 too.
     * Both limit the same signature, so (as in Laravel) they count on one counter: the
     * first request is counted twice, the inner limit of 3 refuses the second.
     */
    public function testNestedThrottlesShowTheTightestLimitersHeaders(): void
    {
        [$first, $second] = array_map(fn () => $this->getJson('/api/nested'), range(1, 2));

        $first->assertOk()->assertHeader('X-RateLimit-Limit', '3')->assertHeader('X-RateLimit-Remaining', '1');
        $second->assertStatus(429)->assertHeader('X-RateLimit-Limit', '3')->assertHeader('X-RateLimit-Remaining', '0');
        $second->assertHeader('Retry-After', '60');
    }

    /** As Laravel: throttle:0,1 refuses every request with a 429 (not a 500), asking nothing of Redis. */
    public function testAZeroLimitAnswers429AsLaravelDoes(): void
    {
        $response = $this->getJson('/api/closed');

        $response->assertStatus(429)->assertHeader('X-RateLimit-Limit', '0')->assertHeader('X-RateLimit-Remaining', '0');
        $response->assertHeader('Retry-After', '0');
        self::assertSame([], Servers::client(Servers::get()->standalone())->keys('*'), 'nothing was counted');
    }

    /**
     * uploads = 5 an hour and 2 a minute. Laravel's Redis limiter checks them one by one
     * and counts every request it sees: the three the minute limit refuses are spent
     * from the hour, and the next minute finds the hour used up. Ours is one RL.ALL.
     */
    public function testARouteWithTwoLimitsCountsADeniedRequestInNeither(): void
    {
        $statuses = [];
        foreach (['ours' => '/api/upload', 'stock' => '/api/stock/upload'] as $who => $path) {
            $this->stepTo(self::S * 1_000_000 + 500_000);
            $responses = array_map(fn () => $this->postJson($path), range(1, 5));
            $statuses[$who] = array_map(static fn ($r) => $r->getStatusCode(), $responses);
            // Laravel's rule for several limits: the fields of the one with least left.
            $responses[0]->assertHeader('X-RateLimit-Limit', '2')->assertHeader('X-RateLimit-Remaining', '1');
            $this->stepTo((self::S + 61) * 1_000_000);
            $statuses[$who][] = $this->postJson($path)->getStatusCode();
        }

        self::assertSame([200, 200, 429, 429, 429, 200], $statuses['ours']);
        self::assertSame([200, 200, 429, 429, 429, 429], $statuses['stock'], 'stock: the hour paid for the refused');
        $redis = Servers::client(Servers::get()->standalone());
        $hour = 'laravel_rl:{' . md5('uploadshour:127.0.0.1') . '}:3600s:' . intdiv(self::S, 3600);
        self::assertSame('3', $redis->get($hour), 'ours: the 2 + 1 admitted, none of the 3 refused');
    }

    /**
     * The seed page's boundary burst with Laravel's 1-minute granularity, 8 a minute: one
     * request at S opens the stock window, 7 come at S + 59.8 s, 8 at S + 60.2 s.
     */
    public function testTheBoundaryBurstStockAgainstOurs(): void
    {
        $admitted = ['stock' => 0, 'ours' => 0];
        $nearBoundary = ['stock' => 0, 'ours' => 0];
        foreach ([[0, 1], [59_800_000, 7], [60_200_000, 8]] as [$offset, $count]) {
            $this->stepTo(self::S * 1_000_000 + $offset);
            foreach (['stock' => '/api/stock/burst', 'ours' => '/api/burst'] as $who => $path) {
                for ($i = 0; $i < $count; $i++) {
                    if ($this->getJson($path)->getStatusCode() === 200) {
                        $admitted[$who]++;
                        $nearBoundary[$who] += $offset > 0 ? 1 : 0;
                    }
                }
            }
        }
        fwrite(STDERR, sprintf("\nLaravel boundary burst, 8/min: stock ThrottleRequestsWithRedis admitted %d of 16 (%d in the 0.4 s around the boundary), ours (sliding_counter) %d (%d)\n", $admitted['stock'], $nearBoundary['stock'], $admitted['ours'], $nearBoundary['ours']));

        self::assertSame(['stock' => 16, 'ours' => 9], $admitted);
        self::assertSame(['stock' => 15, 'ours' => 8], $nearBoundary);
    }

    public function testANamedLimitersResponseCallbackAnswersTheDenial(): void
    {
        $this->getJson('/api/custom')->assertOk();
        $denied = $this->getJson('/api/custom');

        $denied->assertStatus(429)->assertHeader('X-RateLimit-Remaining', '0')->assertHeader('Retry-After', '60');
        self::assertSame('slow down', $denied->getContent());
    }

    public function testShadowModeLetsItThroughReportsItAndKeepsTheRealHeaders(): void
    {
        $this->reconfigure(['redis-rl.shadow' => true]);

        $responses = array_map(fn () => $this->getJson('/api/plain'), range(1, 4));

        $responses[3]->assertOk()->assertHeader('X-RateLimit-Remaining', '0')->assertHeader('Retry-After', '60');
        self::assertSame(1, $this->app->make(RateLimiter::class)->shadowDenials());
        $records = $this->logs();
        self::assertCount(1, $records);
        self::assertSame('NOTICE', $records[0]['level_name']);
        self::assertStringContainsString('shadow mode, would have denied GET /api/plain (limit0)', $records[0]['message']);
    }

    public function testTheFailurePolicyOpenPassesAndClosedAnswers503(): void
    {
        $this->reconfigure(['redis-rl.port' => Servers::freePort()]);
        $open = $this->getJson('/api/plain');
        $this->reconfigure(['redis-rl.failure' => 'closed']);
        $closed = $this->getJson('/api/plain');

        $open->assertOk()->assertHeaderMissing('X-RateLimit-Limit');
        $closed->assertStatus(503)->assertHeader('Retry-After', '1');
        self::assertCount(2, $this->logs(), 'each outage reported to the app log');
    }

    public function testTheDenyCacheAnswersARepeatedDenialWithoutARoundTrip(): void
    {
        $this->reconfigure(['redis-rl.deny_cache' => true]);
        $calls = static fn () => KitTestCase::calls('rl.slidecount');
        $before = $calls();

        $statuses = array_map(fn () => $this->getJson('/api/plain')->getStatusCode(), range(1, 6));

        self::assertSame([200, 200, 200, 429, 429, 429], $statuses);
        self::assertSame(4, $calls() - $before, 'the last two denials came from the cache');
    }

    public function testTheThrottleMiddlewareOnACluster(): void
    {
        $ports = Servers::get()->cluster();
        $this->reconfigure(['redis-rl.cluster' => array_map(static fn (int $p) => "127.0.0.1:{$p}", $ports)]);
        $moved = static fn () => array_sum(array_map(static fn (int $p) => (int) preg_replace('/^count=(\d+).*$/', '$1', Servers::client($p)->info('errorstats')['errorstat_MOVED'] ?? 'count=0'), $ports));
        $before = $moved();

        $statuses = array_map(fn () => $this->getJson('/api/plain')->getStatusCode(), range(1, 4));

        self::assertSame([200, 200, 200, 429], $statuses);
        self::assertSame(0, $moved() - $before, 'every call went to the slot owner');
        self::assertSame([], $this->logs());
    }

    /** @param array<string, mixed> $config */
    private function reconfigure(array $config): void
    {
        config($config);
        $this->app->forgetInstance(Settings::class);
        $this->app->forgetInstance(RateLimiter::class);
        // The provider reads its config when it registers (at boot): register it again.
        (new \RedisRl\Laravel\RedisRlServiceProvider($this->app))->register();
    }

    /** @return list<array<string, mixed>> */
    private function logs(): array
    {
        $handler = $this->app->make('log')->channel()->getLogger()->getHandlers()[0];
        self::assertInstanceOf(TestHandler::class, $handler);

        return $handler->getRecords();
    }

    /** One instant for Carbon (Laravel, redis-rl's NOW) and ClockMock (the stock script's arguments). */
    private function stepTo(int $micros): void
    {
        Carbon::setTestNow(Carbon::createFromFormat('U.u', sprintf('%d.%06d', intdiv($micros, 1_000_000), $micros % 1_000_000)));
        ClockMock::withClockMock($micros / 1e6);
    }
}
