<?php

declare(strict_types=1);

// php -S 127.0.0.1:8080 examples/metrics.php   then   curl http://127.0.0.1:8080/metrics
// Any Redis on REDIS_PORT (default 6379): with the module or without it.

require __DIR__ . '/bootstrap.php';

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\Response;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Metrics\MetricsHandler;
use RedisRl\Metrics\Registry;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\RateLimiter;

// In APCu, so every request of every PHP worker adds to the same counters.
$metrics = new Registry(apcuPrefix: 'redis-rl:');

$limiter = new RateLimiter(
    new RedisConnection('127.0.0.1', (int) (getenv('REDIS_PORT') ?: 6379)),
    FailurePolicy::Open,
    metrics: $metrics,                          // the one line that turns metrics on
);
$middleware = new RateLimitMiddleware($limiter, new Psr17Factory(), [
    Limit::fixed('api', 'rl:{id}:api', 3, 60),
], identify: static fn (ServerRequestInterface $r) => $r->getServerParams()['REMOTE_ADDR'] ?? null);

$app = new class () implements RequestHandlerInterface {
    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        return new Response(200, ['Content-Type' => 'application/json'], '{"ok":true}');
    }
};

$request = new ServerRequest($_SERVER['REQUEST_METHOD'], $_SERVER['REQUEST_URI'], getallheaders(), null, '1.1', $_SERVER);
$response = $request->getUri()->getPath() === '/metrics'
    ? (new MetricsHandler($metrics, new Psr17Factory()))->handle($request)   // for Prometheus to scrape
    : $middleware->process($request, $app);

http_response_code($response->getStatusCode());
foreach ($response->getHeaders() as $name => $values) {
    header($name . ': ' . implode(', ', $values));
}
echo $response->getBody();
