<?php

declare(strict_types=1);

namespace RedisRl\Tests\Support;

use RedisRl\Connection\Connection;

/**
 * For unit tests of what the kit sends (no server): records each command and answers
 * from a script, in order (a Throwable among the replies is thrown).
 */
final class ScriptedConnection implements Connection
{
    /** @var list<list<string>> */
    public array $sent = [];

    /** @param list<mixed> $replies */
    public function __construct(private array $replies)
    {
    }

    public function command(?string $route, string ...$args): mixed
    {
        $this->sent[] = $args;
        $reply = array_shift($this->replies);
        if ($reply instanceof \Throwable) {
            throw $reply; // a failure the connection reports (RedisFailure)
        }

        return $reply;
    }

    public function everyPrimary(string ...$args): array
    {
        return [$this->command(null, ...$args)];
    }
}
