<?php

declare(strict_types=1);

namespace RedisRl\Middleware;

use Psr\Http\Message\ServerRequestInterface;
use RedisRl\RateLimiter;

/**
 * The middleware's default identity: RL.PSEUDONYM of the client address, so no raw IP
 * ever becomes a key. A pseudonym only changes with the UTC day, so it is asked once per
 * address and day and then kept in this process.
 *
 * It reads REMOTE_ADDR only: behind a proxy, pass your own identify function that reads
 * the forwarded address from a proxy you trust.
 */
final class ClientIpPseudonym
{
    /** @var array<string, string> address => pseudonym, for $day only */
    private array $pseudonyms = [];
    private string $day = '';

    public function __construct(
        private readonly RateLimiter $limiter,
        private readonly int $capacity = 100_000,
    ) {
    }

    public function __invoke(ServerRequestInterface $request): ?string
    {
        $ip = $request->getServerParams()['REMOTE_ADDR'] ?? null;
        if (!is_string($ip) || $ip === '') {
            return null;
        }
        // The same clock as the calls, so the cached day is the day the server hashes with.
        $day = gmdate('Y-m-d', intdiv($this->limiter->now(), 1_000_000));
        if ($day !== $this->day || count($this->pseudonyms) >= $this->capacity) {
            $this->pseudonyms = [];
            $this->day = $day;
        }
        if (!isset($this->pseudonyms[$ip])) {
            $pseudonym = $this->limiter->pseudonym($ip);
            if ($pseudonym === null) {
                return null;
            }
            $this->pseudonyms[$ip] = $pseudonym;
        }

        return $this->pseudonyms[$ip];
    }
}
