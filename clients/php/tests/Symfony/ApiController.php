<?php

declare(strict_types=1);

namespace RedisRl\Tests\Symfony;

use RedisRl\Symfony\RateLimiterFactory;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpKernel\Exception\TooManyRequestsHttpException;

/** The controller of Symfony's rate-limiter docs, word for word but for the `use` line. */
final class ApiController
{
    public function trending(Request $request, RateLimiterFactory $anonymousApiLimiter): JsonResponse
    {
        $limiter = $anonymousApiLimiter->create($request->getClientIp());
        $limit = $limiter->consume(1);
        $headers = [
            'X-RateLimit-Remaining' => $limit->getRemainingTokens(),
            'X-RateLimit-Retry-After' => $limit->getRetryAfter()->getTimestamp(),
            'X-RateLimit-Limit' => $limit->getLimit(),
        ];
        if (false === $limit->isAccepted()) {
            throw new TooManyRequestsHttpException($limit->getRetryAfter()->getTimestamp() - time(), '', null, 0, $headers);
        }

        return new JsonResponse(['trending' => []], 200, $headers);
    }

    public function login(): JsonResponse
    {
        // Reached once json_login has authenticated the request.
        return new JsonResponse(['logged_in' => true]);
    }
}
