<?php

declare(strict_types=1);

namespace RedisRl\Tests\Support;

use Psr\Log\AbstractLogger;

/** A PSR-3 logger that keeps what it is told, with {placeholders} filled in. */
final class RecordingLogger extends AbstractLogger
{
    /** @var list<array{0: string, 1: string}> [level, message] */
    public array $records = [];

    public function log($level, $message, array $context = []): void
    {
        $this->records[] = [(string) $level, strtr((string) $message, ['{error}' => (string) ($context['error'] ?? '')])];
    }
}
