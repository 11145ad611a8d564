<?php

declare(strict_types=1);

namespace RedisRl\Laravel;

use Closure;
use Illuminate\Cache\RateLimiter as NamedLimiters;
use Illuminate\Http\Exceptions\HttpResponseException;
use Illuminate\Http\Exceptions\ThrottleRequestsException;
use Illuminate\Routing\Middleware\ThrottleRequests as LaravelThrottleRequests;
use RedisRl\Decision;
use RedisRl\Headers;
use RedisRl\Limit;
use RedisRl\Mode;
use RedisRl\LimitDecision;
use RedisRl\RateLimiter;
use Symfony\Component\HttpKernel\Exception\HttpException;

/**
 * Laravel's `throttle` middleware on the module: the same route syntax (`throttle:60,1`,
 * `throttle:60|600,1`, `throttle:api` for a limiter from RateLimiter::for(...)), since the
 * parsing is Laravel's own, and the same headers and 429. What changes is underneath:
 * all of a route's limits are one RL.ALL, so a request one limit refuses is counted by
 * none (ThrottleRequestsWithRedis runs one EVAL per limit and counts refused requests).
 *
 * Keys: `<prefix>{<Laravel's key>}:<decay seconds>s`, so two limits of a named limiter
 * with the same `by()` share a hash tag (one slot in a cluster) but never a counter.
 */
class ThrottleRequests extends LaravelThrottleRequests
{
    public function __construct(
        NamedLimiters $limiter,
        private readonly RateLimiter $redisRl,
        private readonly Settings $settings,
    ) {
        parent::__construct($limiter);
    }

    /**
     * @param \Illuminate\Http\Request $request
     * @param list<object{key: string, maxAttempts: int, decayMinutes: int|float, responseCallback: ?callable}> $limits
     */
    protected function handleRequest($request, Closure $next, array $limits)
    {
        foreach (array_values($limits) as $limit) {
            if ((int) $limit->maxAttempts <= 0) {
                // As Laravel: a limit of 0 (or less) refuses every request, with nothing to
                // wait for (Retry-After 0); Redis is not asked and nothing is counted.
                $headers = $this->getHeaders((int) $limit->maxAttempts, 0, 0);

                throw is_callable($limit->responseCallback)
                    ? new HttpResponseException(($limit->responseCallback)($request, $headers))
                    : new ThrottleRequestsException('Too Many Attempts.', null, $headers);
            }
        }
        $kit = array_map($this->limitFor(...), array_values($limits), array_keys(array_values($limits)));
        $decision = $this->redisRl->decide($kit, Mode::Hit, shadow: $this->settings->shadow);

        if ($decision->failure !== null) {
            if ($decision->allowed) {
                // Failing open: the request passes, with no rate headers (nothing is known).
                return $next($request);
            }
            // Failing closed: an outage is not the caller's fault, so no 429.
            throw new HttpException(503, 'Rate limiter unavailable.', null, ['Retry-After' => (string) $decision->retryAfterSeconds()]);
        }
        $where = $request->method() . ' /' . ltrim($request->path(), '/');
        if (!$this->redisRl->admits($decision, $this->settings->shadow, $where)) {
            [$denying, $limit] = $this->denying($decision, $limits);
            $headers = $this->headersFor($denying, $limit, $decision);

            throw is_callable($limit->responseCallback)
                ? new HttpResponseException(($limit->responseCallback)($request, $headers))
                : new ThrottleRequestsException('Too Many Attempts.', null, $headers);
        }

        $response = $next($request);
        // As Laravel's: the fields of the limit with the least left, unless the response
        // already carries a tighter one (a nested throttle, or its 429): getHeaders() with
        // the response keeps the smaller X-RateLimit-Remaining.
        $index = array_keys($decision->limits, Headers::tightest($decision->limits), true)[0];
        $response->headers->add($this->headersFor($decision->limits[$index], array_values($limits)[$index], $decision, $response));

        return $response;
    }

    /** @param object{key: string, maxAttempts: int, decayMinutes: int|float} $limit */
    private function limitFor(object $limit, int $index): Limit
    {
        // Laravel's decay is minutes, fractions allowed (throttle:10,0.5): kept to the ms.
        $ms = (int) round($limit->decayMinutes * 60_000);
        $window = $ms % 1000 === 0 ? intdiv($ms, 1000) : $ms . 'ms';
        $key = $this->settings->prefix . '{' . $limit->key . '}:' . (is_int($window) ? $window . 's' : $window);
        $name = 'limit' . $index;

        return match ($this->settings->algorithm) {
            'sliding_counter' => Limit::slideCount($name, $key, (int) $limit->maxAttempts, $window),
            'sliding_log' => Limit::slideLog($name, $key, (int) $limit->maxAttempts, $window),
            'fixed' => Limit::fixed($name, $key, (int) $limit->maxAttempts, $window),
            'gcra' => Limit::gcra($name, $key, (int) $limit->maxAttempts, $window),
        };
    }

    /**
     * The refusing limit with the longest wait (whose response callback answers).
     *
     * @param list<object> $limits
     * @return array{0: LimitDecision, 1: object}
     */
    private function denying(Decision $decision, array $limits): array
    {
        $limits = array_values($limits);
        $best = null;
        foreach ($decision->limits as $i => $d) {
            if (!$d->allowed && ($best === null || ($d->retryAfterMs ?? PHP_INT_MAX) > ($decision->limits[$best]->retryAfterMs ?? PHP_INT_MAX))) {
                $best = $i;
            }
        }
        $best ??= 0;

        return [$decision->limits[$best], $limits[$best]];
    }

    /**
     * Laravel's fields: X-RateLimit-Limit and -Remaining; on a denial (also one shadow
     * mode lets through: the real state) Retry-After in seconds and X-RateLimit-Reset as
     * a unix time, both from the server's wait.
     *
     * @return array<string, int>
     */
    private function headersFor(LimitDecision $d, object $limit, Decision $decision, ?\Symfony\Component\HttpFoundation\Response $response = null): array
    {
        $retryAfter = $d->allowed ? null : intdiv(($d->retryAfterMs ?? $d->resetAfterMs) + 999, 1000);

        return $this->getHeaders((int) $limit->maxAttempts, $d->allowed ? $d->remaining : 0, $retryAfter, $response);
    }
}
