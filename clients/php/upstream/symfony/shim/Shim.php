<?php

declare(strict_types=1);

namespace RedisRl\Upstream\Symfony;

use RedisRl\Clock;
use RedisRl\Connection\RedisConnection;
use RedisRl\FailurePolicy;
use RedisRl\RateLimiter;
use RedisRl\Symfony\RateLimiterFactory;
use RedisRl\Tests\Support\Servers;
use Symfony\Bridge\PhpUnit\ClockMock;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;
use Symfony\Component\RateLimiter\Storage\StorageInterface;

/**
 * What every shimmed class shares: one RateLimiter on the suite's server, whose clock is
 * ClockMock's (the tests' sleep() steps it, sent as NOW), and a key prefix per storage
 * object, so limiters a test builds on one storage share state and two tests never do.
 */
final class Shim
{
    private static ?RateLimiter $limiter = null;
    /** @var ?\WeakMap<object, string> */
    private static ?\WeakMap $prefixes = null;

    /** @param array<string, mixed> $config Symfony's factory options */
    public static function factory(array $config, ?object $storage): RateLimiterFactory
    {
        self::$prefixes ??= new \WeakMap();
        $storage ??= new \stdClass();
        $prefix = self::$prefixes[$storage] ??= 'up:' . bin2hex(random_bytes(4)) . ':';

        return new RateLimiterFactory($config + ['key_prefix' => $prefix], self::limiter());
    }

    public static function limiter(): RateLimiter
    {
        return self::$limiter ??= new RateLimiter(
            new RedisConnection('127.0.0.1', Servers::get()->standalone()),
            FailurePolicy::Closed,
            static function (string $level, string $message, array $context): void {
                throw new \RuntimeException(str_replace('{error}', (string) $context['error'], $message));
            },
            new class () implements Clock {
                public function nowMicros(): int
                {
                    return (int) round(ClockMock::microtime(true) * 1e6);
                }
            },
        );
    }

    public static function seconds(\DateInterval $interval): string
    {
        return \Symfony\Component\RateLimiter\Util\TimeUtil::dateIntervalToSeconds($interval) . ' seconds';
    }
}

/** The wrapped limiter's methods, for each shimmed class. */
trait Wraps
{
    private LimiterInterface $inner;

    public static function wrap(LimiterInterface $inner): static
    {
        $shim = (new \ReflectionClass(static::class))->newInstanceWithoutConstructor();
        $shim->inner = $inner;

        return $shim;
    }

    /** @internal the adapter's limiter, for the shimmed CompoundLimiter */
    public function inner(): LimiterInterface
    {
        return $this->inner;
    }

    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        return $this->inner->reserve($tokens, $maxTime);
    }

    public function consume(int $tokens = 1): RateLimit
    {
        return $this->inner->consume($tokens);
    }

    public function reset(): void
    {
        $this->inner->reset();
    }
}
