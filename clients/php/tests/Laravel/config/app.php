<?php

return [
    'name' => 'redis-rl test app',
    'env' => 'testing',
    'debug' => false,
    'url' => 'http://localhost',
    'timezone' => 'UTC',
    'locale' => 'en',
    'key' => 'base64:' . base64_encode(str_repeat('k', 32)),
    'cipher' => 'AES-256-CBC',
    'providers' => [
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Redis\RedisServiceProvider::class,
        RedisRl\Laravel\RedisRlServiceProvider::class,
        RedisRl\Tests\Laravel\AppServiceProvider::class,
    ],
    'aliases' => [],
];
