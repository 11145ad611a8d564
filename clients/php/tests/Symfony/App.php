<?php

declare(strict_types=1);

namespace RedisRl\Tests\Symfony;

use RedisRl\RateLimiter;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Bundle\SecurityBundle\SecurityBundle;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpKernel\Kernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

use function Symfony\Component\DependencyInjection\Loader\Configurator\service;

/**
 * A Symfony 5.4 application as its docs build one (MicroKernelTrait, FrameworkBundle,
 * SecurityBundle with json_login and login_throttling), with redis-rl's limiters as
 * services. Environment "ours" has no lock and no rate_limiter cache pool at all;
 * "stock" adds Symfony's own fixed_window limiter (which needs both) for the
 * boundary-burst comparison.
 */
final class App extends Kernel
{
    use MicroKernelTrait;

    public function __construct(string $environment, int $redisPort, private readonly string $dir)
    {
        $_SERVER['REDIS_PORT'] = (string) $redisPort;
        parent::__construct($environment, false);
    }

    public function registerBundles(): iterable
    {
        return [new FrameworkBundle(), new SecurityBundle()];
    }

    public function getProjectDir(): string
    {
        return __DIR__;
    }

    public function getCacheDir(): string
    {
        return "{$this->dir}/cache/{$this->environment}";
    }

    public function getLogDir(): string
    {
        return "{$this->dir}/log";
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        // The Lock component is installed (symfony/rate-limiter requires it), so
        // FrameworkBundle would enable it by default: ours runs with it switched off.
        $framework = ['secret' => 'test', 'test' => true, 'http_method_override' => false, 'router' => ['utf8' => true], 'lock' => false, 'rate_limiter' => false];
        if ($this->environment === 'stock') {
            // Symfony's own limiter: state in a cache pool, under a lock.
            $framework['lock'] = 'flock://' . $this->dir . '/locks';
            $framework['rate_limiter'] = ['enabled' => true, 'stock_api' => ['policy' => 'fixed_window', 'limit' => 8, 'interval' => '10 seconds']];
        }
        $container->extension('framework', $framework);

        // redis-rl's limiters, wired as the README tells an application to; the test
        // adds only its stepped clock (the app would leave the server's clock).
        $container->import(__DIR__ . '/redis_rl.yaml');
        $services = $container->services()->defaults()->autowire()->autoconfigure();
        $services->get(RateLimiter::class)->arg(3, service(Clock::class));
        // Metrics: the registry every decision is counted in, and the route that serves it.
        $services->set(\RedisRl\Metrics\Registry::class)->public();
        $services->get(RateLimiter::class)->arg('$metrics', service(\RedisRl\Metrics\Registry::class));
        $services->set(\RedisRl\Symfony\MetricsController::class)->tag('controller.service_arguments');
        // Pseudonyms on the scripts backend (a server without the module) need the secret.
        $services->get(RateLimiter::class)->arg('$secret', \RedisRl\Tests\Support\Servers::SECRET);
        $services->set(Clock::class)->public();
        $services->set(ApiController::class)->tag('controller.service_arguments');
        if ($this->environment === 'stock') {
            $services->set(StockController::class)->tag('controller.service_arguments');
        }
        $services->set(Logger::class)->public();
        $services->alias('logger', Logger::class)->public();

        $container->extension('security', [
            'enable_authenticator_manager' => true,
            'password_hashers' => ['Symfony\Component\Security\Core\User\InMemoryUser' => 'plaintext'],
            'providers' => ['users' => ['memory' => ['users' => ['alice' => ['password' => 'secret', 'roles' => ['ROLE_USER']]]]]],
            'firewalls' => ['main' => [
                'stateless' => true,
                'provider' => 'users',
                'json_login' => ['check_path' => '/login'],
                'login_throttling' => ['limiter' => 'app.login_limiter'],
            ]],
        ]);
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $routes->add('trending', '/api/trending')->controller([ApiController::class, 'trending']);
        $routes->add('metrics', '/metrics')->controller(\RedisRl\Symfony\MetricsController::class);
        $routes->add('login', '/login')->methods(['POST'])->controller([ApiController::class, 'login']);
        if ($this->environment === 'stock') {
            $routes->add('stock', '/api/stock')->controller([StockController::class, 'trending']);
        }
    }
}
