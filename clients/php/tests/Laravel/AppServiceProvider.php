<?php

declare(strict_types=1);

namespace RedisRl\Tests\Laravel;

use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\RateLimiter;
use Illuminate\Support\Facades\Route;
use Illuminate\Support\ServiceProvider;

/** What RouteServiceProvider does in a Laravel 8 app: named limiters and the routes file. */
final class AppServiceProvider extends ServiceProvider
{
    public function boot(): void
    {
        RateLimiter::for('uploads', static fn (Request $request) => [
            Limit::perHour(5)->by('hour:' . $request->ip()),
            Limit::perMinute(2)->by('minute:' . $request->ip()),
        ]);
        RateLimiter::for('burst', static fn (Request $request) => Limit::perMinute(8)->by($request->ip()));
        RateLimiter::for('custom', static fn (Request $request) => Limit::perMinute(1)->by($request->ip())
            ->response(static fn (Request $request, array $headers) => new \Illuminate\Http\Response('slow down', 429, $headers)));

        Route::middleware('api')->group(__DIR__ . '/routes.php');
    }
}
