<?php

declare(strict_types=1);

// php -S 127.0.0.1:8080 examples/laravel/index.php   then   curl -i http://127.0.0.1:8080/api/videos
// Laravel 8 (Debian: php-laravel-framework) with `throttle` on redis-rl; a module-enabled
// Redis on REDIS_PORT. A real app keeps its Kernel, RouteServiceProvider and routes as
// they are: config/app.php gains the provider, config/redis-rl.php says where Redis is.

require __DIR__ . '/../bootstrap.php';
require_once '/usr/share/php/Illuminate/autoload.php';   // Composer: vendor/autoload.php

use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\RateLimiter;
use Illuminate\Support\Facades\Route;

final class HttpKernel extends Illuminate\Foundation\Http\Kernel   // app/Http/Kernel.php, unchanged
{
    protected $middlewareGroups = ['api' => [Illuminate\Routing\Middleware\SubstituteBindings::class]];
    protected $routeMiddleware = ['throttle' => Illuminate\Routing\Middleware\ThrottleRequests::class];
}

$_ENV['APP_SERVICES_CACHE'] = sys_get_temp_dir() . '/redis-rl-laravel-example-services.php';
$_ENV['APP_PACKAGES_CACHE'] = sys_get_temp_dir() . '/redis-rl-laravel-example-packages.php';
$app = new Illuminate\Foundation\Application(__DIR__);
$app->useStoragePath(sys_get_temp_dir());
$app->singleton(Illuminate\Contracts\Http\Kernel::class, HttpKernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, Illuminate\Foundation\Exceptions\Handler::class);
$kernel = $app->make(Illuminate\Contracts\Http\Kernel::class);
$kernel->bootstrap();

// RouteServiceProvider::configureRateLimiting() and routes/api.php, as ever:
RateLimiter::for('videos', static fn (Request $request) => [
    Limit::perMinute(3)->by($request->ip()),        // 3 a minute
    Limit::perHour(100)->by($request->ip()),        // and 100 an hour: one RL.ALL
]);
Route::middleware(['api', 'throttle:videos'])->get('/api/videos', static fn () => ['videos' => []]);
Route::middleware(['api', 'throttle:60,1'])->get('/api/ping', static fn () => ['pong' => true]);

$request = Illuminate\Http\Request::capture();
$request->headers->set('Accept', 'application/json');
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
