<?php

declare(strict_types=1);

namespace RedisRl;

/** What one limit said, as the server replied it. */
final readonly class LimitDecision
{
    public function __construct(
        public Limit $limit,
        public bool $allowed,
        public int $remaining,
        /** Milliseconds until the same request would pass; null: it never can (cost above the limit). */
        public ?int $retryAfterMs,
        /** Milliseconds until the limit is back to its full budget if nothing else arrives. */
        public int $resetAfterMs,
    ) {
    }

    /** @param array{0:int,1:int,2:int,3:int} $reply */
    public static function fromReply(Limit $limit, array $reply): self
    {
        // The server's -1 means "never"; a null cannot be mistaken for a wait.
        return new self($limit, $reply[0] === 1, $reply[1], $reply[2] < 0 ? null : $reply[2], $reply[3]);
    }

    public function aged(int $elapsedMs): self
    {
        return new self(
            $this->limit,
            $this->allowed,
            $this->remaining,
            $this->retryAfterMs === null ? null : max(0, $this->retryAfterMs - $elapsedMs),
            max(0, $this->resetAfterMs - $elapsedMs),
        );
    }
}
