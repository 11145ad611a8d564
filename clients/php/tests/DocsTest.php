<?php

declare(strict_types=1);

namespace RedisRl\Tests;

use PHPUnit\Framework\TestCase;

/**
 * Every code block the PHP pages mark `<!-- example: <file> -->` is that file, byte for
 * byte (the file is what the tests run), and every relative link resolves.
 */
final class DocsTest extends TestCase
{
    /** @return iterable<string, array{string}> */
    public static function pages(): iterable
    {
        foreach (['clients/php/README.md', 'docs/frameworks/php.md', 'docs/frameworks/symfony.md', 'docs/frameworks/laravel.md'] as $page) {
            yield $page => [$page];
        }
    }

    /** @dataProvider pages */
    public function testMarkedExamplesAreTheTestedFilesAndLinksResolve(string $page): void
    {
        $root = dirname(__DIR__, 3);
        $text = (string) file_get_contents("{$root}/{$page}");
        preg_match_all('/<!-- example: (\S+) -->\n```[a-z]*\n(.*?)```\n/s', $text, $blocks, PREG_SET_ORDER);
        self::assertNotEmpty($blocks, "{$page} shows no tested example");
        foreach ($blocks as [, $file, $body]) {
            self::assertFileExists("{$root}/{$file}");
            self::assertSame(file_get_contents("{$root}/{$file}"), $body, "{$page}: the block marked {$file} differs from the file");
        }
        preg_match_all('/\]\(([^)#:]+)(#[^)]*)?\)/', $text, $links);
        foreach ($links[1] as $link) {
            self::assertFileExists(dirname("{$root}/{$page}") . '/' . $link, "{$page} links to {$link}");
        }
    }
}
