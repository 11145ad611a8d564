<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Metrics\MetricsHandler;
use RedisRl\Metrics\Registry;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\Mode;
use RedisRl\RateLimiter;
use RedisRl\RedisFailure;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\OkHandler;
use RedisRl\Tests\Support\Servers;

/** The metrics (docs/metrics.md), scraped from the registry's text after known sequences. */
final class MetricsTest extends KitTestCase
{
    public function testAKnownSequenceGivesExactCountsAndOneObservationPerCall(): void
    {
        $metrics = new Registry();
        $clock = new ManualClock(self::T0);
        $rl = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, $clock, new DenyCache(), secret: Servers::SECRET, metrics: $metrics);
        $api = Limit::fixed('api', self::key('api'), 2, 60);
        $burst = Limit::gcra('burst', self::key('burst'), 1, 60);
        $tag = bin2hex(random_bytes(4));
        [$a, $b] = [Limit::fixed('a', "rl:{{$tag}}:a", 1, 60), Limit::slideLog('b', "rl:{{$tag}}:b", 5, 60)];

        $rl->hit($api);                                       // api allowed
        $rl->hit($api);                                       // api allowed
        $rl->hit($api);                                       // api denied (now cached)
        $rl->hit($api);                                       // api cache_denied: no call
        $rl->decide([$burst], Mode::Hit);                     // burst allowed
        $rl->decide([$burst], Mode::Hit, shadow: true);       // burst shadow_denied
        $rl->hit($a, $b);                                     // a, b allowed (one RL.ALL)
        $rl->hit($a, $b);                                     // a, b denied
        $rl->throttle(self::key('t'), 0, 1, 60);              // throttle:1/60s allowed
        $down = new RateLimiter(new RedisConnection('127.0.0.1', Servers::freePort()), FailurePolicy::Open, $this->logger, metrics: $metrics);
        $down->hit($api);                                     // api failure_open
        $closed = new RateLimiter(new RedisConnection('127.0.0.1', Servers::freePort()), FailurePolicy::Closed, $this->logger, metrics: $metrics);
        $closed->hit($api);                                   // api failure_closed
        $closed->throttle('rl:{x}:t', 0, 1, 60);               // throttle:1/60s failure_closed

