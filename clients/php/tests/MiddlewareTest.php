<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\OkHandler;
use RedisRl\Tests\Support\Servers;

final class MiddlewareTest extends KitTestCase
{
    private ManualClock $clock;
    private OkHandler $app;

    protected function setUp(): void
    {
        parent::setUp();
        $this->clock = new ManualClock(self::T0);
        $this->app = new OkHandler();
    }

    public function testSetsTheHeadersAndAnswers429WithRetryAfter(): void
    {
        $endpoint = 'api' . random_int(0, PHP_INT_MAX);
        $middleware = $this->middleware([Limit::gcra('api', "rl:{id}:{$endpoint}", 2, 60)]);
        $ip = '203.0.113.' . random_int(1, 254);

        [$first, $second, $third] = array_map(fn () => $middleware->process(self::request($ip), $this->app), range(1, 3));

        self::assertSame([200, 200, 429], [$first->getStatusCode(), $second->getStatusCode(), $third->getStatusCode()]);
        self::assertSame(2, $this->app->calls, 'the denied request never reached the application');
        self::assertSame(self::fields($first), [
            'RateLimit-Policy' => '"api";q=2;w=60',
            'RateLimit' => '"api";r=1;t=30',
        ]);
        self::assertSame(self::fields($third), [
            'RateLimit-Policy' => '"api";q=2;w=60',
            'RateLimit' => '"api";r=0;t=60',
            'Retry-After' => '30',
        ]);
        self::assertSame('{"error":"rate_limited"}', (string) $third->getBody());
        // The key holds the address's pseudonym, never the address.
        $pseudonym = substr(hash_hmac('sha256', "{$ip}|2024-06-17", Servers::SECRET), 0, 24);
        self::assertSame(1, Servers::client(Servers::get()->standalone())->exists("rl:{{$pseudonym}}:{$endpoint}"));
    }

    public function testThePseudonymIsAskedOncePerAddressAndUtcDay(): void
    {
        if (Servers::backend() === 'scripts') {
            self::markTestSkipped('the scripts backend computes pseudonyms in the kit: no server call to count');
        }
        $middleware = $this->middleware([Limit::fixed('api', 'rl:{id}:p', 1000, 60)]);
        $calls = static fn () => (int) substr(strtok(
            self::info(Servers::get()->standalone(), 'commandstats')['cmdstat_rl.pseudonym'] ?? 'calls=0,',
            ',',
        ), strlen('calls='));
        $before = $calls();

        for ($i = 0; $i < 5; $i++) {
            $middleware->process(self::request('198.51.100.1'), $this->app);
        }
        $middleware->process(self::request('198.51.100.2'), $this->app);
        self::assertSame(2, $calls() - $before);

        $this->clock->advance(86_400_000_000);
        $middleware->process(self::request('198.51.100.1'), $this->app);
        self::assertSame(3, $calls() - $before, 'a new UTC day, a new pseudonym');
    }

    public function testSeveralLimitsAreOneAllOrNothingCall(): void
    {
        self::requireFeature('RL.ALL');
        $id = 'key-' . random_int(0, PHP_INT_MAX);
        $middleware = $this->middleware(
            [Limit::gcra('second', 'rl:{id}:s', 10, 1), Limit::fixed('minute', 'rl:{id}:m', 1, 60)],
            static fn (ServerRequestInterface $r) => $r->getHeaderLine('X-Api-Key'),
        );

        $middleware->process(self::request('192.0.2.1')->withHeader('X-Api-Key', $id), $this->app);
        $denied = $middleware->process(self::request('192.0.2.1')->withHeader('X-Api-Key', $id), $this->app);

        self::assertSame(429, $denied->getStatusCode());
        self::assertSame('"second";q=10;w=1, "minute";q=1;w=60', $denied->getHeaderLine('RateLimit-Policy'));
        self::assertSame('"second";r=8;t=1, "minute";r=0;t=51', $denied->getHeaderLine('RateLimit'));
        // T0 is 9.8 s into its minute.
        self::assertSame('51', $denied->getHeaderLine('Retry-After'));
    }

