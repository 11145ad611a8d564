<?php

declare(strict_types=1);

// The kit and its tests load without Composer: the kit through its own autoload.php,
// the PSR interfaces and a PSR-7 implementation from Debian's packages (test.sh
// installs them), PSR-15 from a shim.
require __DIR__ . '/../autoload.php';

foreach ([
    'Psr/Log/autoload.php',
    'Psr/Http/Message/autoload.php',
    'Psr/Http/Message/factory-autoload.php',
    'Nyholm/Psr7/autoload.php',
] as $file) {
    require_once '/usr/share/php/' . $file;
}
require __DIR__ . '/shims/psr15.php';

spl_autoload_register(static function (string $class): void {
    $prefix = 'RedisRl\\Tests\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
