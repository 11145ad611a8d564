<?php

declare(strict_types=1);

namespace RedisRl\Laravel;

use Illuminate\Routing\Middleware\ThrottleRequests as LaravelThrottleRequests;
use Illuminate\Routing\Middleware\ThrottleRequestsWithRedis;
use Illuminate\Support\ServiceProvider;
use RedisRl\Backend;
use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\Metrics\Registry;
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
 *   'backend' => 'auto' | 'module' | 'scripts' (default auto: any Redis)
 *   'secret' => the module's RL_SECRET (pseudonyms on the scripts backend; default env RL_SECRET)
 *   'metrics' => false | '/metrics' (a route serving the Prometheus text; default false)
 */
final class RedisRlServiceProvider extends ServiceProvider
{
    /** Every key config/redis-rl.php may hold; any other is refused by name. */
    public const OPTIONS = ['host', 'port', 'cluster', 'password', 'failure', 'algorithm', 'prefix', 'shadow', 'deny_cache', 'clock', 'timeout', 'backend', 'secret', 'metrics'];

    public function register(): void
    {
        // Checked when the application boots, not at the first request: a typo in the
        // config fails the deploy, not every throttled route.
        $unknown = array_diff(array_keys((array) $this->app->make('config')->get('redis-rl', [])), self::OPTIONS);
        if ($unknown !== []) {
            throw new \InvalidArgumentException('config/redis-rl.php: unknown option ' . implode(', ', array_map(static fn ($k) => "'{$k}'", $unknown)) . '; the options are ' . implode(', ', self::OPTIONS));
        }
        if (!in_array($this->config('clock'), [null, 'carbon'], true)) {
            throw new \InvalidArgumentException("config/redis-rl.php: clock must be null (the server's) or 'carbon', got " . json_encode($this->config('clock')));
        }
        $failure = FailurePolicy::named((string) $this->config('failure', 'open'));
        $settings = new Settings(
            (string) $this->config('algorithm', 'sliding_counter'),
            (string) $this->config('prefix', 'laravel_rl:'),
            (bool) $this->config('shadow', false),
        );
        $this->app->instance(Settings::class, $settings);
        $backend = Backend::named((string) $this->config('backend', 'auto'));
        $metrics = $this->config('metrics', false);
        if ($metrics !== false && (!is_string($metrics) || !str_starts_with($metrics, '/'))) {
            throw new \InvalidArgumentException('config/redis-rl.php: metrics must be false or a route path such as \'/metrics\', got ' . json_encode($metrics));
        }
        if ($metrics !== false) {
            $this->app->singleton(Registry::class, static fn () => new Registry());
        }
        $this->app->singleton(RateLimiter::class, function () use ($failure, $backend, $metrics) {
            $timeout = (float) $this->config('timeout', 0.2);
            $cluster = $this->config('cluster');
            $connection = $cluster !== null
                ? new ClusterConnection($cluster, $timeout, $timeout, $this->config('password'))
                : new RedisConnection($this->config('host', '127.0.0.1'), (int) $this->config('port', 6379), $timeout, $timeout, $this->config('password'));

            return new RateLimiter(
                $connection,
                $failure,
                $this->app->make('log'),
                $this->config('clock') === 'carbon' ? new CarbonClock() : null,
                $this->config('deny_cache', false) ? new DenyCache() : null,
                backend: $backend,
                secret: $this->config('secret', getenv('RL_SECRET') ?: null),
                metrics: $metrics !== false ? $this->app->make(Registry::class) : null,
            );
        });
        $this->app->bind(LaravelThrottleRequests::class, ThrottleRequests::class);
        $this->app->bind(ThrottleRequestsWithRedis::class, ThrottleRequests::class);
    }

    /** The metrics route, when config/redis-rl.php names one. */
    public function boot(): void
    {
        $path = $this->config('metrics', false);
        if (is_string($path)) {
            $this->app->make('router')->get($path, fn () => new \Illuminate\Http\Response($this->app->make(Registry::class)->render(), 200, ['Content-Type' => Registry::CONTENT_TYPE]));
        }
    }

    private function config(string $key, mixed $default = null): mixed
    {
        return $this->app->make('config')->get("redis-rl.{$key}", $default);
    }
}
