<?php

declare(strict_types=1);

namespace RedisRl\Metrics;

/**
 * The kit's in-process metrics and their Prometheus text exposition (format 0.0.4). We
 * ship it because promphp/prometheus_client_php is not packaged by Debian; an app that
 * has promphp implements Collector onto its CollectorRegistry instead. The values live
 * in this PHP process (a long-running worker: RoadRunner, Swoole, FrankenPHP, a CLI
 * consumer); under PHP-FPM each request starts from zero, so use a shared-storage
 * collector there.
 */
final class Registry implements Collector
{
    public const DECISIONS = 'redis_rl_decisions_total';
    public const DURATION = 'redis_rl_call_duration_seconds';
    public const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
    public const OUTCOMES = ['allowed', 'denied', 'shadow_denied', 'failure_open', 'failure_closed', 'cache_denied'];
    public const BACKENDS = ['module', 'scripts'];
    /** Seconds: sub-millisecond calls, with a tail up to a 300 ms timeout. */
    public const BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5];

    /** @var array<string, int> "limit\0outcome\0backend" => count */
    private array $decisions = [];
    /** @var array<string, array{buckets: list<int>, sum: float, count: int}> limit => histogram */
    private array $durations = [];

    public function countDecision(string $limit, string $outcome, string $backend): void
    {
        if (!in_array($outcome, self::OUTCOMES, true) || !in_array($backend, self::BACKENDS, true)) {
            throw new \InvalidArgumentException("unknown outcome '{$outcome}' or backend '{$backend}'");
        }
        $series = "{$limit}\0{$outcome}\0{$backend}";
        $this->decisions[$series] = ($this->decisions[$series] ?? 0) + 1;
    }

    public function observeCall(string $limit, float $seconds): void
    {
        $h = $this->durations[$limit] ?? ['buckets' => array_fill(0, count(self::BUCKETS), 0), 'sum' => 0.0, 'count' => 0];
        foreach (self::BUCKETS as $i => $le) {
            if ($seconds <= $le) {
                $h['buckets'][$i]++;
            }
        }
        $h['sum'] += $seconds;
        $h['count']++;
        $this->durations[$limit] = $h;
    }

    /** The Prometheus text format, for a /metrics route (served as CONTENT_TYPE). */
    public function render(): string
    {
        $out = '# HELP ' . self::DECISIONS . " Rate-limit decisions by limit, outcome and backend.\n"
            . '# TYPE ' . self::DECISIONS . " counter\n";
        $series = $this->decisions;
        ksort($series);
        foreach ($series as $key => $count) {
            [$limit, $outcome, $backend] = explode("\0", $key);
            $out .= self::DECISIONS . '{limit="' . self::escape($limit) . "\",outcome=\"{$outcome}\",backend=\"{$backend}\"} {$count}\n";
        }
        $out .= '# HELP ' . self::DURATION . " Wall time of each limiter call to Redis, in seconds.\n"
            . '# TYPE ' . self::DURATION . " histogram\n";
        $durations = $this->durations;
        ksort($durations);
        foreach ($durations as $limit => $h) {
            $label = 'limit="' . self::escape((string) $limit) . '"';
            foreach (self::BUCKETS as $i => $le) {
                $out .= self::DURATION . "_bucket{{$label},le=\"" . self::number($le) . "\"} {$h['buckets'][$i]}\n";
            }
            $out .= self::DURATION . "_bucket{{$label},le=\"+Inf\"} {$h['count']}\n"
                . self::DURATION . "_sum{{$label}} " . self::number($h['sum']) . "\n"
                . self::DURATION . "_count{{$label}} {$h['count']}\n";
        }

        return $out;
    }

    private static function escape(string $value): string
    {
        return str_replace(['\\', '"', "\n"], ['\\\\', '\\"', '\\n'], $value);
    }

    private static function number(float $value): string
    {
        $text = rtrim(rtrim(sprintf('%.9F', $value), '0'), '.');

        return $text === '' || $text === '-0' ? '0' : $text;
    }
}