        $backend = Servers::backend();
        $text = $metrics->render();
        self::assertSame([
            "redis_rl_decisions_total{limit=\"a\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"a\",outcome=\"denied\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"api\",outcome=\"allowed\",backend=\"{$backend}\"} 2",
            "redis_rl_decisions_total{limit=\"api\",outcome=\"cache_denied\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"api\",outcome=\"denied\",backend=\"{$backend}\"} 1",
            // Nothing answered the dead servers: the label is the backend configured (auto: module).
            'redis_rl_decisions_total{limit="api",outcome="failure_closed",backend="module"} 1',
            'redis_rl_decisions_total{limit="api",outcome="failure_open",backend="module"} 1',
            "redis_rl_decisions_total{limit=\"b\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"b\",outcome=\"denied\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"burst\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"burst\",outcome=\"shadow_denied\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"throttle:1/60s\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            'redis_rl_decisions_total{limit="throttle:1/60s",outcome="failure_closed",backend="module"} 1',
        ], self::lines($text, 'redis_rl_decisions_total{'));
        // Every call observed once, failures included; the deny-cache hit made no call.
        self::assertSame([
            'redis_rl_call_duration_seconds_count{limit="a"} 2',
            'redis_rl_call_duration_seconds_count{limit="api"} 5',
            'redis_rl_call_duration_seconds_count{limit="b"} 2',
            'redis_rl_call_duration_seconds_count{limit="burst"} 2',
            'redis_rl_call_duration_seconds_count{limit="throttle:1/60s"} 2',
        ], self::lines($text, 'redis_rl_call_duration_seconds_count'));
        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="api",le="+Inf"} 5', explode("\n", $text));
        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="api",le="0.00005"}', array_map(static fn ($l) => preg_replace('/ \d+$/', '', $l), explode("\n", $text)));
        // Label values are the limits' names: no key, identity or pseudonym.
        self::assertStringNotContainsString('rl:{', $text);
    }

    public function testOnlyAdmissionsAreCountedNotPeeksRefundsReleasesOrHeartbeats(): void
    {
        $metrics = new Registry();
        $rl = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, new ManualClock(self::T0), metrics: $metrics);
        $tag = bin2hex(random_bytes(4));
        [$rate, $lease] = [Limit::gcra('rate', "rl:{{$tag}}:r", 10, 60), Limit::concurrency('inflight', "rl:{{$tag}}:c", 2, 30)];

        $rl->acquire('req-1', $rate, $lease);                 // rate, inflight allowed
        $rl->heartbeat('req-1', $lease);
        $rl->release('req-1', $lease);
        $rl->peek($rate);
        $rl->refund($rate);
        $rl->reset($rate);
        $rl->throttle(self::key('t'), 1, 1, 60, 0);           // quantity 0: a peek

        $backend = Servers::backend();
        self::assertSame([
            "redis_rl_decisions_total{limit=\"inflight\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"rate\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
        ], self::lines($metrics->render(), 'redis_rl_decisions_total{'));
        self::assertSame([
            'redis_rl_call_duration_seconds_count{limit="inflight"} 1',
            'redis_rl_call_duration_seconds_count{limit="rate"} 1',
        ], self::lines($metrics->render(), 'redis_rl_call_duration_seconds_count'));
    }

    public function testACallersMistakeIsNeitherCountedNorTimed(): void
    {
        $metrics = new Registry();
        $key = self::key('wrongtype');
        Servers::client(Servers::get()->standalone())->set($key, 'a string');
        $rl = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, metrics: $metrics);

        try {
            $rl->hit(Limit::slideLog('w', $key, 5, 60));
            self::fail('WRONGTYPE is the caller\'s mistake');
        } catch (RedisFailure) {
        }

        self::assertSame([], self::lines($metrics->render(), 'redis_rl_'));
    }

    public function testTheBucketsAreObservedCumulatively(): void
    {
        $metrics = new Registry();
        $metrics->observeCall('x', 0.0003);
        $metrics->observeCall('x', 2.0);
        $text = $metrics->render();

        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="x",le="0.00025"} 0', explode("\n", $text));
        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="x",le="0.0005"} 1', explode("\n", $text));
        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="x",le="0.5"} 1', explode("\n", $text));
        self::assertContains('redis_rl_call_duration_seconds_bucket{limit="x",le="+Inf"} 2', explode("\n", $text));
        self::assertContains('redis_rl_call_duration_seconds_sum{limit="x"} 2.0003', explode("\n", $text));
        $this->expectExceptionMessage("unknown outcome 'blocked'");
        $metrics->countDecision('x', 'blocked', 'module');
    }

    public function testTheNamesLabelsAndBucketsAreDocsMetricsMd(): void
    {
        $doc = (string) file_get_contents(dirname(__DIR__, 3) . '/docs/metrics.md');
        $block = static fn (string $lang) => preg_match("/```{$lang}\\n(.*?)```/s", $doc, $m) === 1 ? trim($m[1]) : self::fail("no {$lang} block");
        $documented = [];
        foreach (explode("\n", $block('metrics')) as $line) {
            [$name, $type] = explode(' ', trim($line));
            $documented[$name] = $type;
        }
        $labels = [];
        foreach (explode("\n", $block('labels')) as $line) {
            $words = explode(' ', trim($line));
            $labels[array_shift($words)] = $words;
        }

        $metrics = new Registry();
        $metrics->countDecision('api', 'allowed', 'module');
        $metrics->observeCall('api', 0.001);
        preg_match_all('/^# TYPE (\S+) (\S+)$/m', $metrics->render(), $types, PREG_SET_ORDER);
        self::assertCount(2, $types);
        foreach ($types as [, $name, $type]) {
            self::assertSame($documented[$name] ?? null, $type, $name);
        }
        self::assertSame($labels['outcome'], Registry::OUTCOMES);
        self::assertSame($labels['backend'], Registry::BACKENDS);
        self::assertSame(array_map('floatval', explode(' ', $block('buckets'))), Registry::BUCKETS);
    }

    public function testThePsr15MetricsRouteServesTheRegistryAfterMiddlewareTraffic(): void
    {
        $metrics = new Registry();
        $rl = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, new ManualClock(self::T0), secret: Servers::SECRET, metrics: $metrics);
        $middleware = new RateLimitMiddleware($rl, new Psr17Factory(), [Limit::gcra('per-ip', 'rl:{id}:m' . random_int(0, PHP_INT_MAX), 2, 60)], shadow: false);
        $statuses = [];
        foreach (range(1, 3) as $_) {
            $statuses[] = $middleware->process(new ServerRequest('GET', '/', [], null, '1.1', ['REMOTE_ADDR' => '203.0.113.9']), new OkHandler())->getStatusCode();
        }

        $response = (new MetricsHandler($metrics, new Psr17Factory()))->handle(new ServerRequest('GET', '/metrics'));

        self::assertSame([200, 200, 429], $statuses);
        self::assertSame(200, $response->getStatusCode());
        self::assertSame(Registry::CONTENT_TYPE, $response->getHeaderLine('Content-Type'));
        $backend = Servers::backend();
        self::assertSame([
            "redis_rl_decisions_total{limit=\"per-ip\",outcome=\"allowed\",backend=\"{$backend}\"} 2",
            "redis_rl_decisions_total{limit=\"per-ip\",outcome=\"denied\",backend=\"{$backend}\"} 1",
        ], self::lines((string) $response->getBody(), 'redis_rl_decisions_total{'));
        self::assertSame(['redis_rl_call_duration_seconds_count{limit="per-ip"} 3'], self::lines((string) $response->getBody(), 'redis_rl_call_duration_seconds_count'));
    }

    public function testShadowModeInTheMiddlewareCountsShadowDenied(): void
    {
        $metrics = new Registry();
        $rl = new RateLimiter(self::standalone(), FailurePolicy::Open, $this->logger, new ManualClock(self::T0), secret: Servers::SECRET, metrics: $metrics);
        $middleware = new RateLimitMiddleware($rl, new Psr17Factory(), [Limit::fixed('s', 'rl:{id}:s' . random_int(0, PHP_INT_MAX), 1, 60)], shadow: true);
        foreach (range(1, 3) as $_) {
            self::assertSame(200, $middleware->process(new ServerRequest('GET', '/', [], null, '1.1', ['REMOTE_ADDR' => '203.0.113.10']), new OkHandler())->getStatusCode());
        }

        $backend = Servers::backend();
        self::assertSame([
            "redis_rl_decisions_total{limit=\"s\",outcome=\"allowed\",backend=\"{$backend}\"} 1",
            "redis_rl_decisions_total{limit=\"s\",outcome=\"shadow_denied\",backend=\"{$backend}\"} 2",
        ], self::lines($metrics->render(), 'redis_rl_decisions_total{'));
    }

    /** @return list<string> the exposition's lines starting with $prefix, sorted */
    private static function lines(string $text, string $prefix): array
    {
        $lines = array_values(array_filter(explode("\n", $text), static fn (string $l) => str_starts_with($l, $prefix)));
        sort($lines);

        return $lines;
    }
}
