<?php

declare(strict_types=1);

namespace RedisRl\Connection;

use Redis;
use RedisException;
use RedisRl\RedisFailure;

/** One Redis server through phpredis's Redis class. */
final class RedisConnection implements Connection
{
    private ?Redis $redis = null;
    private bool $owned = true;

    /**
     * Connects lazily, at the first command, so that a server that is down costs the
     * failure policy's answer rather than an exception from a constructor.
     *
     * The timeouts are short on purpose: a limiter call takes well under a millisecond,
     * and without a read timeout a hung server holds every request for
     * default_socket_timeout (60 s).
     *
     * @param string|list<string>|null $auth a password, or [user, password]
     */
    public function __construct(
        private readonly string $host = '127.0.0.1',
        private readonly int $port = 6379,
        private readonly float $connectTimeout = 0.2,
        private readonly float $readTimeout = 0.2,
        private readonly string|array|null $auth = null,
    ) {
    }

    /** Uses a client the application already has; its own timeouts apply. */
    public static function using(Redis $redis): self
    {
        $connection = new self();
        $connection->redis = $redis;
        $connection->owned = false;

        return $connection;
    }

    public function command(?string $route, string ...$args): mixed
    {
        try {
            $redis = $this->redis ??= $this->open();
            $redis->clearLastError();
            $reply = $redis->rawCommand(...$args);
        } catch (RedisException $e) {
            // A timed-out socket may still deliver the late reply; a fresh connection
            // next time cannot mistake it for the answer to another command.
            if ($this->owned) {
                $this->redis = null;
            }
            throw RedisFailure::unavailable("{$this->host}:{$this->port}: {$e->getMessage()}", $e);
        }
        // phpredis turns an error reply into false; no RL command replies false otherwise.
        if ($reply === false) {
            throw RedisFailure::fromErrorReply($redis->getLastError() ?? 'error reply without a message');
        }

        return $reply;
    }

    public function everyPrimary(string ...$args): array
    {
        return [$this->command(null, ...$args)];
    }

    private function open(): Redis
    {
        $redis = new Redis();
        $redis->connect($this->host, $this->port, $this->connectTimeout, null, 0, $this->readTimeout);
        if ($this->auth !== null) {
            $redis->auth($this->auth);
        }

        return $redis;
    }
}
