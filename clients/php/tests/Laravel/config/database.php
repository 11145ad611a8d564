<?php

// Laravel's own Redis (phpredis), for the stock ThrottleRequestsWithRedis in the comparison.
return ['redis' => [
    'client' => 'phpredis',
    'options' => ['prefix' => ''],
    'default' => ['host' => '127.0.0.1', 'port' => (int) env('TEST_REDIS_PORT', 6379), 'database' => 0],
]];
