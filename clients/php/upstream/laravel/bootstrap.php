<?php

declare(strict_types=1);

// Laravel's ThrottleRequests{,WithRedis}Test.php, unmodified, on a minimal Testbench
// (testbench/), Laravel from Debian, and one module-enabled server started by the kit's
// test support: its port is REDIS_PORT for Laravel's Redis, InteractsWithRedis and the kit.
$kit = dirname(__DIR__, 2);
require $kit . '/tests/bootstrap.php';
require_once '/usr/share/php/Illuminate/autoload.php';
if (is_file('/usr/share/php/Predis/autoload.php')) {
    require_once '/usr/share/php/Predis/autoload.php';
}
require __DIR__ . '/testbench/TestCase.php';

$port = (string) RedisRl\Tests\Support\Servers::get()->standalone();
putenv("REDIS_PORT={$port}");
putenv('REDIS_HOST=127.0.0.1');
$_ENV['REDIS_PORT'] = $_SERVER['REDIS_PORT'] = $port;
$_ENV['REDIS_HOST'] = $_SERVER['REDIS_HOST'] = '127.0.0.1';
