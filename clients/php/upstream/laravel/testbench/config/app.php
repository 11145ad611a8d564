<?php

// RL_UPSTREAM_MODE: `stock` runs Laravel's own throttle middlewares; an algorithm name
// (sliding_counter, fixed, ...) adds redis-rl's provider, which rebinds both to the kit's.
$stock = getenv('RL_UPSTREAM_MODE') === 'stock';

return [
    'name' => 'testbench',
    'env' => 'testing',
    'debug' => true,
    'url' => 'http://localhost',
    'timezone' => 'UTC',
    'locale' => 'en',
    'key' => 'base64:' . base64_encode(str_repeat('t', 32)),
    'cipher' => 'AES-256-CBC',
    'providers' => array_merge([
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Redis\RedisServiceProvider::class,
    ], $stock ? [] : [RedisRl\Laravel\RedisRlServiceProvider::class]),
    'aliases' => [],
];