    public function testACustomIdentityIsUsedAsGiven(): void
    {
        $id = 'user-' . random_int(0, PHP_INT_MAX);
        $middleware = $this->middleware(
            [Limit::slideLog('user', 'rl:{id}:u', 5, 60)],
            static fn (ServerRequestInterface $r) => $r->getHeaderLine('X-User'),
        );

        $response = $middleware->process(self::request('192.0.2.1')->withHeader('X-User', $id), $this->app);

        self::assertSame('"user";r=4;t=60', $response->getHeaderLine('RateLimit'));
        self::assertSame(1, Servers::client(Servers::get()->standalone())->exists("rl:{{$id}}:u"));
    }

    public function testFailOpenPassesWithoutHeadersAndFailClosedAnswers503(): void
    {
        $dead = new RedisConnection('127.0.0.1', Servers::freePort());
        $limits = [Limit::gcra('api', 'rl:{id}:api', 2, 60)];

        $open = $this->middleware($limits, null, $this->limiter($dead, FailurePolicy::Open))
            ->process(self::request('192.0.2.1'), $this->app);
        $closed = $this->middleware($limits, null, $this->limiter($dead, FailurePolicy::Closed))
            ->process(self::request('192.0.2.1'), $this->app);

        self::assertSame(200, $open->getStatusCode());
        self::assertSame([], self::fields($open));
        self::assertSame(503, $closed->getStatusCode());
        self::assertSame(['Retry-After' => '1'], self::fields($closed));
        self::assertSame(1, $this->app->calls);
        self::assertCount(2, $this->logger->records, 'each outage reported once');
    }

    public function testShadowModeLetsTheDenialThroughReportsItAndKeepsTheRealHeaders(): void
    {
        $limiter = $this->limiter(clock: $this->clock);
        $id = 'shadow-' . random_int(0, PHP_INT_MAX);
        $middleware = new RateLimitMiddleware(
            $limiter,
            new Psr17Factory(),
            [Limit::fixed('api', 'rl:{id}:shadow', 1, 60)],
            static fn () => $id,
            shadow: true,
        );

        $first = $middleware->process(self::request('192.0.2.1'), $this->app);
        $second = $middleware->process(self::request('192.0.2.1'), $this->app);

        self::assertSame([200, 200], [$first->getStatusCode(), $second->getStatusCode()]);
        self::assertSame(2, $this->app->calls, 'the would-be denial reached the application');
        self::assertSame('"api";r=0;t=51', $second->getHeaderLine('RateLimit'), 'the real state');
        self::assertSame('51', $second->getHeaderLine('Retry-After'));
        self::assertSame(1, $limiter->shadowDenials());
        self::assertSame([['notice', 'redis-rl: shadow mode, would have denied GET /api/v1/trending (api): retry after 50200 ms']], $this->logger->records);
        // Shadow mode spends what a real request spends: the server counted one, not two.
        self::assertSame('1', Servers::client(Servers::get()->standalone())->get("rl:{{$id}}:shadow:1718609340"));
    }

    /** @param list<Limit> $limits */
    private function middleware(array $limits, ?\Closure $identify = null, ?\RedisRl\RateLimiter $limiter = null): RateLimitMiddleware
    {
        return new RateLimitMiddleware(
            $limiter ?? $this->limiter(clock: $this->clock),
            new Psr17Factory(),
            $limits,
            $identify,
        );
    }

    private static function request(string $ip): ServerRequest
    {
        return new ServerRequest('GET', '/api/v1/trending', [], null, '1.1', ['REMOTE_ADDR' => $ip]);
    }

    /** @return array<string, string> the rate-limit fields of a response */
    private static function fields(ResponseInterface $response): array
    {
        $fields = [];
        foreach (['RateLimit-Policy', 'RateLimit', 'Retry-After', 'X-RateLimit-Limit'] as $name) {
            if ($response->hasHeader($name)) {
                $fields[$name] = $response->getHeaderLine($name);
            }
        }

        return $fields;
    }
}
