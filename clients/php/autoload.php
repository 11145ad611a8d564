<?php

declare(strict_types=1);

// For use without Composer (the tests, a plain `require`): maps RedisRl\ to src/ as
// composer.json's PSR-4 entry does.
spl_autoload_register(static function (string $class): void {
    $prefix = 'RedisRl\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
