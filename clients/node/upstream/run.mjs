// Runs the rate-limit libraries' own test suites against redis-rl's adapters, with only
// the store swapped by the shims in ./shims, on one module-enabled redis-server on a free
// port. Each suite's tarball (../../../../shared/upstream) is unpacked into a scratch
// directory; its test dependencies are installed once into .tools/upstream-node/<suite>.
//
//   node upstream/run.mjs [suite…]             check, with the library's own window
//                                              (algorithm 'counter'): the failing tests
//                                              must be exactly the suite's
//                                              expected-differences.txt
//   node upstream/run.mjs --measure [suite…]   counts for the stock store, ours (default
//                                              algorithm) and ours with 'counter'
//   --only=<regex>                             the test files whose path matches (while
//                                              working on one); --verbose: the failures
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { startServer } from '../test/support/servers.js';
import { count, expected, here, install, problems, run, upstream } from './common.mjs';

const kitModules = resolve(here, '../node_modules');

const jest = (files, extra = {}) => ({
  runner: 'jest',
  files,
  ...extra,
});

const SUITES = {
  'express-rate-limit-8': jest(['headers-test.ts', 'middleware-test.ts', 'options-test.ts'].map((f) => `test/library/${f}`), {
    tarball: 'express-rate-limit-8.6.2', stockStore: join(kitModules, 'rate-limit-redis/dist/index.mjs'), libraryAlgorithm: 'counter',
  }),
  'express-rate-limit-7': jest(['headers-test.ts', 'middleware-test.ts', 'options-test.ts'].map((f) => `test/library/${f}`), {
    tarball: 'express-rate-limit-7.5.1', stockStore: join(kitModules, 'rate-limit-redis-4/dist/index.mjs'), libraryAlgorithm: 'counter',
  }),
  // Every file of test/, redis-rate-limit.test.js (the plugin's own RedisStore, swapped
  // too) counted apart in --measure.
  'fastify-rate-limit-11': { runner: 'node-test', tarball: 'fastify-rate-limit-11.2.0', libraryAlgorithm: 'counter', apart: 'redis-rate-limit.test.js' },
  'fastify-rate-limit-10': { runner: 'node-test', tarball: 'fastify-rate-limit-10.3.0', libraryAlgorithm: 'counter', apart: 'redis-rate-limit.test.js' },
};

function unpack(suite) {
  const scratch = mkdtempSync(join(tmpdir(), 'rl-upstream-'));
  execFileSync('tar', ['xzf', join(upstream, `${suite.tarball}.tar.gz`), '-C', scratch]);
  return join(scratch, suite.tarball);
}

async function runJest(name, suite, root, env) {
  const results = join(root, 'results.json');
  const config = {
    rootDir: root,
    testEnvironment: 'node',
    testTimeout: 30000,
    // A client's socket I/O runs on these: frozen, no Redis-backed store gets a reply
    // (the stock one neither). setTimeout and Date stay fake, as the tests want them.
    fakeTimers: { doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] },
    extensionsToTreatAsEsm: ['.ts'],
    // Type-checking is not what these tests test; transpiling file by file is much faster.
    transform: { '^.+\\.tsx?$': ['ts-jest', { useESM: true, isolatedModules: true, diagnostics: false, tsconfig: { module: 'ESNext', moduleResolution: 'Bundler', target: 'ES2022', esModuleInterop: true, isolatedModules: true } }] },
    testMatch: suite.files.map((f) => `<rootDir>/${f}`),
    moduleFileExtensions: ['js', 'mjs', 'jsx', 'json', 'ts', 'tsx'],
    moduleNameMapper: {
      '^\\./memory-store(\\.js)?$': join(here, 'shims/express-rate-limit-store.mjs'),
      '^(\\.{1,2}/.*)\\.js$': '$1',
    },
  };
  const jestBin = join(root, 'node_modules/jest/bin/jest.js');
  const { out } = await run('node', ['--experimental-vm-modules', '--no-warnings', jestBin, '--config', JSON.stringify(config),
    '--json', `--outputFile=${results}`, '--forceExit', '--maxWorkers=2', '--ci'], { cwd: root, env });
  if (process.env.RL_UPSTREAM_DEBUG) console.log(out);
  if (!existsSync(results)) throw new Error(`${name}: jest wrote no results:\n${out.slice(-4000)}`);
  const json = JSON.parse(readFileSync(results, 'utf8'));
  const tests = [];
  for (const file of json.testResults) {
    const base = file.name.slice(root.length + 1);
    if (!file.assertionResults.length) tests.push({ name: `${base}`, status: 'failed', error: file.message });
    for (const a of file.assertionResults) {
      tests.push({ name: `${base} > ${a.fullName}`, status: a.status === 'pending' ? 'skipped' : a.status, error: a.failureMessages?.[0] });
    }
  }
  return tests;
}

