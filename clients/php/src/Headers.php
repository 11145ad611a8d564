<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * HTTP response fields for a decision: the IETF RateLimit-Policy and RateLimit fields
 * (draft-ietf-httpapi-ratelimit-headers), Retry-After, and optionally the legacy
 * X-RateLimit-* trio. The server's reply has no limit and no window; they come from the
 * Limit objects the decision was made for.
 */
final class Headers
{
    /** @return array<string, string> field name => value */
    public static function for(Decision $decision, bool $legacy = false): array
    {
        $headers = [];
        // A concurrency limit counts requests in flight, not over a window: it has no
        // place in the rate fields (its denial still gets the Retry-After below).
        $limits = array_values(array_filter(
            $decision->limits,
            static fn (LimitDecision $d) => $d->limit->algorithm !== Algorithm::Concurrency,
        ));
        if ($limits !== []) {
            $headers['RateLimit-Policy'] = implode(', ', array_map(
                static fn (LimitDecision $d) => sprintf(
                    '%s;q=%d;w=%d',
                    self::sfString($d->limit->name),
                    $d->limit->limit,
                    self::seconds($d->limit->windowMs),
                ),
                $limits,
            ));
            // t= is the time until the limit is back to its full budget (the reply's
            // reset_after_ms), rounded up: never earlier than it really is.
            $headers['RateLimit'] = implode(', ', array_map(
                static fn (LimitDecision $d) => sprintf(
                    '%s;r=%d;t=%d',
                    self::sfString($d->limit->name),
                    $d->remaining,
                    self::seconds($d->resetAfterMs),
                ),
                $limits,
            ));
        }
        // Only a denial that can pass later gets a Retry-After; "never" has no time to give.
        $retry = $decision->retryAfterSeconds();
        if ($retry !== null) {
            $headers['Retry-After'] = (string) $retry;
        }
        if ($legacy && $limits !== []) {
            $tightest = self::tightest($limits);
            $headers['X-RateLimit-Limit'] = (string) $tightest->limit->limit;
            $headers['X-RateLimit-Remaining'] = (string) $tightest->remaining;
            $headers['X-RateLimit-Reset'] = (string) self::seconds($tightest->resetAfterMs);
        }

        return $headers;
    }

    /** Whole seconds, rounded up. */
    public static function seconds(int $ms): int
    {
        return intdiv($ms + 999, 1000);
    }

    /**
     * The legacy fields describe a single limit: the one that denies (the longest wait),
     * else the one with the least left.
     *
     * @param non-empty-list<LimitDecision> $limits
     */
    public static function tightest(array $limits): LimitDecision
    {
        $rank = static fn (LimitDecision $d): array => [
            $d->allowed ? 1 : 0,
            $d->allowed ? 0 : -($d->retryAfterMs ?? PHP_INT_MAX),
            $d->remaining,
        ];
        $best = $limits[0];
        foreach ($limits as $d) {
            if ($rank($d) < $rank($best)) {
                $best = $d;
            }
        }

        return $best;
    }

    private static function sfString(string $value): string
    {
        return '"' . addcslashes($value, '"\\') . '"';
    }
}
