<?php

declare(strict_types=1);

namespace RedisRl;

use Throwable;

/**
 * The answer for one request: the server's, or the failure policy's when the server
 * could not answer ($failure is then set and $limits is empty).
 */
final readonly class Decision
{
    /** @param list<LimitDecision> $limits one per limit, in call order (RL.ALL's per-limit replies) */
    public function __construct(
        public bool $allowed,
        public int $remaining,
        /** Milliseconds until the same request would pass; null: it never can. 0 when allowed. */
        public ?int $retryAfterMs,
        public int $resetAfterMs,
        public array $limits,
        public ?Throwable $failure = null,
        /** Answered by the local deny cache, without a round trip. */
        public bool $cached = false,
    ) {
    }

    /** @param array{0:int,1:int,2:int,3:int} $reply */
    public static function single(Limit $limit, array $reply): self
    {
        $one = LimitDecision::fromReply($limit, $reply);

        return new self($one->allowed, $one->remaining, $one->retryAfterMs, $one->resetAfterMs, [$one]);
    }

    /**
     * @param list<Limit> $limits
     * @param array{0:int,1:int,2:int,3:int,4:list<array{0:int,1:int,2:int,3:int}>} $reply
     */
    public static function all(array $limits, array $reply): self
    {
        $each = array_map(LimitDecision::fromReply(...), $limits, $reply[4]);

        return new self($reply[0] === 1, $reply[1], $reply[2] < 0 ? null : $reply[2], $reply[3], $each);
    }

    /** Denied by the server for good: the cost is larger than a limit can ever admit. */
    public function neverAdmitted(): bool
    {
        return !$this->allowed && $this->retryAfterMs === null;
    }

    /** Retry-After's value: whole seconds, rounded up; null when there is nothing to wait for. */
    public function retryAfterSeconds(): ?int
    {
        return $this->allowed || $this->retryAfterMs === null ? null : intdiv($this->retryAfterMs + 999, 1000);
    }

    /** This decision as the deny cache hands it out $elapsedMs later. */
    public function aged(int $elapsedMs): self
    {
        return new self(
            $this->allowed,
            $this->remaining,
            $this->retryAfterMs === null ? null : max(0, $this->retryAfterMs - $elapsedMs),
            max(0, $this->resetAfterMs - $elapsedMs),
            array_map(static fn (LimitDecision $d) => $d->aged($elapsedMs), $this->limits),
            $this->failure,
            true,
        );
    }
}
