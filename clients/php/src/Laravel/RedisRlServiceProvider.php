<?php

declare(strict_types=1);

namespace RedisRl\Laravel;

use Illuminate\Routing\Middleware\ThrottleRequests as LaravelThrottleRequests;
use Illuminate\Routing\Middleware\ThrottleRequestsWithRedis;
use Illuminate\Support\ServiceProvider;
use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\RateLimiter;

/**
 * Puts the `throttle` middleware on the module: ThrottleRequests and
 * ThrottleRequestsWithRedis resolve to RedisRl\Laravel\ThrottleRequests, so the kernel's
 * `'throttle' => ...` line and every route stay as they are.
 *
 * config/redis-rl.php (every key optional):
 *   'host' => '127.0.0.1', 'port' => 6379,   or 'cluster' => ['10.0.0.1:6379', ...]
 *   'failure' => 'open' | 'closed'           (default open)
 *   'algorithm' => 'sliding_counter' | 'sliding_log' | 'fixed' | 'gcra'
 *   'prefix' => 'laravel_rl:', 'shadow' => false, 'deny_cache' => false,
 *   'clock' => null (the server's) | 'carbon', 'timeout' => 0.2
 */
final class RedisRlServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->app->singleton(Settings::class, fn () => new Settings(
            $this->config('algorithm', 'sliding_counter'),
            $this->config('prefix', 'laravel_rl:'),
            (bool) $this->config('shadow', false),
        ));
        $this->app->singleton(RateLimiter::class, function () {
            $timeout = (float) $this->config('timeout', 0.2);
            $cluster = $this->config('cluster');
            $connection = $cluster !== null
                ? new ClusterConnection($cluster, $timeout, $timeout, $this->config('password'))
                : new RedisConnection($this->config('host', '127.0.0.1'), (int) $this->config('port', 6379), $timeout, $timeout, $this->config('password'));

            return new RateLimiter(
                $connection,
                FailurePolicy::named($this->config('failure', 'open')),
                $this->app->make('log'),
                $this->config('clock') === 'carbon' ? new CarbonClock() : null,
                $this->config('deny_cache', false) ? new DenyCache() : null,
            );
        });
        $this->app->bind(LaravelThrottleRequests::class, ThrottleRequests::class);
        $this->app->bind(ThrottleRequestsWithRedis::class, ThrottleRequests::class);
    }

    private function config(string $key, mixed $default = null): mixed
    {
        return $this->app->make('config')->get("redis-rl.{$key}", $default);
    }
}
