<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use InvalidArgumentException;
use RedisRl\Backend;
use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailureKind;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\RedisFailure;
use RedisRl\TopEntry;
use RedisRl\Tests\Support\ManualClock;
use RedisRl\Tests\Support\Servers;

/** top(): RL.TOP on one server, and merged over a real cluster's primaries. */
final class TopTest extends KitTestCase
{
    private const MINUTE_US = 60_000_000;

    public function testOneServerAnswersExactEntriesWorstFirstWithCountAlgorithmAndReset(): void
    {
        // A server with the module on both runs of the suite (RL.TOP is the module's).
        $port = Servers::get()->withModule();
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(new RedisConnection('127.0.0.1', $port), clock: $clock);
        $rl->top(reset: true);
        $heavy = Limit::fixed('heavy', self::key('heavy'), 1, 60);
        $light = Limit::fixed('light', self::key('light'), 1, 60);
        $gcra = Limit::gcra('g', self::key('g'), 1, 60);

        // Limit 1: the first call of a window is admitted, every other one denied.
        $this->hits($rl, $heavy, 6);
        $this->hits($rl, $light, 2);
        $this->hits($rl, $gcra, 3);
        $clock->advance(self::MINUTE_US); // heavy's next window: one more admitted, one denied
        $this->hits($rl, $heavy, 2);

        $t0Ms = intdiv(self::T0, 1000);
        $all = [
            new TopEntry($heavy->key, 6, 1, 0, $t0Ms + 60_000, 'rl.fixed', 'fixed'),
            new TopEntry($gcra->key, 2, 0, 0, $t0Ms, 'rl.gcra', 'gcra'),
            new TopEntry($light->key, 1, 0, 0, $t0Ms, 'rl.fixed', 'fixed'),
        ];
        self::assertEquals($all, $rl->top());
        self::assertEquals(array_slice($all, 0, 2), $rl->top(2));
        self::assertEquals([$all[0]], $rl->top(1));
        self::assertEquals([$all[1]], $rl->top(algorithm: 'gcra'));
        self::assertEquals([$all[0], $all[2]], $rl->top(algorithm: 'FIXED'));
        self::assertEquals([$all[0]], $rl->top(1, 'fixed'));
        self::assertSame([], $rl->top(algorithm: 'slidelog'));

        self::assertEquals($all, $rl->top(reset: true));
        self::assertSame([], $rl->top());
        self::assertSame([], $this->logger->records, 'nothing failed');
    }

