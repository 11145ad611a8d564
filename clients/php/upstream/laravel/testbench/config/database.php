<?php

// Laravel's Redis (for the stock ThrottleRequestsWithRedis): the suite's server.
return ['redis' => [
    'client' => 'phpredis',
    'options' => ['prefix' => ''],
    'default' => ['host' => '127.0.0.1', 'port' => (int) getenv('REDIS_PORT'), 'database' => 0],
]];
