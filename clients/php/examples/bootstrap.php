<?php

declare(strict_types=1);

// With Composer, vendor/autoload.php is all there is to it. Without (this repository,
// Debian's PHP packages), the kit's own autoloader, Debian's PSR packages and the
// PSR-15 shim that the tests use.
if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    require __DIR__ . '/../autoload.php';
    foreach (['Psr/Log', 'Psr/Http/Message', 'Nyholm/Psr7'] as $package) {
        @include_once "/usr/share/php/{$package}/autoload.php";
    }
    @include_once '/usr/share/php/Psr/Http/Message/factory-autoload.php';
    require_once __DIR__ . '/../tests/shims/psr15.php';
}
