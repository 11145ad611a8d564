// Runs @nestjs/throttler 6's own tests (the storage spec and the e2e specs, jest,
// CommonJS) against redis-rl's RedisRlThrottlerStorage, with only the storage swapped by
// ./nestjs-throttler-6/storage.cjs, on one module-enabled redis-server on a free port.
// The tarball (../../../../shared/upstream) is unpacked into a scratch directory; the
// test dependencies are installed once into .tools/upstream-node/nestjs-throttler-6.
//
//   node upstream/nest.mjs              check, with the library's own window (algorithm
//                                       'counter'): the failing tests must be exactly
//                                       nestjs-throttler-6/expected-differences.txt
//   node upstream/nest.mjs --measure    counts for the stock Redis storage, ours (default
//                                       algorithm) and ours on 'counter' (--verbose: the failures)
// The tests' waits are real on 'counter' and for the stock storage (both end a window when
// its key expires on the server); on the other algorithms they step our storage's clock
// (see storage.cjs), and RL_UPSTREAM_REALTIME=1 makes them real.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../test/support/servers.js';
import { count, expected, here, install, problems, run, upstream } from './common.mjs';

const NAME = 'nestjs-throttler-6';
const TARBALL = 'nestjs-throttler-6.5.1';
const suiteDir = join(here, NAME);

async function runSuite(server, store, algorithm) {
  const scratch = mkdtempSync(join(tmpdir(), 'rl-upstream-'));
  const root = join(scratch, TARBALL);
  try {
    execFileSync('tar', ['xzf', join(upstream, `${TARBALL}.tar.gz`), '-C', scratch]);
    symlinkSync(join(deps, 'node_modules'), join(root, 'node_modules'));
    const fromDeps = createRequire(join(deps, 'package.json'));
    const results = join(root, 'results.json');
    const config = {
      rootDir: root,
      testEnvironment: 'node',
      testMatch: ['<rootDir>/src/throttler.service.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts'],
      moduleFileExtensions: ['js', 'json', 'ts'],
      // Type-checking is not what these tests test; transpiling file by file is much faster.
      transform: { '^.+\\.ts$': ['ts-jest', { isolatedModules: true, diagnostics: false, tsconfig: join(root, 'tsconfig.json') }] },
      moduleNameMapper: {
        // The storage, wherever the library's sources import it (the providers, index, the spec).
        '^\\./throttler\\.service$': join(suiteDir, 'storage.cjs'),
        // As an app loads it: the CommonJS build that `npm pack` ships (test.sh builds it).
        '^redis-rl/nestjs$': join(here, '../dist/cjs/src/adapters/nestjs.cjs'),
        // One copy of each, the suite's, as in an app: the storage's 503 is then the
        // HttpException the app's own @nestjs/common knows.
        '^@nestjs/common$': fromDeps.resolve('@nestjs/common'),
        '^ioredis$': fromDeps.resolve('ioredis'),
        '^@nest-lab/throttler-storage-redis$': fromDeps.resolve('@nest-lab/throttler-storage-redis'),
      },
    };
    const env = {
      RL_UPSTREAM_URL: server.url,
      RL_UPSTREAM_STORE: store,
      RL_UPSTREAM_ALGORITHM: algorithm ?? '',
    };
    const jestBin = join(deps, 'node_modules/jest/bin/jest.js');
    const { out } = await run('node', [jestBin, '--config', JSON.stringify(config), '--json', `--outputFile=${results}`,
      '--forceExit', '--maxWorkers=2', '--ci', ...(only ? [`--testPathPattern=${only}`] : [])], { cwd: root, env });
    if (process.env.RL_UPSTREAM_DEBUG) console.log(out);
    if (!existsSync(results)) throw new Error(`${NAME}: jest wrote no results:\n${out.slice(-4000)}`);
    const tests = [];
    for (const file of JSON.parse(readFileSync(results, 'utf8')).testResults) {
      const base = file.name.slice(root.length + 1);
      if (!file.assertionResults.length) tests.push({ name: base, status: 'failed', error: file.message });
      for (const a of file.assertionResults) {
        tests.push({ name: `${base} > ${a.fullName}`, status: a.status === 'pending' ? 'skipped' : a.status, error: a.failureMessages?.[0] });
      }
    }
    return tests;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
const measure = args.includes('--measure');
const verbose = args.includes('--verbose');
// --only=<regex>: the test files whose path matches (while working on one).
const only = args.find((a) => a.startsWith('--only='))?.slice(7);

if (!existsSync(join(upstream, `${TARBALL}.tar.gz`))) {
  console.log(`upstream ${NAME}: skipped, no ${TARBALL}.tar.gz in ${upstream} (set RL_UPSTREAM_SRC to the folder holding it)`);
  process.exit(0);
}
const deps = install(NAME);
const server = await startServer();
let failed = false;
const started = Date.now();
const secs = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
try {
  if (measure) {
    const row = [];
    for (const [store, algorithm] of [['stock'], ['ours'], ['ours', 'counter']]) {
      const tests = await runSuite(server, store, algorithm);
      row.push(count(tests));
      if (verbose) {
        for (const t of tests.filter((x) => x.status === 'failed')) {
          console.log(`  ${store}${algorithm ? ` ${algorithm}` : ''} FAIL ${t.name}\n     ${String(t.error ?? '').split('\n').slice(0, 8).join('\n     ')}`);
        }
      }
    }
    console.log(`| ${NAME} | ${row.join(' | ')} |  (${secs()})`);
  } else {
    // The library's own window (counter), so that every difference left is a raw-key
    // read, the stock boundary burst, or the environment; the default algorithm's numbers
    // are --measure's.
    const list = 'expected-differences.txt';
    const tests = await runSuite(server, 'ours', 'counter');
    const listed = expected(join(suiteDir, list));
    const found = problems(tests, listed, list);
    console.log(`upstream ${NAME} (counter): ${count(tests)} passed, ${listed.size} expected differences (${list}), ${found.length ? 'FAILED' : 'ok'} (${secs()})`);
    for (const p of found) console.log(`  ${p}`);
    if (found.length) failed = true;
  }
} finally {
  await server.stop();
}
process.exit(failed ? 1 : 0);
