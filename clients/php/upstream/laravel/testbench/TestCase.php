<?php

declare(strict_types=1);

namespace Orchestra\Testbench;

use Illuminate\Contracts\Console\Kernel as ConsoleKernel;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Foundation\Application;
use Illuminate\Foundation\Bootstrap\LoadConfiguration;

/**
 * The part of Orchestra Testbench 6 that Laravel's own integration tests use (Testbench
 * is not in Debian): a bare application on testbench/ (its config/ reads the run's mode
 * from the environment), getEnvironmentSetUp($app) called once the configuration is
 * loaded and before the providers boot, as Testbench does.
 */
abstract class TestCase extends \Illuminate\Foundation\Testing\TestCase
{
    public function createApplication()
    {
        $app = new Application(__DIR__);
        $storage = sys_get_temp_dir() . '/redis-rl-testbench-' . getmypid();
        @mkdir($storage . '/framework', 0700, true);
        $app->useStoragePath($storage);
        foreach (['APP_SERVICES_CACHE' => 'services.php', 'APP_PACKAGES_CACHE' => 'packages.php', 'APP_CONFIG_CACHE' => 'config.php', 'APP_ROUTES_CACHE' => 'routes.php', 'APP_EVENTS_CACHE' => 'events.php'] as $name => $file) {
            $_ENV[$name] = $_SERVER[$name] = "{$storage}/{$file}";
        }
        $app->singleton(HttpKernel::class, \Illuminate\Foundation\Http\Kernel::class);
        $app->singleton(ConsoleKernel::class, \Illuminate\Foundation\Console\Kernel::class);
        $app->singleton(ExceptionHandler::class, \Illuminate\Foundation\Exceptions\Handler::class);
        $app->afterBootstrapping(LoadConfiguration::class, fn (Application $app) => $this->getEnvironmentSetUp($app));
        $app->make(ConsoleKernel::class)->bootstrap();

        return $app;
    }

    /** @param Application $app */
    protected function getEnvironmentSetUp($app)
    {
    }
}
