<?php

declare(strict_types=1);

// Compares one upstream run (PHPUnit's JUnit log) with the suite's expected differences.
// usage: php check.php <junit.xml> <expected-differences.txt|-> <mode> <label>
// A line of the list is `<Class>::<test> | <why>`, optionally prefixed `@<mode> ` when it
// holds for one mode only. Fails when a test fails that is not listed, or when a listed
// test passes (the list only shrinks). Prints one summary line.
[, $junit, $listFile, $mode, $label] = $argv;
$expected = [];
foreach ($listFile === '-' ? [] : file($listFile, FILE_IGNORE_NEW_LINES) as $line) {
    if (trim($line) === '' || str_starts_with($line, '#')) {
        continue;
    }
    if (preg_match('/^@(\S+)\s+(.*)$/', $line, $m)) {
        if ($m[1] !== $mode) {
            continue;
        }
        $line = $m[2];
    }
    [$name] = array_map('trim', explode(' | ', $line, 2));
    $expected[$name] = true;
}
$xml = simplexml_load_file($junit) ?: throw new RuntimeException("no JUnit log at {$junit}");
$passed = $total = $skipped = 0;
$problems = [];
foreach ($xml->xpath('//testcase') as $case) {
    $class = (string) $case['class'];
    $name = substr($class, (int) strrpos($class, '\\') + (str_contains($class, '\\') ? 1 : 0)) . '::' . $case['name'];
    $total++;
    if (isset($case->skipped)) {
        $skipped++;
        $problems[] = "skipped: {$name}";
        continue;
    }
    $failed = isset($case->failure) || isset($case->error) || isset($case->warning);
    $passed += $failed ? 0 : 1;
    if ($failed && !isset($expected[$name])) {
        $problems[] = "unexpected failure: {$name}: " . strtok(trim((string) ($case->failure ?? $case->error ?? $case->warning)), "\n");
    } elseif (!$failed && isset($expected[$name])) {
        $problems[] = "listed as an expected difference but passed (remove it from the list): {$name}";
    }
    unset($expected[$name]);
}
foreach (array_keys($expected) as $name) {
    $problems[] = "listed but did not run: {$name}";
}
printf("%s: %d/%d passed, %d expected differences%s\n", $label, $passed, $total, $total - $passed - $skipped, $skipped ? ", {$skipped} skipped" : '');
foreach ($problems as $problem) {
    fwrite(STDERR, "  {$problem}\n");
}
exit($problems === [] ? 0 : 1);
