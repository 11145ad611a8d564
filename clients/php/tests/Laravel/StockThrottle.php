<?php

declare(strict_types=1);

namespace RedisRl\Tests\Laravel;

use Illuminate\Routing\Middleware\ThrottleRequestsWithRedis;

/** Laravel's ThrottleRequestsWithRedis, unchanged. */
final class StockThrottle extends ThrottleRequestsWithRedis
{
}
