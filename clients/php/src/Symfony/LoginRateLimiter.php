<?php

declare(strict_types=1);

namespace RedisRl\Symfony;

use Symfony\Component\HttpFoundation\RateLimiter\RequestRateLimiterInterface;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\Security\Core\Security;

/**
 * For `security.firewalls.<name>.login_throttling.limiter`: Symfony's
 * DefaultLoginRateLimiter (a limit per client IP and a tighter one per username and
 * IP), as one RL.ALL. Symfony's consumes the two limiters one after the other, each
 * under its own lock; here an attempt the per-IP limit refuses is not counted against
 * the username, nor the other way round.
 *
 * Both keys carry the client IP as their hash tag, so in a cluster they share a slot.
 */
final class LoginRateLimiter implements RequestRateLimiterInterface
{
    public function __construct(
        private readonly RateLimiterFactory $globalFactory,
        private readonly RateLimiterFactory $localFactory,
    ) {
    }

    public function consume(Request $request): RateLimit
    {
        return $this->limiter($request)->consume(1);
    }

    public function reset(Request $request): void
    {
        $this->limiter($request)->reset();
    }

    private function limiter(Request $request): ModuleLimiter
    {
        $username = (string) $request->attributes->get(Security::LAST_USERNAME, '');
        // As DefaultLoginRateLimiter normalises it.
        $username = preg_match('//u', $username) ? mb_strtolower($username, 'UTF-8') : strtolower($username);
        $ip = (string) $request->getClientIp();

        return new ModuleLimiter(
            $this->globalFactory->rateLimiter(),
            [$this->globalFactory->limit($ip), $this->localFactory->limit($username, $ip)],
            $this->globalFactory->shadow() || $this->localFactory->shadow(),
        );
    }
}
