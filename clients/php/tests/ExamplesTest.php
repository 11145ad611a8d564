<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Tests\Support\Servers;

/**
 * The examples the docs show, served as they say (`php -S … examples/…`) against a real
 * module-enabled server: three requests pass, the fourth is refused with the headers.
 */
final class ExamplesTest extends KitTestCase
{
    /** @return iterable<string, array{string, string, array<string, string>}> */
    public static function examples(): iterable
    {
        yield 'PSR-15' => ['examples/app.php', '/api/v1/trending', ['Retry-After' => '/^1$/', 'RateLimit' => '/"burst";r=0;t=1/']];
        yield 'Symfony' => ['examples/symfony.php', '/api/trending', ['X-RateLimit-Limit' => '/^3$/', 'X-RateLimit-Remaining' => '/^0$/', 'Retry-After' => '/^[0-9]+$/']];
        yield 'Laravel' => ['examples/laravel/index.php', '/api/videos', ['X-RateLimit-Limit' => '/^3$/', 'X-RateLimit-Remaining' => '/^0$/', 'Retry-After' => '/^[0-9]+$/']];
    }

    /**
     * @dataProvider examples
     * @param array<string, string> $denialHeaders field => pattern
     */
    public function testTheExampleServesThreeAndRefusesTheFourth(string $script, string $path, array $denialHeaders): void
    {
        Servers::client(Servers::get()->standalone())->flushAll();
        $port = Servers::freePort();
        $root = dirname(__DIR__);
        $server = proc_open(
            [PHP_BINARY, '-S', "127.0.0.1:{$port}", "{$root}/{$script}"],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
            $root,
            ['REDIS_PORT' => (string) Servers::get()->standalone(), 'RL_SECRET' => Servers::SECRET, 'PATH' => (string) getenv('PATH')],
        );
        self::assertIsResource($server);
        try {
            $deadline = microtime(true) + 10;
            while (@fsockopen('127.0.0.1', $port) === false) {
                self::assertLessThan($deadline, microtime(true), "php -S {$script} did not start");
                usleep(20_000);
            }
            $statuses = [];
            foreach (range(1, 4) as $i) {
                [$status, $headers] = self::get("http://127.0.0.1:{$port}{$path}");
                $statuses[] = $status;
            }
            self::assertSame([200, 200, 200, 429], $statuses);
            foreach ($denialHeaders as $name => $pattern) {
                self::assertArrayHasKey(strtolower($name), $headers);
                self::assertMatchesRegularExpression($pattern, $headers[strtolower($name)], $name);
            }
        } finally {
            proc_terminate($server);
            proc_close($server);
        }
    }

    public function testTheMetricsExampleCountsEveryRequestAcrossRequests(): void
    {
        Servers::client(Servers::get()->standalone())->flushAll();
        $port = Servers::freePort();
        $root = dirname(__DIR__);
        $server = proc_open(
            [PHP_BINARY, '-S', "127.0.0.1:{$port}", "{$root}/examples/metrics.php"],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
            $root,
            ['REDIS_PORT' => (string) Servers::get()->standalone(), 'PATH' => (string) getenv('PATH')],
        );
        self::assertIsResource($server);
        try {
            $deadline = microtime(true) + 10;
            while (@fsockopen('127.0.0.1', $port) === false) {
                self::assertLessThan($deadline, microtime(true), 'php -S examples/metrics.php did not start');
                usleep(20_000);
            }
            $statuses = array_map(static fn () => self::get("http://127.0.0.1:{$port}/api")[0], range(1, 4));
            [$status, $headers] = self::get("http://127.0.0.1:{$port}/metrics");
            $text = (string) file_get_contents("http://127.0.0.1:{$port}/metrics");
        } finally {
            proc_terminate($server);
            proc_close($server);
        }

        self::assertSame([200, 200, 200, 429], $statuses);
        self::assertSame(200, $status);
        self::assertSame(\RedisRl\Metrics\Registry::CONTENT_TYPE, $headers['content-type'] ?? null);
        $backend = Servers::backend();
        $lines = array_values(array_filter(explode("\n", $text), static fn ($l) => str_starts_with($l, 'redis_rl_decisions_total{') || str_starts_with($l, 'redis_rl_call_duration_seconds_count')));
        self::assertSame([
            "redis_rl_decisions_total{limit=\"api\",outcome=\"allowed\",backend=\"{$backend}\"} 3",
            "redis_rl_decisions_total{limit=\"api\",outcome=\"denied\",backend=\"{$backend}\"} 1",
            'redis_rl_call_duration_seconds_count{limit="api"} 4',
        ], $lines, 'APCu kept the counts across the requests');
    }

    /** @return array{int, array<string, string>} status, lower-cased header => value */
    private static function get(string $url): array
    {
        $context = stream_context_create(['http' => ['ignore_errors' => true, 'timeout' => 10]]);
        file_get_contents($url, false, $context);
        $headers = [];
        foreach ($http_response_header as $line) {
            if (str_contains($line, ':')) {
                [$name, $value] = explode(':', $line, 2);
                $headers[strtolower(trim($name))] = trim($value);
            }
        }

        return [(int) explode(' ', $http_response_header[0])[1], $headers];
    }
}
