<?php

declare(strict_types=1);

namespace RedisRl\Metrics;

/**
 * The kit's metrics and their Prometheus text exposition (format 0.0.4). We ship it
 * because promphp/prometheus_client_php is not packaged by Debian; an app that has
 * promphp implements Collector onto its CollectorRegistry instead.
 *
 * Where the values live: by default in this PHP process, which suits a long-running
 * worker (RoadRunner, Swoole, FrankenPHP's worker mode, a queue consumer). Under PHP-FPM
 * or mod_php each request starts from nothing, so give an APCu prefix: the values are
 * then shared by every request of the server's workers (ext-apcu, apc.enabled).
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

    /** Between the parts of a series' name; limit names are printable ASCII. */
    private const SEP = "\x1f";

    /** @var array<string, int> series => value (in-process storage) */
    private array $values = [];

    /** @param ?string $apcuPrefix null: this process only; a prefix: APCu, shared by the workers */
    public function __construct(private readonly ?string $apcuPrefix = null)
    {
        if ($apcuPrefix !== null && !(function_exists('apcu_enabled') && apcu_enabled())) {
            throw new \LogicException('metrics in APCu need ext-apcu enabled (apc.enabled=1, and apc.enable_cli=1 on the command line)');
        }
    }

    public function countDecision(string $limit, string $outcome, string $backend): void
    {
        if (!in_array($outcome, self::OUTCOMES, true) || !in_array($backend, self::BACKENDS, true)) {
            throw new \InvalidArgumentException("unknown outcome '{$outcome}' or backend '{$backend}'");
        }
        $this->add(implode(self::SEP, ['d', $limit, $outcome, $backend]), 1);
    }

    public function observeCall(string $limit, float $seconds): void
    {
        foreach (self::BUCKETS as $i => $le) {
            if ($seconds <= $le) {
                $this->add(implode(self::SEP, ['b', $limit, (string) $i]), 1);
            }
        }
        // The sum in whole nanoseconds: an integer, so APCu can add to it atomically.
        $this->add(implode(self::SEP, ['s', $limit]), (int) round($seconds * 1e9));
        $this->add(implode(self::SEP, ['c', $limit]), 1);
    }

    /** The Prometheus text format, for a /metrics route (served as CONTENT_TYPE). */
    public function render(): string
    {
        $decisions = $histograms = [];
        foreach ($this->all() as $series => $value) {
            $part = explode(self::SEP, $series);
            if ($part[0] === 'd') {
                $decisions[$series] = [$part[1], $part[2], $part[3], $value];
            } else {
                $histograms[$part[1]][$part[0] === 'b' ? (int) $part[2] : $part[0]] = $value;
            }
        }
        ksort($decisions);
        ksort($histograms);
        $out = '# HELP ' . self::DECISIONS . " Rate-limit decisions by limit, outcome and backend.\n"
            . '# TYPE ' . self::DECISIONS . " counter\n";
        foreach ($decisions as [$limit, $outcome, $backend, $count]) {
            $out .= self::DECISIONS . '{limit="' . self::escape($limit) . "\",outcome=\"{$outcome}\",backend=\"{$backend}\"} {$count}\n";
        }
        $out .= '# HELP ' . self::DURATION . " Wall time of each limiter call to Redis, in seconds.\n"
            . '# TYPE ' . self::DURATION . " histogram\n";
        foreach ($histograms as $limit => $h) {
            $label = 'limit="' . self::escape((string) $limit) . '"';
            foreach (self::BUCKETS as $i => $le) {
                $out .= self::DURATION . "_bucket{{$label},le=\"" . self::number($le) . '"} ' . ($h[$i] ?? 0) . "\n";
            }
            $count = $h['c'] ?? 0;
            $out .= self::DURATION . "_bucket{{$label},le=\"+Inf\"} {$count}\n"
                . self::DURATION . "_sum{{$label}} " . self::number(($h['s'] ?? 0) / 1e9) . "\n"
                . self::DURATION . "_count{{$label}} {$count}\n";
        }

        return $out;
    }

    private function add(string $series, int $by): void
    {
        if ($this->apcuPrefix === null) {
            $this->values[$series] = ($this->values[$series] ?? 0) + $by;
        } elseif (apcu_inc($this->apcuPrefix . $series, $by) === false) {
            // First use (apcu_add loses to a concurrent first use, then the inc counts).
            apcu_add($this->apcuPrefix . $series, 0);
            apcu_inc($this->apcuPrefix . $series, $by);
        }
    }

    /** @return array<string, int> */
    private function all(): array
    {
        if ($this->apcuPrefix === null) {
            return $this->values;
        }
        $values = [];
        foreach (new \APCUIterator('/^' . preg_quote($this->apcuPrefix, '/') . '/') as $entry) {
            $values[substr($entry['key'], strlen($this->apcuPrefix))] = (int) $entry['value'];
        }

        return $values;
    }

    private static function escape(string $value): string
    {
        return str_replace(['\\', '"', "\n"], ['\\\\', '\\"', '\\n'], $value);
    }

    private static function number(float $value): string
    {
        $text = rtrim(rtrim(sprintf('%.9F', $value), '0'), '.');

        return $text === '' ? '0' : $text;
    }
}