    public function testMistakesAreThrown(): void
    {
        $rl = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withModule()));
        foreach ([0, -1] as $count) {
            try {
                $rl->top($count);
                self::fail("count {$count} was accepted");
            } catch (InvalidArgumentException $e) {
                self::assertSame("top(): count must be a positive integer, got {$count}", $e->getMessage());
            }
        }
        try {
            $rl->top(algorithm: 'nope');
            self::fail('an unknown algorithm was accepted');
        } catch (RedisFailure $e) {
            self::assertSame(FailureKind::Misuse, $e->kind);
            self::assertStringStartsWith("ERR RL.TOP: unknown algorithm 'nope'", $e->getMessage());
        }
    }

    public function testTheScriptsBackendSaysTheModuleIsNeeded(): void
    {
        $port = Servers::get()->withModule();
        $before = self::info($port, 'commandstats')['cmdstat_rl.top'] ?? null;
        $scripts = new RateLimiter(new RedisConnection('127.0.0.1', $port), FailurePolicy::Open, $this->logger, backend: Backend::Scripts);
        try {
            $scripts->top();
            self::fail('top() on the scripts backend answered');
        } catch (RedisFailure $e) {
            self::assertSame(FailureKind::Unavailable, $e->kind);
            self::assertStringStartsWith('RL.TOP needs the redis-rl module', $e->getMessage());
        }
        self::assertSame($before, self::info($port, 'commandstats')['cmdstat_rl.top'] ?? null, 'nothing was sent');

        // Auto on a server without the module: the server's refusal, with how to load it.
        $auto = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withoutModule()));
        try {
            $auto->top();
            self::fail('top() on a server without the module answered');
        } catch (RedisFailure $e) {
            self::assertSame(FailureKind::Unavailable, $e->kind);
            self::assertStringStartsWith("ERR unknown command 'RL.TOP'", $e->getMessage());
            self::assertStringContainsString('the redis-rl module is not loaded on this server', $e->getMessage());
        }
        self::assertSame([], $this->logger->records, 'thrown, not logged');
    }

    public function testAClusterAnswersEveryPrimaryMergedWorstFirst(): void
    {
        if (Servers::backend() === 'scripts') {
            self::markTestSkipped('the suite\'s cluster has no module on RL_BACKEND=scripts; the module run merges');
        }
        $ports = Servers::get()->cluster();
        foreach ($ports as $port) {
            Servers::client($port)->rawCommand('RL.TOP', 'RESET');
        }
        $clock = new ManualClock(self::T0);
        $rl = $this->limiter(new ClusterConnection(array_map(static fn (int $p) => "127.0.0.1:{$p}", $ports)), clock: $clock);
        // Twelve hash tags, so twelve slots over the three primaries; key i is denied i + 1 times.
        $denied = [];
        foreach (range(0, 11) as $i) {
            $limit = Limit::fixed("t{$i}", "{t{$i}}:rl", 1, 60);
            $this->hits($rl, $limit, $i + 2);
            $denied[$limit->key] = $i + 1;
        }
        $gcra = Limit::gcra('g', '{tg}:rl', 1, 60);
        $this->hits($rl, $gcra, 4);

        $perNode = array_map(static fn (int $p) => count(Servers::client($p)->rawCommand('RL.TOP', 'COUNT', '100')), $ports);
        self::assertSame(13, array_sum($perNode), 'each key on one primary');
        self::assertNotContains(0, $perNode, 'the keys are on all three primaries');

        $t0Ms = intdiv(self::T0, 1000);
        $merged = $rl->top(5);
        self::assertSame(
            ['{t11}:rl' => 12, '{t10}:rl' => 11, '{t9}:rl' => 10, '{t8}:rl' => 9, '{t7}:rl' => 8],
            array_combine(array_map(static fn (TopEntry $e) => $e->key, $merged), array_map(static fn (TopEntry $e) => $e->denied, $merged)),
        );
        self::assertEquals(new TopEntry('{t11}:rl', 12, 0, 0, $t0Ms, 'rl.fixed', 'fixed'), $merged[0]);
        // Equal counts come by key: {t2}:rl and {tg}:rl were both denied 3 times.
        self::assertSame(['{t11}:rl', '{t10}:rl', '{t9}:rl'], array_map(static fn (TopEntry $e) => $e->key, $rl->top(3)));
        $all = $rl->top(100);
        self::assertSame(['{t2}:rl', '{tg}:rl', '{t1}:rl', '{t0}:rl'], array_map(static fn (TopEntry $e) => $e->key, array_slice($all, 9)));
        self::assertEquals([new TopEntry('{tg}:rl', 3, 0, 0, $t0Ms, 'rl.gcra', 'gcra')], $rl->top(algorithm: 'gcra'));
        self::assertSame(['{t11}:rl', '{t10}:rl'], array_map(static fn (TopEntry $e) => $e->key, $rl->top(2, 'fixed')));

        self::assertCount(13, $rl->top(100, reset: true));
        self::assertSame([], $rl->top());
    }

    public function testMergeAddsAKeySeenOnTwoServersAndKeepsItsLatestDenial(): void
    {
        $a = [new TopEntry('k', 5, 1, 1, 10, 'rl.fixed', 'fixed'), new TopEntry('x', 9, 0, 0, 1, 'rl.gcra', 'gcra')];
        $b = [new TopEntry('k', 6, 2, 0, 20, 'rl.all', 'gcra'), new TopEntry('10', 1, 0, 0, 1, 'rl.fixed', 'fixed'), new TopEntry('9', 1, 0, 0, 1, 'rl.fixed', 'fixed')];

        self::assertEquals([
            new TopEntry('k', 11, 3, 1, 20, 'rl.all', 'gcra'),
            new TopEntry('x', 9, 0, 0, 1, 'rl.gcra', 'gcra'),
            new TopEntry('10', 1, 0, 0, 1, 'rl.fixed', 'fixed'),
            new TopEntry('9', 1, 0, 0, 1, 'rl.fixed', 'fixed'),
        ], TopEntry::merge([$a, $b], 10));
        self::assertEquals([new TopEntry('k', 11, 3, 1, 20, 'rl.all', 'gcra')], TopEntry::merge([$a, $b], 1));
    }

    /** $times hits at the clock's instant, each a spend of 1. */
    private function hits(RateLimiter $rl, Limit $limit, int $times): void
    {
        foreach (range(1, $times) as $_) {
            $rl->hit($limit);
        }
    }
}
