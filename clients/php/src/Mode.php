<?php

declare(strict_types=1);

namespace RedisRl;

enum Mode
{
    /** Spend COST units if every limit admits the request. */
    case Hit;
    /** Report the decision without spending or writing anything. */
    case Peek;
    /** Give back COST units an earlier admitted call spent. */
    case Refund;
    /** Clear the limiter's state. */
    case Reset;
    /** RL.CONCURRENCY only: push a held lease's expiry to now + ttl. */
    case Heartbeat;

    public function option(): ?string
    {
        return match ($this) {
            self::Hit => null,
            self::Peek => 'PEEK',
            self::Refund => 'REFUND',
            self::Reset => 'RESET',
            self::Heartbeat => throw new \InvalidArgumentException('HEARTBEAT is for a single concurrency limit'),
        };
    }

    /** RL.CONCURRENCY's subcommand for this mode (ACQUIRE/RELEASE/HEARTBEAT take the lease id). */
    public function leaseWord(): string
    {
        return match ($this) {
            self::Hit => 'ACQUIRE',
            self::Refund => 'RELEASE',
            self::Heartbeat => 'HEARTBEAT',
            self::Peek => 'PEEK',
            self::Reset => 'RESET',
        };
    }
}
