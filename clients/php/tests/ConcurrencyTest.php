<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\Response;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use RedisRl\Limit;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/**
 * RL.CONCURRENCY and RL.THROTTLE through the kit, on the module (they come from branch
 * issue-16: skipped, saying so, on a module without them).
 */
final class ConcurrencyTest extends KitTestCase
{
    private ManualClock $clock;

    protected function setUp(): void
    {
        parent::setUp();
        $this->clock = new ManualClock(self::T0);
    }

    public function testLeasesAreIdempotentReleasedAndKeptAliveByHeartbeat(): void
    {
        self::requireFeature('RL.CONCURRENCY');
        $rl = $this->limiter(clock: $this->clock);
        $slots = Limit::concurrency('inflight', self::key('c'), 2, 30);

        self::assertSame([true, 1], [$rl->acquire('a', $slots)->allowed, $rl->acquire('a', $slots)->remaining], 'a retried acquire takes no second slot');
        self::assertTrue($rl->acquire('b', $slots)->allowed);
        $full = $rl->acquire('c', $slots);
        self::assertFalse($full->allowed);
        self::assertSame(30_000, $full->retryAfterMs, 'until the earliest lease expires');

        $rl->release('a', $slots);
        self::assertTrue($rl->acquire('c', $slots)->allowed, 'a released slot is free at once');

        $this->clock->advance(20_000_000);
        self::assertTrue($rl->heartbeat('b', $slots)->allowed);
        $this->clock->advance(20_000_000);
        // c expired at T0 + 30 s; b lives until T0 + 50 s.
        self::assertFalse($rl->heartbeat('c', $slots)->allowed, 'an expired lease cannot be kept alive');
        $d = $rl->acquire('d', $slots);
        self::assertSame([true, 0], [$d->allowed, $d->remaining]);
    }

    public function testAHandlerThatThrowsOrOutlivesItsTtlLeaksNoSlot(): void
    {
        self::requireFeature('RL.CONCURRENCY');
        $rl = $this->limiter(clock: $this->clock);
        $id = 'caller-' . random_int(0, PHP_INT_MAX);
        $middleware = new RateLimitMiddleware($rl, new Psr17Factory(), [], static fn () => $id, concurrency: Limit::concurrency('inflight', 'rl:{id}:inflight', 1, 5));
        $request = new ServerRequest('GET', '/generate');
        $ok = new Response(200);
        $handler = static fn (\Closure $body) => new class ($body) implements RequestHandlerInterface {
            public function __construct(private readonly \Closure $body)
            {
            }

            public function handle(ServerRequestInterface $request): ResponseInterface
            {
                return ($this->body)();
            }
        };

        // Throws: the lease is given back on the way out.
        try {
            $middleware->process($request, $handler(static fn () => throw new \RuntimeException('boom')));
            self::fail('the exception must come through');
        } catch (\RuntimeException) {
        }
        // Full while one runs; a handler that outlives its ttl loses the slot to the next.
        $inner = [];
        $outer = $middleware->process($request, $handler(function () use ($middleware, $request, $handler, $ok, &$inner) {
            $inner[] = $middleware->process($request, $handler(static fn () => $ok))->getStatusCode();
            $this->clock->advance(6_000_000);
            $inner[] = $middleware->process($request, $handler(static fn () => $ok))->getStatusCode();

            return $ok;
        }));

        self::assertSame(200, $outer->getStatusCode());
        self::assertSame([429, 200], $inner);
        self::assertSame(200, $middleware->process($request, $handler(static fn () => $ok))->getStatusCode(), 'nothing left held');
        self::assertSame([], $this->logger->records, 'releasing an expired lease is no error');
    }

    public function testOneCallForTheRateLimitsAndTheLease(): void
    {
        self::requireFeature('RL.CONCURRENCY');
        $rl = $this->limiter(clock: $this->clock);
        $id = 'caller-' . random_int(0, PHP_INT_MAX);
        $middleware = new RateLimitMiddleware($rl, new Psr17Factory(), [Limit::fixed('minute', 'rl:{id}:minute', 10, 60)], static fn () => $id, concurrency: Limit::concurrency('inflight', 'rl:{id}:inflight', 1, 30));
        $request = new ServerRequest('GET', '/generate');
        // A handler that, while it holds the lease, sends the same caller's next request.
        $handler = new class ($middleware, $request) implements RequestHandlerInterface {
            public ?ResponseInterface $inner = null;

            public function __construct(private readonly RateLimitMiddleware $middleware, private readonly ServerRequest $request)
            {
            }

            public function handle(ServerRequestInterface $request): ResponseInterface
            {
                $this->inner ??= $this->middleware->process($this->request, $this);

                return new Response(200);
            }
        };

        $outer = $middleware->process($request, $handler);

        self::assertSame([200, 429], [$outer->getStatusCode(), $handler->inner?->getStatusCode()]);
        self::assertSame('"minute";q=10;w=60', $handler->inner->getHeaderLine('RateLimit-Policy'), 'the concurrency limit is not a rate field');
        self::assertSame('30', $handler->inner->getHeaderLine('Retry-After'), 'until the lease held expires');
        // The refused request spent no rate budget: one RL.ALL, all or nothing.
        self::assertSame('1', Servers::client(Servers::get()->standalone())->get("rl:{{$id}}:minute:1718609340"));
    }

    public function testThrottleIsRedisCellsReply(): void
    {
        self::requireFeature('RL.THROTTLE');
        $rl = $this->limiter(clock: $this->clock);
        $key = self::key('cell');

        $calls = array_map(static fn () => $rl->throttle($key, 1, 1, 60), range(1, 3));

        self::assertSame([true, true, false], array_map(static fn ($d) => $d->allowed, $calls));
        self::assertSame([2, 2, 2], array_map(static fn ($d) => $d->limit, $calls));
        self::assertSame([1, 0, 0], array_map(static fn ($d) => $d->remaining, $calls));
        self::assertNull($calls[0]->retryAfterSeconds);
        self::assertGreaterThan(0, $calls[2]->retryAfterSeconds);
    }
}
