<?php

// What an application puts in config/redis-rl.php (every key is optional).
return [
    'host' => '127.0.0.1',
    'port' => (int) env('TEST_REDIS_PORT', 6379),
    'failure' => 'open',
    'algorithm' => 'sliding_counter',
    'shadow' => false,
    // The tests step Carbon's clock; an application leaves this out (the server's clock).
    'clock' => 'carbon',
    // Prometheus text on GET /metrics.
    'metrics' => '/metrics',
    'secret' => 'kit-test-secret',
];
