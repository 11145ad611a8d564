<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use PHPUnit\Framework\TestCase;
use RedisRl\Backend;
use RedisRl\Clock;
use RedisRl\Connection\Connection;
use RedisRl\Connection\RedisConnection;
use RedisRl\DenyCache;
use RedisRl\FailurePolicy;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\RecordingLogger;
use RedisRl\Tests\Support\Servers;

abstract class KitTestCase extends TestCase
{
    /** A fixed instant (2024-06-17 07:29:09.8 UTC) that the tests step from with NOW. */
    public const T0 = 1_718_609_349_800_000;

    /** @var array<string, ?string> feature => why it is missing (null: present) */
    private static array $missing = [];

    protected RecordingLogger $logger;

    /** What limiter() builds its RateLimiters for (a test about the module alone says Module). */
    protected Backend $backend = Backend::Auto;

    protected function setUp(): void
    {
        $this->logger = new RecordingLogger();
    }

    protected static function standalone(): RedisConnection
    {
        return new RedisConnection('127.0.0.1', Servers::get()->standalone());
    }

    protected function limiter(
        ?Connection $redis = null,
        FailurePolicy $policy = FailurePolicy::Open,
        ?Clock $clock = null,
        ?DenyCache $cache = null,
    ): RateLimiter {
        // The secret is the servers' RL_SECRET: the scripts backend computes pseudonyms with it.
        return new RateLimiter($redis ?? self::standalone(), $policy, $this->logger, $clock, $cache, backend: $this->backend, secret: Servers::SECRET);
    }

    /** A key no other test touches, with a hash tag so it is valid in a cluster too. */
    protected static function key(string $what): string
    {
        return 'rl:{' . bin2hex(random_bytes(6)) . '}:' . $what;
    }

    /** The module copy in use may not have RL.ALL / REFUND / RESET yet: skip, saying so. */
    protected static function requireFeature(string $feature): void
    {
        if (Servers::backend() === 'scripts') {
            return; // the scripts have every feature
        }
        if (!array_key_exists($feature, self::$missing)) {
            $probe = match ($feature) {
                'RL.ALL' => ['RL.ALL', '1', 'FIXED', 'rl:{probe}', '1', '1', 'PEEK'],
                'REFUND', 'RESET' => ['RL.FIXED', 'rl:{probe}', '1', '1', $feature],
                'RL.CONCURRENCY' => ['RL.CONCURRENCY', 'rl:{probe}:c', '1', '1', 'PEEK'],
                'RL.THROTTLE' => ['RL.THROTTLE', 'rl:{probe}:t', '1', '1', '60', '0'],
            };
            $redis = Servers::client(Servers::get()->standalone());
            $ok = $redis->rawCommand(...$probe) !== false;
            $error = (string) $redis->getLastError();
            self::$missing[$feature] = $ok || !preg_match('/unknown (command|option)/', $error) ? null : $error;
        }
        if (self::$missing[$feature] !== null) {
            self::markTestSkipped("the module under test does not support {$feature} yet: " . self::$missing[$feature]);
        }
    }

    /**
     * How many times the suite's server ran $command ('rl.fixed'): on the scripts backend,
     * how many scripts it ran, whichever (a call is one EVALSHA, or EVAL after NOSCRIPT).
     */
    public static function calls(string $command, ?int $port = null): int
    {
        $stats = self::info($port ?? Servers::get()->standalone(), 'commandstats');
        $of = static fn (string $c, string $field = 'calls') => preg_match("/\\b{$field}=(\\d+)/", $stats["cmdstat_{$c}"] ?? '', $m) === 1 ? (int) $m[1] : 0;

        // An EVALSHA answered NOSCRIPT (then sent again as EVAL) decided nothing.
        return Servers::backend() === 'scripts' && $command !== 'rl.pseudonym'
            ? $of('evalsha') - $of('evalsha', 'failed_calls') + $of('eval')
            : $of($command);
    }

    /** @return array<string, string> the server's INFO fields from one section */
    protected static function info(int $port, string $section): array
    {
        $fields = [];
        foreach (explode("\n", (string) Servers::client($port)->rawCommand('INFO', $section)) as $line) {
            if (str_contains($line, ':')) {
                [$name, $value] = explode(':', trim($line), 2);
                $fields[$name] = $value;
            }
        }

        return $fields;
    }
}
