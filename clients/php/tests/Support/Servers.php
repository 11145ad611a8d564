<?php

declare(strict_types=1);

namespace RedisRl\Tests\Support;

use Redis;
use RuntimeException;

/**
 * Real servers for the suite, on free loopback ports, started on first use and killed
 * when the PHPUnit process ends: a standalone server with the module, one without it,
 * and a 3-node cluster with the module.
 */
final class Servers
{
    public const SECRET = 'kit-test-secret';

    private static ?self $instance = null;

    /** @var list<resource> */
    private array $processes = [];
    private string $dir;
    private ?int $standalone = null;
    private ?int $plain = null;
    /** @var ?list<int> */
    private ?array $cluster = null;

    private function __construct()
    {
        $this->dir = sys_get_temp_dir() . '/redis-rl-php-' . getmypid();
        @mkdir($this->dir, 0700, true);
        register_shutdown_function($this->stop(...));
    }

    public static function get(): self
    {
        return self::$instance ??= new self();
    }

    public static function module(): string
    {
        $module = getenv('RL_MODULE') ?: dirname(__DIR__, 2) . '/../../target/release/libredis_rl.so';
        if (!is_file($module)) {
            throw new RuntimeException("module not found at {$module}: build it or set RL_MODULE");
        }

        return $module;
    }

    /**
     * Which server the suite runs on: RL_BACKEND=module (the default) a server with the
     * module, RL_BACKEND=scripts a bare one, where the kit (backend auto) decides
     * through the scripts. test.sh runs the suite once each way.
     */
    public static function backend(): string
    {
        $backend = getenv('RL_BACKEND') ?: 'module';
        if (!in_array($backend, ['module', 'scripts'], true)) {
            throw new RuntimeException("RL_BACKEND must be module or scripts, got {$backend}");
        }

        return $backend;
    }

    /** Port of the suite's standalone server: with the module (and RL_SECRET set), or bare. */
    public function standalone(): int
    {
        if (self::backend() === 'scripts') {
            return $this->withoutModule();
        }

        return $this->standalone ??= $this->start(self::freePort(), ['--loadmodule', self::module()]);
    }

    /**
     * A new bare server of the test's own, which accepts MODULE LOAD (a test that loads
     * the module into a running server must not change the suite's shared one).
     */
    public function fresh(): int
    {
        return $this->start(self::freePort(), ['--enable-module-command', 'yes']);
    }

    /** Port of a standalone server with the module, whatever RL_BACKEND says. */
    public function withModule(): int
    {
        return $this->standalone ??= $this->start(self::freePort(), ['--loadmodule', self::module()]);
    }

    /** Port of a standalone server without the module. */
    public function withoutModule(): int
    {
        return $this->plain ??= $this->start(self::freePort(), []);
    }

    /** @return list<int> ports of a formed 3-primary cluster, with the module unless RL_BACKEND=scripts */
    public function cluster(): array
    {
        if ($this->cluster !== null) {
            return $this->cluster;
        }
        $ports = [];
        while (count($ports) < 3) {
            $port = self::freePort();
            // The cluster bus listens on port + 10000.
            if ($port + 10000 <= 65535 && self::isFree($port + 10000) && !in_array($port, $ports, true)) {
                $ports[] = $port;
            }
        }
        foreach ($ports as $port) {
            $this->start($port, [
                '--cluster-enabled', 'yes',
                '--cluster-config-file', "{$this->dir}/nodes-{$port}.conf",
                '--cluster-node-timeout', '5000',
                ...(self::backend() === 'scripts' ? [] : ['--loadmodule', self::module()]),
            ]);
        }
        $create = ['redis-cli', '--cluster', 'create'];
        foreach ($ports as $port) {
            $create[] = "127.0.0.1:{$port}";
        }
        array_push($create, '--cluster-replicas', '0', '--cluster-yes');
        $process = proc_open($create, [1 => ['file', "{$this->dir}/cluster-create.log", 'w'], 2 => ['file', "{$this->dir}/cluster-create.log", 'a']], $pipes);
        if (!is_resource($process) || proc_close($process) !== 0) {
            throw new RuntimeException('redis-cli --cluster create failed: ' . @file_get_contents("{$this->dir}/cluster-create.log"));
        }
        self::waitFor(10.0, static function () use ($ports): bool {
            foreach ($ports as $port) {
                $info = self::client($port)->rawCommand('CLUSTER', 'INFO');
                if (!is_string($info) || !str_contains($info, 'cluster_state:ok')) {
                    return false;
                }
            }

            return true;
        }, 'cluster_state:ok on every node');

        return $this->cluster = $ports;
    }

    public static function client(int $port): Redis
    {
        $redis = new Redis();
        $redis->connect('127.0.0.1', $port, 1.0, null, 0, 5.0);

        return $redis;
    }

    /** A loopback port nothing listens on (for a moment). */
    public static function freePort(): int
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        if ($server === false) {
            throw new RuntimeException("no free port: {$error}");
        }
        $port = (int) substr(strrchr(stream_socket_get_name($server, false), ':'), 1);
        fclose($server);

        return $port;
    }

    public function stop(): void
    {
        foreach ($this->processes as $process) {
            proc_terminate($process);
            proc_close($process);
        }
        $this->processes = [];
        foreach (glob("{$this->dir}/*") ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    /** @param list<string> $extra */
    private function start(int $port, array $extra): int
    {
        $command = [
            getenv('RL_SERVER') ?: 'redis-server',
            '--port', (string) $port, '--bind', '127.0.0.1',
            '--save', '', '--appendonly', 'no', '--dir', $this->dir,
            ...$extra,
        ];
        $log = "{$this->dir}/server-{$port}.log";
        $env = getenv() + ['RL_SECRET' => self::SECRET];
        $env['RL_SECRET'] = self::SECRET;
        // An array command runs without a shell, so the handle is the server itself.
        $process = proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'a']], $pipes, $this->dir, $env);
        if (!is_resource($process)) {
            throw new RuntimeException('could not start ' . implode(' ', $command));
        }
        $this->processes[] = $process;
        self::waitFor(10.0, static function () use ($port, $process): bool {
            if (!proc_get_status($process)['running']) {
                throw new RuntimeException("server on {$port} exited");
            }
            try {
                return self::client($port)->ping() !== false;
            } catch (\RedisException) {
                return false;
            }
        }, "server on port {$port}", $log);

        return $port;
    }

    private static function isFree(int $port): bool
    {
        $server = @stream_socket_server("tcp://127.0.0.1:{$port}");
        if ($server === false) {
            return false;
        }
        fclose($server);

        return true;
    }

    /** Polls start-up only: everything about time inside the tests is stepped with NOW. */
    private static function waitFor(float $seconds, callable $ready, string $what, ?string $log = null): void
    {
        $deadline = microtime(true) + $seconds;
        while (!$ready()) {
            if (microtime(true) > $deadline) {
                throw new RuntimeException("timed out waiting for {$what}" . ($log ? ': ' . @file_get_contents($log) : ''));
            }
            usleep(20_000);
        }
    }
}
