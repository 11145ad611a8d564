<?php

declare(strict_types=1);

namespace RedisRl\Metrics;

/**
 * Where the kit reports its decisions and call latencies (docs/metrics.md): the kit's
 * Registry, or an adapter onto the app's own metrics library (promphp, OpenTelemetry...).
 * Label values are bounded: $limit is the limit's name, never its key or an identity.
 */
interface Collector
{
    /** redis_rl_decisions_total{limit, outcome, backend} += 1 */
    public function countDecision(string $limit, string $outcome, string $backend): void;

    /** redis_rl_call_duration_seconds{limit} observes $seconds */
    public function observeCall(string $limit, float $seconds): void;
}
