<?php

declare(strict_types=1);

namespace RedisRl\Tests\Laravel;

use Illuminate\Foundation\Http\Kernel as HttpKernel;

/** The application's HTTP kernel, as `laravel new` writes it (the parts a JSON API uses). */
final class Kernel extends HttpKernel
{
    protected $middleware = [];

    protected $middlewareGroups = [
        'api' => [\Illuminate\Routing\Middleware\SubstituteBindings::class],
    ];

    protected $routeMiddleware = [
        // Unchanged: the service provider makes this class resolve to redis-rl's.
        'throttle' => \Illuminate\Routing\Middleware\ThrottleRequests::class,
        // Laravel's own Redis limiter, kept for the comparison (a subclass is not rebound).
        'throttle.stock' => StockThrottle::class,
    ];
}
