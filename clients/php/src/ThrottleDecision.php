<?php

declare(strict_types=1);

namespace RedisRl;

use Throwable;

/** RL.THROTTLE's answer, in redis-cell's terms (whole seconds, its rounding). */
final readonly class ThrottleDecision
{
    public function __construct(
        public bool $allowed,
        /** max_burst + 1. */
        public int $limit,
        public int $remaining,
        /** Whole seconds until the same request would pass; null when allowed (redis-cell's -1). */
        public ?int $retryAfterSeconds,
        public int $resetAfterSeconds,
        /** Set when the failure policy answered. */
        public ?Throwable $failure = null,
    ) {
    }

    /** @param array{0:int,1:int,2:int,3:int,4:int} $reply [limited, limit, remaining, retry_after, reset_after] */
    public static function fromReply(array $reply): self
    {
        return new self($reply[0] === 0, $reply[1], $reply[2], $reply[3] < 0 ? null : $reply[3], $reply[4]);
    }
}
