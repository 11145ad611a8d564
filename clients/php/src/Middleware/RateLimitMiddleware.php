<?php

declare(strict_types=1);

namespace RedisRl\Middleware;

use Closure;
use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;
use InvalidArgumentException;
use RedisRl\Algorithm;
use RedisRl\Decision;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\Mode;
use RedisRl\RateLimiter;
use RedisRl\RedisFailure;

/**
 * PSR-15: checks every limit for the caller in one call (RL.ALL when there are several),
 * sets the RateLimit headers, and answers 429 with Retry-After when denied. When Redis
 * cannot decide, the limiter's failure policy answers: open passes the request on without
 * rate-limit headers, closed answers 503 with Retry-After (an outage is not the caller's
 * fault, and a 429 would tell them to slow down).
 *
 * Shadow mode lets a denied request through (reported to the limiter's logger and
 * counted, the headers still the real state). The concurrency option holds a lease,
 * named by a request id generated here, while the handler runs: taken with the rate
 * limits in the same RL.ALL, given back after the response, also when the handler
 * throws; a worker that dies leaves a lease that expires after the limit's ttl.
 */
final class RateLimitMiddleware implements MiddlewareInterface
{
    /** @var Closure(ServerRequestInterface): ?string */
    private readonly Closure $identify;

    /**
     * @param list<Limit> $limits keys with an `{id}` placeholder; may be empty with $concurrency
     * @param ?callable(ServerRequestInterface): ?string $identify who is calling; null: the
     *        failure policy answers. Default: RL.PSEUDONYM of the client address.
     */
    public function __construct(
        private readonly RateLimiter $limiter,
        private readonly ResponseFactoryInterface $responses,
        private readonly array $limits,
        ?callable $identify = null,
        private readonly bool $legacyHeaders = false,
        private readonly bool $shadow = false,
        /** A Limit::concurrency(...) with an `{id}` key: at most its limit in flight per caller. */
        private readonly ?Limit $concurrency = null,
    ) {
        $this->identify = Closure::fromCallable($identify ?? new ClientIpPseudonym($limiter));
        if ($limits === [] && $concurrency === null) {
            throw new InvalidArgumentException('at least one limit (or the concurrency option) is needed');
        }
        if ($concurrency !== null && $concurrency->algorithm !== Algorithm::Concurrency) {
            throw new InvalidArgumentException('the concurrency option takes a Limit::concurrency(...)');
        }
        foreach ([...$limits, ...($concurrency === null ? [] : [$concurrency])] as $limit) {
            // Checked here, not per request: each caller's keys are made from the {id}.
            if (!str_contains($limit->key, '{id}')) {
                throw new InvalidArgumentException("limit '{$limit->name}': the key '{$limit->key}' needs an {id} placeholder for the caller");
            }
        }
    }

    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        $identity = ($this->identify)($request);
        $lease = $this->concurrency !== null && $identity !== null ? $this->concurrency->forIdentity($identity) : null;
        $leaseId = bin2hex(random_bytes(12));
        $limits = $identity === null ? [] : array_map(static fn (Limit $l) => $l->forIdentity($identity), $this->limits);
        $decision = match (true) {
            // Whatever failed (RL.PSEUDONYM) was reported where it failed.
            $identity === null => $this->limiter->policyDecision(RedisFailure::unavailable('no identity for this request')),
            $lease !== null => $this->limiter->decide([...$limits, $lease], Mode::Hit, $leaseId, shadow: $this->shadow),
            default => $this->limiter->decide($limits, Mode::Hit, shadow: $this->shadow),
        };

        if (!$this->limiter->admits($decision, $this->shadow, $request->getMethod() . ' ' . $request->getUri()->getPath())) {
            $response = $decision->failure !== null
                ? $this->refusal(503, 'rate_limiter_unavailable')
                : $this->refusal(429, 'rate_limited');

            return $this->withHeaders($response, $decision);
        }
        try {
            $response = $handler->handle($request);
        } finally {
            // Only a lease the server gave is given back (not one shadow mode or an
            // outage let through without one).
            if ($lease !== null && $decision->allowed && $decision->failure === null) {
                $this->limiter->release($leaseId, $lease);
            }
        }

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
