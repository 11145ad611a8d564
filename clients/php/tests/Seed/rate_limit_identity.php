<?php
declare(strict_types=1);

// The seed post's function, as published.

function rateLimitIdentity(string $ip, string $endpoint): string
{
    // Daily-rotating salt kept out of the request path (env / KV).
    // Rotating it means yesterday's hashes cannot be correlated to today's.
    $salt = getenv('RL_DAILY_SALT') ?: 'fallback-not-for-prod';
    $day  = gmdate('Y-m-d');

    // Truncated keyed hash: enough to separate clients,
    // not enough to be a durable identifier.
    $digest = hash_hmac('sha256', $ip . '|' . $day, $salt);

    return substr($digest, 0, 24) . ':' . $endpoint;
}
