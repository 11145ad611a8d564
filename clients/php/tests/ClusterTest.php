<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Connection\ClusterConnection;
use RedisRl\FailureKind;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\RedisFailure;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/** A real 3-primary cluster: redirects are counted on the servers themselves. */
final class ClusterTest extends KitTestCase
{
    /** @var list<int> */
    private static array $ports;

    public static function setUpBeforeClass(): void
    {
        self::$ports = Servers::get()->cluster();
    }

    public function testKeyedCommandsReachTheOwningNodeWithoutMoved(): void
    {
        self::resetStats();
        // One instant: on the real clock a window boundary between a hit and its peek
        // would change what the peek reports.
        $rl = $this->clusterLimiter(new ManualClock(self::T0));
        $calls = 0;
        for ($i = 0; $i < 40; $i++) {
            foreach ([
                Limit::slideLog('log', self::key('log'), 5, 60),
                Limit::slideCount('cnt', self::key('cnt'), 5, 60),
                Limit::fixed('fixed', self::key('fixed'), 5, 60),
                Limit::gcra('gcra', self::key('gcra'), 5, 60),
            ] as $limit) {
                self::assertTrue($rl->hit($limit)->allowed);
                self::assertSame(3, $rl->peek($limit)->remaining);
                $calls += 2;
            }
        }

        self::assertSame(0, self::moved());
        $perNode = self::rlCalls();
        self::assertSame($calls, array_sum($perNode), 'every call reached a server');
        self::assertNotContains(0, $perNode, 'the keys spread over all three primaries');
    }

    public function testAllRoutesToTheSlotItsKeysShare(): void
    {
        self::requireFeature('RL.ALL');
        self::resetStats();
        $rl = $this->clusterLimiter();
        for ($i = 0; $i < 30; $i++) {
            $id = bin2hex(random_bytes(4));
            $d = $rl->hit(
                Limit::gcra('second', "rl:{{$id}}:s", 10, 1),
                Limit::fixed('day', "rl:{{$id}}:d", 1000, 86_400),
            );
            self::assertTrue($d->allowed);
            self::assertCount(2, $d->limits);
        }

        self::assertSame(0, self::moved());
        self::assertSame(30, array_sum(self::rlCalls('all')));
    }

    public function testTheMovedCountSeesAMisroutedCall(): void
    {
        self::resetStats();
        $key = self::key('fixed');
        $replies = [];
        $call = Servers::backend() === 'scripts'
            ? ['EVAL', (string) file_get_contents(dirname(__DIR__) . '/scripts/fixed.lua'), '1', $key, $key, '5', '60']
            : ['RL.FIXED', $key, '5', '60'];
        foreach (self::$ports as $port) {
            try {
                // phpredis throws on a MOVED reply.
                $replies[] = Servers::client($port)->rawCommand(...$call) === false ? 'error' : 'ok';
            } catch (\RedisException $e) {
                $replies[] = $e->getMessage();
            }
        }

        // Sent to every node by hand, the call is answered once and redirected twice.
        self::assertCount(2, array_filter($replies, static fn ($r) => str_starts_with((string) $r, 'MOVED')));
        self::assertSame(2, self::moved());
    }

    public function testPseudonymIsKeylessAndWorksThroughTheClusterClient(): void
    {
        self::resetStats();
        $rl = $this->clusterLimiter(new ManualClock(self::T0));
        $expected = substr(hash_hmac('sha256', '198.51.100.7|2024-06-17', Servers::SECRET), 0, 24) . ':api';

        for ($i = 0; $i < 20; $i++) {
            self::assertSame($expected, $rl->pseudonym('198.51.100.7', 'api'));
        }
        if (Servers::backend() === 'scripts') {
            self::markTestSkipped('pseudonyms checked; on the scripts backend the kit computes them, so there are no server calls to count');
        }
        $perNode = self::rlCalls('pseudonym');
        self::assertSame(20, array_sum($perNode));
        self::assertGreaterThan(1, count(array_filter($perNode)), 'keyless calls are spread over the primaries');
        self::assertSame(0, self::moved());
    }

    public function testUntaggedCounterKeysGetTheModulesErrorEvenWhenFailingOpen(): void
    {
        $rl = $this->clusterLimiter();
        foreach ([Limit::fixed('f', 'rl:untagged:fixed', 5, 60), Limit::slideCount('c', 'rl:untagged:cnt', 5, 60)] as $limit) {
            try {
                $rl->hit($limit);
                self::fail("{$limit->key} was accepted or swallowed");
            } catch (RedisFailure $e) {
                self::assertSame(FailureKind::Misuse, $e->kind);
                self::assertStringContainsString('needs a {hash tag} in cluster mode', $e->getMessage());
            }
        }
        self::assertSame('error', $this->logger->records[0][0]);
        // The log and the TAT are one key each: no tag needed.
        self::assertTrue($rl->hit(Limit::slideLog('l', 'rl:untagged:log:' . random_int(0, PHP_INT_MAX), 5, 60))->allowed);
    }

    private function clusterLimiter(?ManualClock $clock = null): RateLimiter
    {
        $seeds = array_map(static fn (int $port) => "127.0.0.1:{$port}", self::$ports);

        return $this->limiter(new ClusterConnection($seeds), FailurePolicy::Open, $clock);
    }

    private static function resetStats(): void
    {
        foreach (self::$ports as $port) {
            Servers::client($port)->rawCommand('CONFIG', 'RESETSTAT');
        }
    }

    /** MOVED replies sent, summed over the nodes. */
    private static function moved(): int
    {
        $moved = 0;
        foreach (self::$ports as $port) {
            $stat = self::info($port, 'errorstats')['errorstat_MOVED'] ?? 'count=0';
            $moved += (int) substr($stat, strlen('count='));
        }

        return $moved;
    }

    /**
     * Calls of the rate-limit commands on each node (from INFO commandstats, which the
     * reset clears), one command or all of them.
     *
     * @return list<int>
     */
    private static function rlCalls(?string $command = null): array
    {
        return array_map(static function (int $port) use ($command): int {
            $calls = 0;
            foreach (self::info($port, 'commandstats') as $name => $value) {
                // On the scripts backend every call is a script run (EVALSHA, or EVAL after NOSCRIPT).
                $scripts = Servers::backend() === 'scripts' && $command !== 'pseudonym' && in_array($name, ['cmdstat_evalsha', 'cmdstat_eval'], true);
                if ($scripts || (preg_match('/^cmdstat_rl\.(\w+)$/', $name, $m) === 1 && ($command === null || $m[1] === $command))) {
                    preg_match('/calls=(\d+)/', $value, $n);
                    // An EVALSHA answered NOSCRIPT (then sent again as EVAL) decided nothing.
                    preg_match('/failed_calls=(\d+)/', $value, $failed);
                    $calls += (int) $n[1] - ($name === 'cmdstat_evalsha' ? (int) ($failed[1] ?? 0) : 0);
                }
            }

            return $calls;
        }, self::$ports);
    }
}
