<?php

declare(strict_types=1);

namespace RedisRl\Connection;

use RedisRl\RedisFailure;

interface Connection
{
    /**
     * Sends one command and returns its reply.
     *
     * @param ?string $route a key of the command, for cluster routing; null for a keyless command
     * @throws RedisFailure for every way the call can fail, error replies included
     */
    public function command(?string $route, string ...$args): mixed;

    /**
     * Sends one keyless command to every primary (one server: to it) and returns their
     * replies, one per primary. For what each node answers for itself (RL.TOP).
     *
     * @return list<mixed>
     * @throws RedisFailure for every way the call can fail, on any node
     */
    public function everyPrimary(string ...$args): array;
}
