<?php

declare(strict_types=1);

namespace RedisRl;

use RedisRl\Connection\Connection;

/**
 * The module's commands run as the kit's copy of the scripts (clients/php/scripts/), by
 * EVALSHA, with the script's text sent again (EVAL) when the server answers NOSCRIPT: a
 * restart, a failover or SCRIPT FLUSH empties its cache, and a kit that did not reload
 * would fail every call from then on.
 */
final class Scripts
{
    private const FILES = [
        'RL.FIXED' => 'fixed', 'RL.COUNTER' => 'counter', 'RL.SLIDECOUNT' => 'slidecount',
        'RL.SLIDEWINDOW' => 'slidewindow', 'RL.SLIDELOG' => 'slidelog', 'RL.GCRA' => 'gcra',
        'RL.TOKENBUCKET' => 'tokenbucket', 'RL.CONCURRENCY' => 'concurrency', 'RL.THROTTLE' => 'throttle',
        'RL.ALL' => 'all',
    ];

    /** @var array<string, array{string, string}> command => [sha1, body], read once */
    private static array $loaded = [];

    /**
     * Runs `$args` (a module command line: RL.FIXED key 10 60 ...) as its script. KEYS
     * are $keys (the command's keys, in order; the per-window counters the scripts name
     * from the server's time share the first key's slot through its hash tag), ARGV every
     * argument after the command's name, unchanged.
     *
     * @param list<string> $keys
     * @throws RedisFailure
     */
    public static function run(Connection $redis, array $keys, string $command, string ...$argv): mixed
    {
        [$sha, $body] = self::script($command);
        $tail = [(string) count($keys), ...$keys, ...$argv];
        try {
            return $redis->command($keys[0] ?? null, 'EVALSHA', $sha, ...$tail);
        } catch (RedisFailure $failure) {
            if (!str_starts_with($failure->getMessage(), 'NOSCRIPT')) {
                throw $failure;
            }
        }

        // EVAL runs it and caches it under the same sha, on the node that owns the keys.
        return $redis->command($keys[0] ?? null, 'EVAL', $body, ...$tail);
    }

    /** @return array{string, string} */
    private static function script(string $command): array
    {
        if (!isset(self::$loaded[$command])) {
            $file = self::FILES[$command] ?? throw new \LogicException("no script for {$command}");
            $body = file_get_contents(dirname(__DIR__) . "/scripts/{$file}.lua");
            if ($body === false) {
                throw new \LogicException("the kit's scripts/{$file}.lua is missing");
            }
            self::$loaded[$command] = [sha1($body), $body];
        }

        return self::$loaded[$command];
    }
}
