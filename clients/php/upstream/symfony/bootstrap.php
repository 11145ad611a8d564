<?php

declare(strict_types=1);

// Symfony RateLimiter's own Tests/, unmodified, against redis-rl's Symfony adapter.
// RL_UPSTREAM_SRC is the untarred symfony/rate-limiter tree. With RL_UPSTREAM_MODE=stock
// nothing is swapped (the control: the library on its in-memory storage). Otherwise the
// library's limiter classes (the three policies, CompoundLimiter, RateLimiterFactory)
// are declared first by shim/, each a thin wrapper that builds the limiter with
// RedisRl\Symfony\RateLimiterFactory on a real module-enabled server and ignores the
// storage the test hands it. Everything else (Rate, Window, RateLimit, Reservation,
// the storages) is the library's own.
$src = getenv('RL_UPSTREAM_SRC') ?: throw new RuntimeException('RL_UPSTREAM_SRC is not set');
$kit = dirname(__DIR__, 2);

spl_autoload_register(static function (string $class) use ($src): void {
    foreach (['Symfony\\Component\\RateLimiter\\Tests\\' => "{$src}/Tests/", 'Symfony\\Component\\RateLimiter\\' => "{$src}/"] as $prefix => $dir) {
        if (str_starts_with($class, $prefix)) {
            $file = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }

            return;
        }
    }
}, true, true);
foreach (['Component/Lock', 'Component/OptionsResolver', 'Component/Cache', 'Bridge/PhpUnit'] as $package) {
    require_once "/usr/share/php/Symfony/{$package}/autoload.php";
}

if (getenv('RL_UPSTREAM_MODE') !== 'stock') {
    require $kit . '/tests/bootstrap.php';
    foreach (['Shim', 'FixedWindowLimiter', 'SlidingWindowLimiter', 'TokenBucketLimiter', 'CompoundLimiter', 'RateLimiterFactory'] as $file) {
        require __DIR__ . "/shim/{$file}.php";
    }
}
