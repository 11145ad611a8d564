<?php

declare(strict_types=1);

// php -S 127.0.0.1:8080 examples/app.php   then   curl -i http://127.0.0.1:8080/api/v1/trending
// (a module-enabled Redis on REDIS_PORT, default 6379, started with RL_SECRET set)

require __DIR__ . '/bootstrap.php';

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\Response;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Middleware\RateLimitMiddleware;
use RedisRl\RateLimiter;

$limiter = new RateLimiter(
    new RedisConnection('127.0.0.1', (int) (getenv('REDIS_PORT') ?: 6379)),
    FailurePolicy::Open,                        // an edge tier still stands in front
    static fn (string $level, string $message, array $context) => error_log("rate limiter {$level}: {$context['error']}"),
    denyCache: new DenyCache(),
    // Without the module (any managed Redis), the kit hashes client IPs itself, with the
    // module's secret: the same pseudonyms, so the same keys, when the module comes.
    secret: getenv('RL_SECRET') ?: null,
);

$middleware = new RateLimitMiddleware($limiter, new Psr17Factory(), [
    // "{id}" becomes "{<pseudonym of the client IP>}": one hash tag per caller.
    Limit::slideCount('trending', 'rl:{id}:trending', 100, 60),
    Limit::gcra('burst', 'rl:{id}:burst', 3, 1),
]);

$app = new class () implements RequestHandlerInterface {
    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        return new Response(200, ['Content-Type' => 'application/json'], '{"videos":[]}');
    }
};

$request = new ServerRequest($_SERVER['REQUEST_METHOD'], $_SERVER['REQUEST_URI'], getallheaders(), null, '1.1', $_SERVER);
$response = $middleware->process($request, $app);

http_response_code($response->getStatusCode());
foreach ($response->getHeaders() as $name => $values) {
    header($name . ': ' . implode(', ', $values));
}
echo $response->getBody();
