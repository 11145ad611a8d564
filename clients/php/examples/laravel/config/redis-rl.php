<?php

return [
    'host' => '127.0.0.1',
    'port' => (int) (getenv('REDIS_PORT') ?: 6379),
    'failure' => 'open',                 // or 'closed'
    'algorithm' => 'sliding_counter',    // or 'sliding_log', 'fixed', 'gcra'
    'shadow' => false,                   // true: report would-be denials, limit nothing
];
