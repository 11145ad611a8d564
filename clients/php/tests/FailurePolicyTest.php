<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Backend;
use RedisRl\Connection\ClusterConnection;
use RedisRl\Connection\RedisConnection;
use RedisRl\Decision;
use RedisRl\FailureKind;
use RedisRl\FailurePolicy;
use RedisRl\Limit;
use RedisRl\RedisFailure;
use RedisRl\Tests\Support\Servers;

/** Every way Redis can fail to decide goes through the chosen policy, and is logged. */
final class FailurePolicyTest extends KitTestCase
{
    /** @var list<resource> */
    private array $children = [];

    protected function tearDown(): void
    {
        foreach ($this->children as $child) {
            proc_terminate($child);
            proc_close($child);
        }
    }

    public function testRefusedConnection(): void
    {
        $this->assertPolicyApplies(new RedisConnection('127.0.0.1', Servers::freePort()), 'Connection refused');
    }

    public function testAServerThatNeverAnswersCostsOnlyTheReadTimeout(): void
    {
        // Listening but never accepting: the kernel completes the handshake, nobody replies.
        $silent = stream_socket_server('tcp://127.0.0.1:0');
        $port = (int) substr(strrchr(stream_socket_get_name($silent, false), ':'), 1);

        $started = microtime(true);
        $this->assertPolicyApplies(new RedisConnection('127.0.0.1', $port), 'socket error on read socket');
        // Two calls (open and closed), each bounded by the 0.2 s default read timeout.
        self::assertLessThan(1.5, microtime(true) - $started);
        fclose($silent);
    }

    public function testConnectionLostMidCall(): void
    {
        $this->assertPolicyApplies(new RedisConnection('127.0.0.1', $this->hangUpServer()), 'socket error');
    }

    public function testModuleNotLoaded(): void
    {
        $this->backend = Backend::Module; // on auto, the scripts would answer
        $this->assertPolicyApplies(
            new RedisConnection('127.0.0.1', Servers::get()->withoutModule()),
            "unknown command 'RL.GCRA'",
        );
    }

    public function testClusterUnreachable(): void
    {
        $this->assertPolicyApplies(new ClusterConnection(['127.0.0.1:' . Servers::freePort()]), 'cluster');
    }

    public function testPseudonymWithoutTheModuleIsNullAndLogged(): void
    {
        $this->backend = Backend::Module;
        $rl = $this->limiter(new RedisConnection('127.0.0.1', Servers::get()->withoutModule()));

        self::assertNull($rl->pseudonym('192.0.2.1'));
        self::assertSame('warning', $this->logger->records[0][0]);
        self::assertStringContainsString("unknown command 'RL.PSEUDONYM'", $this->logger->records[0][1]);
    }

    public function testAnErrorReplyAboutTheCallIsThrownNotSwallowed(): void
    {
        $redis = Servers::client(Servers::get()->standalone());
        $key = self::key('wrongtype');
        $redis->set($key, 'not a sorted set');

        try {
            $this->limiter(policy: FailurePolicy::Open)->hit(Limit::slideLog('log', $key, 5, 60));
            self::fail('WRONGTYPE was swallowed');
        } catch (RedisFailure $e) {
            self::assertSame(FailureKind::Misuse, $e->kind);
            self::assertStringStartsWith('WRONGTYPE', $e->getMessage());
        }
        self::assertSame('error', $this->logger->records[0][0]);
    }

    public function testTheLoggerMayBeACallable(): void
    {
        $seen = [];
        $rl = new \RedisRl\RateLimiter(
            new RedisConnection('127.0.0.1', Servers::freePort()),
            FailurePolicy::Closed,
            static function (string $level, string $message, array $context) use (&$seen): void {
                $seen[] = [$level, $context['error']];
            },
        );

        self::assertFalse($rl->hit(Limit::fixed('f', 'k', 1, 1))->allowed);
        self::assertSame('warning', $seen[0][0]);
        self::assertStringContainsString('Connection refused', $seen[0][1]);
    }

    private function assertPolicyApplies(\RedisRl\Connection\Connection $connection, string $reason): void
    {
        $limit = Limit::gcra('api', self::key('api'), 10, 1);

        $open = $this->limiter($connection, FailurePolicy::Open)->hit($limit);
        $closed = $this->limiter($connection, FailurePolicy::Closed)->hit($limit);

        self::assertTrue($open->allowed);
        self::assertFalse($closed->allowed);
        self::assertSame(1000, $closed->retryAfterMs);
        foreach ([$open, $closed] as $decision) {
            self::assertInstanceOf(RedisFailure::class, $decision->failure);
            self::assertSame(FailureKind::Unavailable, $decision->failure->kind);
            self::assertSame([], $decision->limits);
        }
        self::assertCount(2, $this->logger->records, 'each failure is reported');
        self::assertSame('warning', $this->logger->records[0][0]);
        self::assertStringContainsString('failing open', $this->logger->records[0][1]);
        self::assertStringContainsString('failing closed', $this->logger->records[1][1]);
        self::assertStringContainsString($reason, $this->logger->records[1][1]);
    }

    private function hangUpServer(): int
    {
        $child = proc_open(
            [PHP_BINARY, __DIR__ . '/Support/listener.php'],
            [1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
        );
        $this->children[] = $child;
        $port = (int) fgets($pipes[1]);
        self::assertGreaterThan(0, $port);

        return $port;
    }
}
