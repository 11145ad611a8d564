<?php

return [
    'name' => 'redis-rl example', 'env' => 'production', 'debug' => false, 'timezone' => 'UTC',
    'key' => 'base64:' . base64_encode(str_repeat('x', 32)), 'cipher' => 'AES-256-CBC',
    'providers' => [
        Illuminate\Cache\CacheServiceProvider::class,      // RateLimiter::for(...) lives there
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        RedisRl\Laravel\RedisRlServiceProvider::class,      // <- the one line that switches `throttle`
    ],
];
