<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Backend;
use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\Pseudonym;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/** The backend option: detection, switching, NOSCRIPT, and the kit-side pseudonym. */
final class BackendTest extends KitTestCase
{
    private ManualClock $clock;

    public function testAutoOnABareServerRetriesTheFirstUnknownCommandOnTheScriptsAndAsksOnce(): void
    {
        $port = Servers::get()->fresh();
        $rl = $this->limiter(new RedisConnection('127.0.0.1', $port));
        $limit = Limit::fixed('api', self::key('auto'), 3, 60);

        $remaining = array_map(static fn () => $rl->hit($limit), range(1, 4));

        self::assertSame([2, 1, 0, 0], array_map(static fn ($d) => $d->remaining, $remaining), 'the first decision was not lost');
        self::assertSame([true, true, true, false], array_map(static fn ($d) => $d->allowed && $d->failure === null, $remaining));
        self::assertSame(Backend::Scripts, $rl->backend());
        self::assertSame('count=1', self::info($port, 'errorstats')['errorstat_ERR'] ?? null, 'one unknown command, then scripts only');
        self::assertSame([], $this->logger->records, 'detection is not a failure');
    }

    public function testNoscriptAfterAFlushIsReloadedAndNoCallFails(): void
    {
        $port = Servers::get()->withoutModule();
        $rl = $this->limiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed);
        $limit = Limit::slideLog('s', self::key('noscript'), 5, 60);
        $admin = Servers::client($port);

        $seen = [];
        foreach (range(1, 4) as $_) {
            $admin->rawCommand('SCRIPT', 'FLUSH');
            $decision = $rl->hit($limit);
            self::assertNull($decision->failure, (string) $decision->failure?->getMessage());
            $seen[] = $decision->remaining;
        }

