<?php

// app.php in a project that ran `composer require redis-rl/client:^0.1` (with the artifact
// repository of docs/frameworks/php.md#install); a module-enabled Redis on REDIS_PORT
// (default 6379). Run: php app.php
require __DIR__ . '/vendor/autoload.php';

use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\RateLimiter;

$rl = new RateLimiter(
    new RedisConnection('127.0.0.1', (int) (getenv('REDIS_PORT') ?: 6379)),
    FailurePolicy::Open, // when Redis cannot answer: admit (Closed: refuse)
);

// 3 searches per 10 seconds per user, exact (a sliding log); the {user} hash tag
// keeps a user's keys in one cluster slot.
$search = Limit::slideLog('search', 'rl:{user42}:search', 3, '10s');

foreach (range(1, 4) as $i) {
    $d = $rl->hit($search);
    printf("hit %d: %s, %d left, retry after %d ms\n", $i, $d->allowed ? 'allowed' : 'denied', $d->remaining, $d->retryAfterMs ?? -1);
}
foreach (Headers::for($d) as $name => $value) {
    echo "{$name}: {$value}\n";
}
$rl->reset($search);
