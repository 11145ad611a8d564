<?php

declare(strict_types=1);

namespace RedisRl\Connection;

use Closure;
use RedisCluster;
use RedisClusterException;
use RedisException;
use RedisRl\RedisFailure;

/**
 * A Redis Cluster through phpredis's RedisCluster. Every keyed command is sent with its
 * key as rawCommand's routing argument, which is what lets phpredis pick the node that
 * owns the slot (without it, each call would go anywhere and come back MOVED).
 */
final class ClusterConnection implements Connection
{
    private ?RedisCluster $cluster = null;
    private bool $owned = true;

    /**
     * @param list<string> $seeds "host:port" of some of the nodes
     * @param string|list<string>|null $auth a password, or [user, password]
     */
    public function __construct(
        private readonly array $seeds,
        private readonly float $connectTimeout = 0.2,
        private readonly float $readTimeout = 0.2,
        private readonly string|array|null $auth = null,
    ) {
    }

    /** Uses a client the application already has; its own timeouts apply. */
    public static function using(RedisCluster $cluster): self
    {
        $connection = new self([]);
        $connection->cluster = $cluster;
        $connection->owned = false;

        return $connection;
    }

    public function command(?string $route, string ...$args): mixed
    {
        // A keyless command (RL.PSEUDONYM) runs on any primary; spread them.
        return $this->run(fn (RedisCluster $cluster) => self::checked(
            $cluster,
            $cluster->rawCommand($route ?? $this->anyPrimary($cluster), ...$args),
        ));
    }

    public function everyPrimary(string ...$args): array
    {
        return $this->run(static fn (RedisCluster $cluster) => array_map(
            static fn (array $node) => self::checked($cluster, $cluster->rawCommand($node, ...$args)),
            array_values($cluster->_masters()),
        ));
    }

    /**
     * @template T
     * @param Closure(RedisCluster): T $call
     * @return T
     */
    private function run(Closure $call): mixed
    {
        try {
            $cluster = $this->cluster ??= new RedisCluster(
                null,
                $this->seeds,
                $this->connectTimeout,
                $this->readTimeout,
                false,
                $this->auth,
            );
            $cluster->clearLastError();

            return $call($cluster);
        } catch (RedisClusterException | RedisException $e) {
            // Start over from the seeds: the slot map or a socket may be what broke.
            if ($this->owned) {
                $this->cluster = null;
            }
            throw RedisFailure::unavailable('cluster: ' . $e->getMessage(), $e);
        }
    }

    /** phpredis turns an error reply into false; no RL command replies false otherwise. */
    private static function checked(RedisCluster $cluster, mixed $reply): mixed
    {
        if ($reply === false) {
            $error = $cluster->getLastError();
            $cluster->clearLastError();
            throw RedisFailure::fromErrorReply($error ?? 'error reply without a message');
        }

        return $reply;
    }

    /** @return array{0:string,1:int} */
    private function anyPrimary(RedisCluster $cluster): array
    {
        $primaries = $cluster->_masters();

        return $primaries[array_rand($primaries)];
    }
}