        self::assertSame([4, 3, 2, 1], $seen);
        self::assertSame([], $this->logger->records);
    }

    public function testAutoSwitchesToTheModuleLoadedLaterAfterAReconnect(): void
    {
        $port = Servers::get()->fresh();
        $connection = new RedisConnection('127.0.0.1', $port);
        $rl = $this->limiter($connection, clock: $this->clock = new ManualClock(self::T0));
        $limit = Limit::gcra('g', self::key('later'), 10, 3600);
        $admin = Servers::client($port);

        self::assertSame(9, $rl->hit($limit)->remaining);
        self::assertSame(Backend::Scripts, $rl->backend());
        $admin->rawCommand('MODULE', 'LOAD', Servers::module());
        self::assertSame(8, $rl->hit($limit)->remaining, 'same connection: still the scripts');
        self::assertSame(Backend::Scripts, $rl->backend());

        // Some time later (the kit's clock), the next call asks the module again.
        $this->clock->advance(RateLimiter::RECHECK_US);
        $after = $rl->hit($limit);

        self::assertSame(Backend::Module, $rl->backend());
        self::assertNull($after->failure);
        self::assertSame(1, self::callsOn($port, 'rl.gcra'), 'the module answered');
        self::assertSame(7, $after->remaining, 'the same key, continued: the layouts are the same');
    }

    public function testNoModuleIsReadInRedis7AndRedis62Quoting(): void
    {
        // Redis 7+ and Valkey quote the name with ', Redis 6.2 with `: both get the hint.
        foreach (["ERR unknown command 'RL.FIXED', with args beginning with: ", 'ERR unknown command `RL.FIXED`, with args beginning with: '] as $reply) {
            $failure = \RedisRl\RedisFailure::fromErrorReply($reply);
            self::assertStringContainsString('the redis-rl module is not loaded', $failure->getMessage(), $reply);
        }
        $other = \RedisRl\RedisFailure::fromErrorReply('ERR unknown command `FOO`, with args beginning with: ');
        self::assertStringNotContainsString('redis-rl module', $other->getMessage());
    }

    public function testAFailedCallMakesAutoAskTheModuleAgain(): void
    {
        $redis = new \RedisRl\Tests\Support\ScriptedConnection([
            \RedisRl\RedisFailure::fromErrorReply("ERR unknown command 'RL.FIXED', with args beginning with: "),
            [1, 4, 0, 60000],                                      // the same call, on the script
            \RedisRl\RedisFailure::unavailable('connection lost'), // a failover, say
            [1, 3, 0, 60000],                                      // the new node has the module
        ]);
        $rl = new RateLimiter($redis, FailurePolicy::Open, $this->logger);
        $limit = Limit::fixed('f', 'rl:{u}:f', 5, 60);

        self::assertSame(4, $rl->hit($limit)->remaining);
        self::assertSame(Backend::Scripts, $rl->backend());
        self::assertNotNull($rl->hit($limit)->failure);
        self::assertSame(Backend::Scripts, $rl->backend(), 'the failure is labelled with the backend last used');
        self::assertSame(3, $rl->hit($limit)->remaining);

        self::assertSame(['RL.FIXED', 'EVALSHA', 'EVALSHA', 'RL.FIXED'], array_map(static fn (array $c) => $c[0], $redis->sent));
        self::assertSame(['1', 'rl:{u}:f', 'rl:{u}:f', '5', '60s'], array_slice($redis->sent[1], 2), 'KEYS then ARGV: every argument after the name');
        self::assertSame(Backend::Module, $rl->backend());
    }

    public function testScriptsOnAModuleServerDecideAsTheModuleOnTwinKeys(): void
    {
        $port = Servers::get()->withModule();
        $clock = new ManualClock(self::T0);
        $module = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed, $this->logger, $clock, backend: Backend::Module);
        $scripts = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Closed, $this->logger, $clock, backend: Backend::Scripts);
        $before = self::callsOn($port, 'rl.slidecount');
        $tag = bin2hex(random_bytes(4));

        foreach (range(1, 40) as $i) {
            $clock->advance(700_000);
            $a = $module->hit(Limit::slideCount('c', "rl:{{$tag}}:m", 7, 10), Limit::fixed('f', "rl:{{$tag}}:mf", 20, 5));
            $b = $scripts->hit(Limit::slideCount('c', "rl:{{$tag}}:s", 7, 10), Limit::fixed('f', "rl:{{$tag}}:sf", 20, 5));
            self::assertSame([$a->allowed, $a->remaining, $a->retryAfterMs, $a->resetAfterMs], [$b->allowed, $b->remaining, $b->retryAfterMs, $b->resetAfterMs], "call {$i}");
        }
        self::assertSame(0, self::callsOn($port, 'rl.slidecount') - $before, 'scripts backend sends no RL.* command');
        self::assertSame(Backend::Scripts, $scripts->backend());
    }

    public function testTheKitsPseudonymIsTheModules(): void
    {
        $module = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withModule()), clock: new ManualClock(self::T0));
        $this->backend = Backend::Scripts;
        $kit = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withModule()), clock: new ManualClock(self::T0));

        foreach ([
            ['192.0.2.1', null, null], ['::ffff:192.0.2.1', 'api', null], ['2001:0DB8::0001', null, null],
            ['2001:db8:1:2:3:4:5:6', 'x', 64], ['2001:db8:0:1:0:0:0:1', null, null], ['1::', null, 128],
            ['api-key-123', 'k', 64], ['192.0.2.1 ', null, null], ['01.2.3.4', null, null],
        ] as [$identity, $scope, $prefix6]) {
            self::assertSame($module->pseudonym($identity, $scope, $prefix6), $kit->pseudonym($identity, $scope, $prefix6), $identity);
        }
        self::assertSame('30eaf298020f061a4d7dbe85:trending', Pseudonym::of('s3cret', '192.0.2.1', 'trending', null, 1_764_460_800_000_000));
    }

    public function testAPseudonymOnTheScriptsWithoutTheSecretSaysWhy(): void
    {
        $rl = new RateLimiter(new RedisConnection('127.0.0.1', Servers::get()->withoutModule()), FailurePolicy::Open, $this->logger);

        self::assertNull($rl->pseudonym('192.0.2.1'));
        self::assertStringContainsString('pass the server\'s RL_SECRET', $this->logger->records[0][1]);
    }

    public function testTheBackendNameIsChecked(): void
    {
        self::assertSame(Backend::Scripts, Backend::named('scripts'));
        $this->expectExceptionMessage("backend must be 'auto', 'module' or 'scripts', got 'lua'");
        Backend::named('lua');
    }

    public function testScriptsInAClusterReloadOnEveryNodeAndNeverMove(): void
    {
        $ports = Servers::get()->cluster();
        $rl = new RateLimiter(new ClusterConnection(array_map(static fn (int $p) => "127.0.0.1:{$p}", $ports)), FailurePolicy::Closed, $this->logger, backend: Backend::Scripts);
        $moved = static fn () => array_sum(array_map(static fn (int $p) => (int) substr(self::info($p, 'errorstats')['errorstat_MOVED'] ?? 'count=0', 6), $ports));
        $before = $moved();

        foreach ($ports as $port) {
            Servers::client($port)->rawCommand('SCRIPT', 'FLUSH');
        }
        foreach (range(1, 30) as $i) {
            // FIXED's window counter (<key>:<n>) is named inside the script, in the key's slot.
            $decision = $rl->hit(Limit::fixed('f', "rl:{u{$i}}:f", 1, 60), Limit::slideCount('c', "rl:{u{$i}}:c", 5, 60));
            self::assertTrue($decision->allowed && $decision->failure === null, (string) $decision->failure?->getMessage());
            self::assertFalse($rl->hit(Limit::fixed('f', "rl:{u{$i}}:f", 1, 60))->allowed);
        }

        self::assertSame(0, $moved() - $before);
        self::assertSame([], $this->logger->records);
    }

    private static function callsOn(int $port, string $command): int
    {
        $stat = self::info($port, 'commandstats')["cmdstat_{$command}"] ?? 'calls=0';

        return preg_match('/calls=(\d+)/', $stat, $m) === 1 ? (int) $m[1] : 0;
    }
}
