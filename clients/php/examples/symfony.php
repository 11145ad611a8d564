<?php

declare(strict_types=1);

// php -S 127.0.0.1:8080 examples/symfony.php   then   curl -i http://127.0.0.1:8080/api/trending
// A Symfony 5.4 app (Debian: php-symfony-framework-bundle php-symfony-rate-limiter) whose
// limiter is redis-rl's: no lock, no cache pool. A module-enabled Redis on REDIS_PORT.

require __DIR__ . '/bootstrap.php';
foreach (['Bundle/FrameworkBundle', 'Component/RateLimiter'] as $package) {
    @include_once "/usr/share/php/Symfony/{$package}/autoload.php";   // Composer: vendor/autoload.php
}

use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\RateLimiter;
use RedisRl\Symfony\RateLimiterFactory;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpFoundation\{JsonResponse, Request};
use Symfony\Component\HttpKernel\Exception\TooManyRequestsHttpException;
use Symfony\Component\HttpKernel\Kernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;
use function Symfony\Component\DependencyInjection\Loader\Configurator\{inline_service, service};

final class App extends Kernel
{
    use MicroKernelTrait;

    public function registerBundles(): iterable { return [new FrameworkBundle()]; }
    // The compiled container is cached (prod, no debug): a new one whenever this file changes.
    public function getCacheDir(): string { return sys_get_temp_dir() . '/redis-rl-symfony-example-' . md5_file(__FILE__); }

    protected function configureContainer(ContainerConfigurator $c): void
    {
        $c->extension('framework', ['secret' => 'change-me', 'lock' => false, 'rate_limiter' => false]);
        $c->parameters()->set('env(REDIS_PORT)', '6379');   // the default when REDIS_PORT is not set
        $services = $c->services();
        $services->set(RateLimiter::class)->args([
            inline_service(RedisConnection::class)->args(['127.0.0.1', '%env(int:REDIS_PORT)%']),   // read per request, not compiled in
            inline_service(FailurePolicy::class)->factory([FailurePolicy::class, 'named'])->args(['open']),
        ]);
        // Was framework.rate_limiter.anonymous_api: the same options.
        $services->set('limiter.anonymous_api', RateLimiterFactory::class)->args([
            ['id' => 'anonymous_api', 'policy' => 'sliding_window', 'limit' => 3, 'interval' => '1 minute'],
            service(RateLimiter::class),
        ]);
        $services->alias(RateLimiterFactory::class . ' $anonymousApiLimiter', 'limiter.anonymous_api');
        $services->set(TrendingController::class, TrendingController::class)->autowire()->tag('controller.service_arguments');
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $routes->add('trending', '/api/trending')->controller(TrendingController::class);
    }
}

final class TrendingController   // the controller of Symfony's docs, unchanged but for the `use` line
{
    public function __invoke(Request $request, RateLimiterFactory $anonymousApiLimiter): JsonResponse
    {
        $limit = $anonymousApiLimiter->create($request->getClientIp())->consume(1);
        $headers = ['X-RateLimit-Remaining' => $limit->getRemainingTokens(), 'X-RateLimit-Limit' => $limit->getLimit()];
        if (false === $limit->isAccepted()) {
            throw new TooManyRequestsHttpException($limit->getRetryAfter()->getTimestamp() - time(), '', null, 0, $headers);
        }

        return new JsonResponse(['videos' => []], 200, $headers);
    }
}

$kernel = new App('prod', false);
$request = Request::createFromGlobals();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
