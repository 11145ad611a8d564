// Runs @nestjs/throttler 6's own tests (the storage spec and the e2e specs, jest,
// CommonJS) against redis-rl's RedisRlThrottlerStorage, with only the storage swapped by
// ./nestjs-throttler-6/storage.cjs, on one module-enabled redis-server on a free port.
// The tarball (../../../../shared/upstream) is unpacked into a scratch directory; the
// test dependencies are installed once into .tools/upstream-node/nestjs-throttler-6.
//
//   node upstream/nest.mjs              check: the failing tests must be exactly
//                                       nestjs-throttler-6/expected-differences.txt, and
//                                       on `fixed` expected-differences.fixed.txt
//   node upstream/nest.mjs --measure    counts for the stock Redis storage, ours (default)
//                                       and ours on `fixed` (--verbose: the failures)
// The waits in the tests step our storage's clock (see storage.cjs); RL_UPSTREAM_REALTIME=1
// makes them real (about 90 s a run; the stock storage always runs so).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../test/support/servers.js';

const NAME = 'nestjs-throttler-6';
const TARBALL = 'nestjs-throttler-6.5.1';
const here = dirname(fileURLToPath(import.meta.url));
const suiteDir = join(here, NAME);
const top = resolve(here, '../../..');
const upstream = resolve(top, process.env.RL_UPSTREAM_SRC ?? '../shared/upstream');
const deps = join(top, '.tools/upstream-node', NAME);

// The next four are run.mjs's, which exports nothing.
function install() {
  const want = readFileSync(join(suiteDir, 'package.json'), 'utf8');
  const stamp = join(deps, 'package.json');
  if (existsSync(join(deps, 'node_modules')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return;
  mkdirSync(deps, { recursive: true });
  writeFileSync(stamp, want);
  console.log(`upstream ${NAME}: installing its test dependencies into ${deps}`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], { cwd: deps, stdio: 'inherit' });
}

function run(cmd, args, { cwd, env }) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', fail);
    child.on('close', (code) => ok({ code, out }));
  });
}

/** expected-differences.txt: `test name :: why`, one per line; # starts a comment. */
function expected(list) {
  const file = join(suiteDir, list);
  if (!existsSync(file)) return new Map();
  return new Map(readFileSync(file, 'utf8').split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => {
      const at = l.lastIndexOf(' :: ');
      if (at < 0) throw new Error(`${file}: "${l}" has no " :: why"`);
      return [l.slice(0, at).trim(), l.slice(at + 4).trim()];
    }));
}

const count = (tests) => `${tests.filter((t) => t.status === 'passed').length} / ${tests.filter((t) => t.status !== 'skipped').length}`;

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
install();
const server = await startServer();
let failed = false;
const started = Date.now();
const secs = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
try {
  if (measure) {
    const row = [];
    for (const [store, algorithm] of [['stock'], ['ours'], ['ours', 'fixed']]) {
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
    // Both runs: on `fixed` the listed algorithm differences pass, so what fails there is
    // the storage's, not the algorithm's.
    for (const [algorithm, list] of [[undefined, 'expected-differences.txt'], ['fixed', 'expected-differences.fixed.txt']]) {
      const tests = await runSuite(server, 'ours', algorithm);
      const listed = expected(list);
      const seen = new Set(tests.map((t) => t.name));
      const problems = [];
      for (const t of tests) {
        if (t.status === 'failed' && !listed.has(t.name)) problems.push(`FAILED, not listed: ${t.name}\n      ${String(t.error ?? '').split('\n').slice(0, 6).join('\n      ')}`);
        if (t.status === 'passed' && listed.has(t.name)) problems.push(`PASSED, but listed (remove it from ${list}): ${t.name}`);
      }
      for (const n of listed.keys()) if (!seen.has(n)) problems.push(`listed, but no such test ran: ${n}`);
      // A suite that ran nothing (a broken config) must not look green.
      if (!tests.length) problems.push('no tests ran');
      console.log(`upstream ${NAME}${algorithm ? ` (${algorithm})` : ''}: ${count(tests)} passed, ${listed.size} expected differences (${list}), ${problems.length ? 'FAILED' : 'ok'} (${secs()})`);
      for (const p of problems) console.log(`  ${p}`);
      if (problems.length) failed = true;
    }
  }
} finally {
  await server.stop();
}
process.exit(failed ? 1 : 0);
