<?php

declare(strict_types=1);

namespace RedisRl\Middleware;

use Closure;
use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;
use RedisRl\Decision;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\RedisFailure;

/**
 * PSR-15: checks every limit for the caller in one call (RL.ALL when there are several),
 * sets the RateLimit headers, and answers 429 with Retry-After when denied. When Redis
 * cannot decide, the limiter's failure policy answers: open passes the request on without
 * rate-limit headers, closed answers 503 with Retry-After (an outage is not the caller's
 * fault, and a 429 would tell them to slow down).
 */
final class RateLimitMiddleware implements MiddlewareInterface
{
    /** @var Closure(ServerRequestInterface): ?string */
    private readonly Closure $identify;

    /**
     * @param non-empty-list<Limit> $limits keys with an `{id}` placeholder, e.g. "rl:{id}:api"
     * @param ?callable(ServerRequestInterface): ?string $identify who is calling; null: the
     *        failure policy answers. Default: RL.PSEUDONYM of the client address.
     */
    public function __construct(
        private readonly RateLimiter $limiter,
        private readonly ResponseFactoryInterface $responses,
        private readonly array $limits,
        ?callable $identify = null,
        private readonly bool $legacyHeaders = false,
    ) {
        $this->identify = Closure::fromCallable($identify ?? new ClientIpPseudonym($limiter));
    }

    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        $identity = ($this->identify)($request);
        $decision = $identity === null
            // Whatever failed (RL.PSEUDONYM) was reported where it failed.
            ? $this->limiter->policyDecision(RedisFailure::unavailable('no identity for this request'))
            : $this->limiter->hit(...array_map(static fn (Limit $l) => $l->forIdentity($identity), $this->limits));

        $response = match (true) {
            $decision->allowed => $handler->handle($request),
            $decision->failure !== null => $this->refusal(503, 'rate_limiter_unavailable'),
            default => $this->refusal(429, 'rate_limited'),
        };

        return $this->withHeaders($response, $decision);
    }

    private function refusal(int $status, string $error): ResponseInterface
    {
        $response = $this->responses->createResponse($status)->withHeader('Content-Type', 'application/json');
        $response->getBody()->write(json_encode(['error' => $error], JSON_THROW_ON_ERROR));

        return $response;
    }

    private function withHeaders(ResponseInterface $response, Decision $decision): ResponseInterface
    {
        foreach (Headers::for($decision, $this->legacyHeaders) as $name => $value) {
            $response = $response->withHeader($name, $value);
        }

        return $response;
    }
}
