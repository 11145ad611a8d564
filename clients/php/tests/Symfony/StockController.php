<?php

declare(strict_types=1);

namespace RedisRl\Tests\Symfony;

use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\RateLimiter\RateLimiterFactory;

/** The same controller on Symfony's own limiter (framework.rate_limiter.stock_api). */
final class StockController
{
    public function trending(Request $request, RateLimiterFactory $stockApiLimiter): JsonResponse
    {
        $limit = $stockApiLimiter->create($request->getClientIp())->consume(1);

        return new JsonResponse(['trending' => []], $limit->isAccepted() ? 200 : 429, [
            'X-RateLimit-Remaining' => $limit->getRemainingTokens(),
        ]);
    }
}
