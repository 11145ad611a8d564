<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use PHPUnit\Framework\TestCase;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use RedisRl\FailurePolicy;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\RecordingLogger;
use RedisRl\Tests\Support\ScriptedConnection;

/**
 * What the kit sends for RL.CONCURRENCY and RL.THROTTLE (SPEC.md), and the middleware's
 * lease handling, without a server: the module commands are being built on another
 * branch. The wire format is checked word for word; replies are scripted.
 */
final class ConcurrencyCallsTest extends TestCase
{
    private const NOW = 1_718_609_349_800_000;

    public function testTypedCallsSendTheSpecsWords(): void
    {
        $redis = new ScriptedConnection([[1, 4, 0, 30000], [1, 5, 0, 0], [0, 0, 1200, 30000], [1, 16, 0, 2, 10], [1, 9, 0, 1000, [[1, 9, 0, 1000], [1, 4, 0, 30000]]]]);
        $rl = new RateLimiter($redis, FailurePolicy::Open, new RecordingLogger(), new ManualClock(self::NOW));
        $slots = Limit::concurrency('inflight', 'rl:{u}:c', 5, 30);

        $acquired = $rl->acquire('req-1', $slots);
        $rl->release('req-1', $slots);
        $lost = $rl->heartbeat('req-1', $slots);
        $cell = $rl->throttle('user123', 15, 30, 60, 1);
        $rl->acquire('req-2', Limit::gcra('s', 'rl:{u}:s', 10, 1), $slots);

        $now = (string) self::NOW;
        self::assertSame([
            ['RL.CONCURRENCY', 'rl:{u}:c', '5', '30s', 'ACQUIRE', 'req-1', 'NOW', $now],
            ['RL.CONCURRENCY', 'rl:{u}:c', '5', '30s', 'RELEASE', 'req-1', 'NOW', $now],
            ['RL.CONCURRENCY', 'rl:{u}:c', '5', '30s', 'HEARTBEAT', 'req-1', 'NOW', $now],
            ['RL.THROTTLE', 'user123', '15', '30', '60', '1', 'NOW', $now],
            ['RL.ALL', '2', 'GCRA', 'rl:{u}:s', '10', '1s', 'CONCURRENCY', 'rl:{u}:c', '5', '30s', 'NOW', $now, 'LEASE', 'req-2'],
        ], $redis->sent);
        self::assertTrue($acquired->allowed);
        self::assertSame(4, $acquired->remaining);
        self::assertFalse($lost->allowed);
        self::assertSame([false, 16, 0, 2, 10], [$cell->allowed, $cell->limit, $cell->remaining, $cell->retryAfterSeconds, $cell->resetAfterSeconds]);
    }

    public function testAConcurrencyLimitHasNoRateFieldsButItsDenialARetryAfter(): void
    {
        $rl = new RateLimiter(new ScriptedConnection([[0, 0, 1200, 30000]]), FailurePolicy::Open, new RecordingLogger());

        $full = $rl->acquire('r', Limit::concurrency('inflight', 'rl:{u}:c', 5, 30));

        self::assertSame(['Retry-After' => '2'], Headers::for($full));
    }

    public function testTheMiddlewareReleasesTheLeaseAfterTheResponseAndWhenTheHandlerThrows(): void
    {
        $redis = new ScriptedConnection([[1, 4, 0, 30000], [1, 5, 0, 0], [1, 4, 0, 30000], [1, 5, 0, 0], [0, 0, 1500, 30000]]);
        $rl = new RateLimiter($redis, FailurePolicy::Open, new RecordingLogger());
        $middleware = new RateLimitMiddleware($rl, new Psr17Factory(), [], static fn () => 'u', concurrency: Limit::concurrency('inflight', 'rl:{id}:c', 5, 30));
        $ok = new class () implements RequestHandlerInterface {
            public function handle(ServerRequestInterface $request): ResponseInterface
            {
                return (new Psr17Factory())->createResponse(200);
            }
        };
        $throws = new class () implements RequestHandlerInterface {
            public function handle(ServerRequestInterface $request): ResponseInterface
            {
                throw new \RuntimeException('handler failed');
            }
        };
        $request = new ServerRequest('GET', '/x');

        self::assertSame(200, $middleware->process($request, $ok)->getStatusCode());
        try {
            $middleware->process($request, $throws);
            self::fail('the handler\'s exception must come through');
        } catch (\RuntimeException $e) {
            self::assertSame('handler failed', $e->getMessage());
        }
        $full = $middleware->process($request, $ok);

        self::assertSame(429, $full->getStatusCode());
        self::assertSame('2', $full->getHeaderLine('Retry-After'));
        $words = array_map(static fn (array $c) => $c[4] . ' ' . ($c[5] ?? ''), $redis->sent);
        [$first, $second, $third] = [substr($words[0], 8), substr($words[2], 8), substr($words[4], 8)];
        self::assertSame(["ACQUIRE {$first}", "RELEASE {$first}", "ACQUIRE {$second}", "RELEASE {$second}", "ACQUIRE {$third}"], $words, 'released after the response and after the throw; nothing to release when full');
        self::assertCount(3, array_unique([$first, $second, $third]), 'a fresh request id per request');
        self::assertSame(24, strlen($first));
    }
}
