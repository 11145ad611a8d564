<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use RedisRl\Tests\Support\Servers;

/**
 * The kit as a user installs it: `composer archive` builds the package (composer.json's
 * archive excludes apply), Debian's Composer installs that artifact into a fresh app,
 * offline (Packagist off, no plugins, no network), and the one-screen quickstart runs
 * as that app's app.php against a real server.
 */
final class PackageTest extends KitTestCase
{
    public function testComposerInstallsTheKitIntoAFreshAppAndTheQuickstartRuns(): void
    {
        exec('command -v composer', $out, $rc);
        if ($rc !== 0) {
            self::markTestSkipped('composer is not installed (test.sh installs Debian\'s)');
        }
        $app = sys_get_temp_dir() . '/redis-rl-composer-app-' . getmypid();
        exec('rm -rf ' . escapeshellarg($app));
        mkdir($app, 0700, true);
        try {
            $env = 'COMPOSER_DISABLE_NETWORK=1 COMPOSER_HOME=' . escapeshellarg("{$app}/.composer") . ' COMPOSER_ALLOW_SUPERUSER=1';
            exec('cd ' . escapeshellarg(dirname(__DIR__)) . " && {$env} composer archive --no-plugins --format=zip --dir=" . escapeshellarg("{$app}/artifacts") . ' --file=redis-rl-client-0.1.0 2>&1', $log, $rc);
            self::assertSame(0, $rc, implode("\n", $log));
            self::assertFileExists("{$app}/artifacts/redis-rl-client-0.1.0.zip");
            file_put_contents("{$app}/composer.json", json_encode([
                'name' => 'example/app',
                'require' => ['redis-rl/client' => '^0.1'],
                'repositories' => [
                    ['type' => 'artifact', 'url' => "{$app}/artifacts"],
                    ['packagist.org' => false],
                ],
                // Offline, the PSR interfaces cannot come from Packagist: the app says it
                // has them (Debian's php-psr-* packages, or its own framework's).
                'provide' => [
                    'psr/http-message' => '1.0.1',
                    'psr/http-factory' => '1.0.1',
                    'psr/http-server-middleware' => '1.0.1',
                    'psr/log' => '1.1.4',
                ],
            ], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
            exec("cd " . escapeshellarg($app) . " && {$env} composer install --no-plugins --no-interaction --no-progress 2>&1", $log, $rc);
            self::assertSame(0, $rc, implode("\n", $log));
            self::assertFileExists("{$app}/vendor/redis-rl/client/src/RateLimiter.php");
            self::assertFalse(is_link("{$app}/vendor/redis-rl/client"), 'unpacked, so a later install cannot leave a dangling link');
            self::assertFileDoesNotExist("{$app}/vendor/redis-rl/client/tests/KitTestCase.php", 'archive excludes the tests');

            copy(dirname(__DIR__) . '/examples/one-screen.php', "{$app}/app.php");
            $port = Servers::get()->standalone();
            exec('cd ' . escapeshellarg($app) . " && REDIS_PORT={$port} php app.php 2>&1", $output, $rc);
            self::assertSame(0, $rc, implode("\n", $output));
            // What docs/frameworks/php.md shows it printing, the values the clock decides
            // (the wait, which the test's speed shortens by a few ms) masked on both sides.
            $mask = static fn (string $text): string => (string) preg_replace(['/retry after [0-9]{4,5} ms/', '/t=1[01]$/m', '/Retry-After: 1[01]$/m'], ['retry after N ms', 't=N', 'Retry-After: N'], $text);
            self::assertSame($mask((string) file_get_contents(dirname(__DIR__) . '/examples/one-screen.out')), $mask(implode("\n", $output) . "\n"));
        } finally {
            exec('rm -rf ' . escapeshellarg($app));
        }
    }
}
