<?php

declare(strict_types=1);

// php examples/quickstart.php   (a module-enabled Redis on REDIS_PORT, default 6379)

require __DIR__ . '/bootstrap.php';

use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\RateLimiter;

$rl = new RateLimiter(
    new RedisConnection('127.0.0.1', (int) (getenv('REDIS_PORT') ?: 6379)),
    FailurePolicy::Open,
    static fn (string $level, string $message, array $context) => error_log("{$level}: {$context['error']}"),
);

$user = 'user' . random_int(1000, 9999);
$search = Limit::slideLog('search', "rl:{{$user}}:search", 3, 10);

foreach (range(1, 4) as $i) {
    $d = $rl->hit($search);
    printf("hit %d: allowed=%s remaining=%d retry=%sms reset=%dms\n", $i, json_encode($d->allowed), $d->remaining, json_encode($d->retryAfterMs), $d->resetAfterMs);
}
foreach (Headers::for($d, legacy: true) as $name => $value) {
    echo "  {$name}: {$value}\n";
}

// Two limits on one request, all or nothing (RL.ALL): 10 per second and 1,000 per day.
$perSecond = Limit::gcra('second', "rl:{{$user}}:s", 10, 1);
$perDay = Limit::fixed('day', "rl:{{$user}}:d", 1000, 86_400);
$d = $rl->hit($perSecond, $perDay->withCost(5));
echo 'RL.ALL: allowed=', json_encode($d->allowed), "\n";
foreach (Headers::for($d) as $name => $value) {
    echo "  {$name}: {$value}\n";
}

// A cost no budget can ever hold: denied for good, said so, and no Retry-After.
$d = $rl->hit($search->withCost(4));
echo 'cost 4 of 3: neverAdmitted=', json_encode($d->neverAdmitted()), ' retryAfterMs=', json_encode($d->retryAfterMs), "\n";
foreach (Headers::for($d) as $name => $value) {
    echo "  {$name}: {$value}\n";
}

echo 'RL.PSEUDONYM 192.0.2.1: ', $rl->pseudonym('192.0.2.1', 'search'), "\n";

// Give the search budget back (a request that failed before doing its work), then clear it.
echo 'refund: remaining=', $rl->refund($search)->remaining, "\n";
echo 'reset: remaining=', $rl->reset($search)->remaining, "\n";