async function runNodeTest(name, suite, root, env) {
  const results = join(root, 'results.jsonl');
  const { out } = await run('node', ['--test', '--test-concurrency=1', '--test-timeout=60000',
    `--test-reporter=${join(here, 'shims/node-test-reporter.mjs')}`, `--test-reporter-destination=${results}`,
    ...(suite.files ?? ['test/']).map(String)],
  { cwd: root, env: { ...env, RL_UPSTREAM_ROOT: root, NODE_OPTIONS: `--require ${join(here, 'shims/fastify-preload.cjs')}` } });
  if (!existsSync(results)) throw new Error(`${name}: node --test wrote no results:\n${out.slice(-4000)}`);
  return readFileSync(results, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    .map((t) => ({ ...t, name: `${t.file} > ${t.name}` }));
}

// A suite's test files under test/ (node:test suites run them all unless told).
const testFiles = (root) => readdirSync(join(root, 'test'), { recursive: true }).map(String)
  .filter((f) => f.endsWith('.test.js')).map((f) => `test/${f}`).sort();

async function runSuite(name, server, store, algorithm) {
  const deps = install(name);
  const root = unpack(SUITES[name]);
  let chosen = SUITES[name].files;
  if (only) chosen = (chosen ?? testFiles(root)).filter((f) => new RegExp(only).test(f));
  const suite = chosen ? { ...SUITES[name], files: chosen } : SUITES[name];
  try {
    symlinkSync(join(deps, 'node_modules'), join(root, 'node_modules'));
    const env = {
      RL_UPSTREAM_URL: server.url,
      RL_UPSTREAM_PORT: String(server.port),
      RL_UPSTREAM_STORE: store,
      RL_UPSTREAM_ALGORITHM: algorithm ?? '',
      RL_UPSTREAM_STOCK_STORE: suite.stockStore ?? '',
    };
    return await (suite.runner === 'jest' ? runJest : runNodeTest)(name, suite, root, env);
  } finally {
    rmSync(dirname(root), { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
const measure = args.includes('--measure');
const verbose = args.includes('--verbose');
const only = args.find((a) => a.startsWith('--only='))?.slice(7);
const names = args.filter((a) => !a.startsWith('--'));
const chosen = names.length ? names : Object.keys(SUITES);
for (const n of chosen) if (!SUITES[n]) throw new Error(`unknown suite ${n} (${Object.keys(SUITES).join(', ')})`);

if (!existsSync(upstream)) {
  console.log(`upstream ${chosen.join(', ')}: skipped, no upstream tarballs at ${upstream} (set RL_UPSTREAM_SRC to a folder holding ${chosen.map((n) => `${SUITES[n].tarball}.tar.gz`).join(', ')})`);
  process.exit(0);
}
const server = await startServer();
let failed = false;
try {
  for (const name of chosen) {
    const started = Date.now();
    if (measure) {
      const row = [];
      for (const [store, algorithm] of [['stock'], ['ours'], ...(process.env.RL_UPSTREAM_ALGORITHMS ?? SUITES[name].libraryAlgorithm).split(',').map((a) => ['ours', a])]) {
        const tests = await runSuite(name, server, store, algorithm);
        const { apart } = SUITES[name];
        const isApart = (t) => t.name.startsWith(`${apart} >`);
        row.push(apart ? `${count(tests.filter(isApart))}; rest ${count(tests.filter((t) => !isApart(t)))}` : count(tests));
        if (verbose) for (const t of tests) if (t.status === "failed") console.log(`  ${store}${algorithm ? ` ${algorithm}` : ""} FAIL ${t.name}\n     ${String(t.error ?? "").split("\n").slice(0, 8).join("\n     ")}`);
      }
      console.log(`| ${name} | ${row.join(' | ')} |  (${((Date.now() - started) / 1000).toFixed(0)} s)`);
      continue;
    }
    // The enforced run takes the library's own window (counter), so that every difference
    // left is a raw-key read, the stock boundary burst, or the environment; the default
    // algorithm's numbers are --measure's.
    const tests = await runSuite(name, server, 'ours', SUITES[name].libraryAlgorithm);
    const listed = expected(join(here, name, 'expected-differences.txt'));
    const found = problems(tests, listed, 'expected-differences.txt');
    const secs = ((Date.now() - started) / 1000).toFixed(0);
    console.log(`upstream ${name}: ${count(tests)} passed, ${listed.size} expected differences, ${found.length ? 'FAILED' : 'ok'} (${secs} s)`);
    for (const p of found) console.log(`  ${p}`);
    if (found.length) failed = true;
  }
} finally {
  await server.stop();
}
process.exit(failed ? 1 : 0);
