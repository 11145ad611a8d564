<?php

declare(strict_types=1);

namespace RedisRl\Tests\Symfony;

use Psr\Log\AbstractLogger;

/** The app's logger: keeps what redis-rl reports. */
final class Logger extends AbstractLogger
{
    /** @var list<array{0: string, 1: string}> */
    public static array $records = [];

    public function log($level, $message, array $context = []): void
    {
        self::$records[] = [(string) $level, strtr((string) $message, ['{error}' => (string) ($context['error'] ?? '')])];
    }
}
