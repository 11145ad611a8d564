// rate-limiter-flexible 11.1.0's own Redis tests (unmodified) against redis-rl's adapter,
// on a module-enabled redis-server on a free port. The tree and its test dependencies
// are unpacked once into .tools/rlflex-env (cached).
//   node run.mjs                 the adapter with algorithm 'counter', RateLimiterRedis's
//                                own window (make test)
//   node run.mjs --default       also with the adapter's default algorithm (sliding counter)
//   node run.mjs --stock         also the library's own RateLimiterRedis (the control)
// The raw-key tests never call done(), so each waits its 5.5 s timeout: about 90 s a run.
// Each run's failures must be exactly its expected-differences list: a listed test that
// passes fails the run, so the list only shrinks.
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startServer } from '../../test/support/servers.js';
import { upstream } from '../common.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const kit = resolve(here, '../..');
const env = resolve(kit, '../../.tools/rlflex-env');
const tree = join(env, 'rate-limiter-flexible-11.1.0');
const tarball = join(upstream, 'rate-limiter-flexible-11.1.0.tar.gz');
const FILES = ['test/RateLimiterRedis.ioredis.test.js', 'test/RateLimiterRedis.redis.test.js', 'test/BurstyRateLimiter.test.js'];
// The test dependencies at the versions the tree's package.json names.
const DEPS = ['chai@^4.5.0', 'mocha@^10.8.2', 'sinon@^17.0.2', 'ioredis@^5.10.1', 'redis@^4.7.1'];

function sh(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed`);
}

function prepare() {
  if (!existsSync(tarball)) {
    console.log(`rate-limiter-flexible upstream suite: skipped (no ${tarball})`);
    process.exit(0);
  }
  if (!existsSync(join(tree, 'package.json'))) {
    mkdirSync(env, { recursive: true });
    sh('tar', ['-xzf', tarball, '-C', env], kit);
  }
  if (!existsSync(join(env, 'node_modules/mocha/package.json'))) {
    writeFileSync(join(env, 'package.json'), '{ "name": "rlflex-env", "private": true }\n');
    sh('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...DEPS], env);
  }
}

// `name | why` lines; a line starting with `~ ` is a test whose outcome depends on where
// the call falls in the module's clock-aligned window: it may pass or fail.
const listOf = (file) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [])
  .map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  .map((l) => ({ name: l.replace(/^~ /, '').split(' | ')[0], either: l.startsWith('~ ') }));

// Two files share their describe titles: a test is named by its file and full title.
const name = (t) => `${basename(t.file ?? '')}: ${t.fullTitle}`;

async function suite(port, { store, algorithm }) {
  const mocha = join(env, 'node_modules/mocha/bin/mocha.js');
  const args = [mocha, '--require', join(here, 'hook.cjs'), '--reporter', 'json', '--exit', ...FILES];
  const childEnv = {
    ...process.env,
    RLFLEX_PORT: String(port),
    RLFLEX_STORE: store,
    RLFLEX_ADAPTER: join(kit, 'dist/cjs/src/adapters/rate-limiter-flexible.cjs'),
    ...(algorithm ? { RLFLEX_ALGORITHM: algorithm } : {}),
  };
  const { stdout } = await promisify(execFile)(process.execPath, args, { cwd: tree, env: childEnv, maxBuffer: 64 << 20, timeout: 300_000 })
    .catch((err) => (err.stdout ? { stdout: err.stdout } : Promise.reject(err)));
  const report = JSON.parse(stdout.slice(stdout.indexOf('{')));
  return {
    passed: report.passes.map(name),
    failed: report.failures.map((t) => ({ title: name(t), why: (t.err?.message ?? '').split('\n')[0] })),
    total: report.stats.tests,
  };
}

prepare();
const runs = [
  ...(process.argv.includes('--stock') ? [{ name: 'stock RateLimiterRedis', store: 'stock' }] : []),
  // Enforced with the library's own window, so that every difference left is one the
  // list can name for good (a raw-key read, the stock boundary burst, the environment).
  { name: 'redis-rl (counter)', store: 'ours', algorithm: 'counter', list: 'expected-differences.txt' },
  ...(process.argv.includes('--default') ? [{ name: 'redis-rl (default: slidecount)', store: 'ours', list: 'expected-differences.default.txt' }] : []),
];
const server = await startServer();
let ok = true;
try {
  for (const run of runs) {
    const r = await suite(server.port, run);
    console.log(`rate-limiter-flexible 11.1.0, ${run.name}: ${r.passed.length} / ${r.total} passed`);
    for (const f of r.failed) console.log(`  failed: ${f.title}: ${f.why}`);
    if (!run.list) continue;
    const list = listOf(join(here, run.list));
    const expected = new Set(list.map((e) => e.name));
    const either = new Set(list.filter((e) => e.either).map((e) => e.name));
    const failed = new Set(r.failed.map((f) => f.title));
    for (const t of failed) if (!expected.has(t)) { ok = false; console.log(`  NOT EXPECTED to fail: ${t}`); }
    for (const t of expected) {
      if (failed.has(t) || (either.has(t) && r.passed.includes(t))) continue;
      ok = false;
      console.log(`  listed in ${run.list} but ${r.passed.includes(t) ? 'passes: remove it' : 'did not run'}: ${t}`);
    }
    console.log(`  expected differences: ${expected.size - either.size}, timing-dependent: ${either.size} (${[...either].filter((t) => failed.has(t)).length} failed this run)`);
  }
} finally {
  await server.stop();
}
process.exit(ok ? 0 : 1);
