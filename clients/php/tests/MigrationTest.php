<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Limit;
use RedisRl\RateLimiter;
use RedisRl\Tests\Support\Servers;

/**
 * The migration notes' claim (docs/frameworks/php.md): the seed's EVALSHA wrappers and the kit, taking turns on the
 * same keys, give the same answers, so app servers can switch one at a time. Both read
 * the real clock here (the seed's wrappers do), with windows long enough not to roll
 * over during the few milliseconds the test takes.
 */
final class MigrationTest extends KitTestCase
{
    private const WINDOW = 3600;
    private const LIMIT = 5;

    public static function setUpBeforeClass(): void
    {
        if (!defined('SEED_LUA_DIR')) {
            define('SEED_LUA_DIR', dirname(__DIR__, 3) . '/lua');
        }
        foreach (['SlidingWindowLog', 'SlidingWindowCounter', 'FixedWindow', 'rate_limit_identity'] as $file) {
            require_once __DIR__ . "/Seed/{$file}.php";
        }
    }

    /** @return array<string, array{0: string, 1: callable(string): Limit}> */
    public static function wrappers(): array
    {
        return [
            'SlidingWindowLog' => [\SlidingWindowLog::class, static fn (string $id) => Limit::slideLog('log', "rl:log:{$id}", self::LIMIT, self::WINDOW)],
            'SlidingWindowCounter' => [\SlidingWindowCounter::class, static fn (string $id) => Limit::slideCount('cnt', "rl:cnt:{$id}", self::LIMIT, self::WINDOW)],
            'fixed window' => [\FixedWindow::class, static fn (string $id) => Limit::fixed('fixed', "rl:fixed:{$id}", self::LIMIT, self::WINDOW)],
        ];
    }

    /**
     * @dataProvider wrappers
     * @param class-string $seedClass
     * @param callable(string): Limit $kitLimit
     */
    public function testTheSeedWrapperAndTheKitAgreeTakingTurns(string $seedClass, callable $kitLimit): void
    {
        $seed = new $seedClass(Servers::client(Servers::get()->standalone()), self::LIMIT, self::WINDOW);
        $kit = $this->limiter();
        $identity = bin2hex(random_bytes(8));

        $answers = [];
        for ($i = 0; $i < 8; $i++) {
            if ($i % 2 === 0) {
                $answers[] = ['seed', ...array_values($seed->check($identity))];
            } else {
                $d = $kit->hit($kitLimit($identity));
                $answers[] = ['kit', $d->allowed, $d->remaining];
            }
        }

        // One budget of 5, spent in turns by both, then refused to both.
        self::assertSame([
            ['seed', true, 4], ['kit', true, 3], ['seed', true, 2], ['kit', true, 1],
            ['seed', true, 0], ['kit', false, 0], ['seed', false, 0], ['kit', false, 0],
        ], $answers);
    }

    public function testRateLimitIdentityAndRlPseudonymAgree(): void
    {
        putenv('RL_DAILY_SALT=' . Servers::SECRET);
        $kit = $this->limiter();

        foreach (['192.0.2.44', '2001:db8::7', 'api-key-123'] as $identity) {
            self::assertSame(\rateLimitIdentity($identity, 'trending'), $kit->pseudonym($identity, 'trending'));
        }
        putenv('RL_DAILY_SALT');
    }
}
