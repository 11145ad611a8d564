<?php

// The kit on the suite's server, with the algorithm the run names, on Carbon's clock
// (the tests move it with Carbon::setTestNow()). Failing closed: an outage shows as a 503.
return [
    'port' => (int) getenv('REDIS_PORT'),
    'algorithm' => getenv('RL_UPSTREAM_MODE'),
    'clock' => 'carbon',
    'failure' => 'closed',
];
