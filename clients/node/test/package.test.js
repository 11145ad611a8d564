// The published artifact, installed as a user installs it: `npm pack`, then a fresh
// `npm init -y` app (CommonJS) that runs `npm install ./redis-rl-x.y.z.tgz express ioredis`,
// runs the quickstart (require and import) against a real server, and keeps working after
// its next plain `npm install` (a copy, not a symlink; the kit's own dependencies resolved).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, lstatSync, mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startServer } from './support/servers.js';
import { assertShown } from './support/shown.js';

const run = promisify(execFile);
const kit = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { version } = JSON.parse(readFileSync(join(kit, 'package.json'), 'utf8'));
const tarball = `redis-rl-${version}.tgz`;
// The kit's own install filled npm's cache with express and ioredis: no need to go out.
const npm = (args, cwd) => run('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd, timeout: 180_000 });

let redis;
let app;
before(async () => {
  redis = await startServer();
  app = mkdtempSync(join(tmpdir(), 'rl-node-app-'));
  await npm(['pack', '--pack-destination', app], kit);
  await npm(['init', '-y'], app);
  // With rate-limiter-flexible, the adapter that loads its library at import time, so
  // that every entry point loads.
  await npm(['install', `./${tarball}`, 'express', 'ioredis', 'rate-limiter-flexible'], app);
  copyFileSync(join(kit, 'examples/quickstart.cjs'), join(app, 'app.js'));
  copyFileSync(join(kit, 'examples/quickstart.mjs'), join(app, 'app.mjs'));
  copyFileSync(join(kit, 'examples/rate-limiter-flexible.cjs'), join(app, 'rlflex.js'));
  copyFileSync(join(kit, 'examples/express-metrics.cjs'), join(app, 'metrics.js'));
});
after(async () => {
  await redis?.stop();
  if (app) rmSync(app, { recursive: true, force: true });
});

// Starts `node file` in the app, waits for its "listening on URL" line, returns the URL.
async function startApp(file) {
  const proc = spawn(process.execPath, [file], {
    cwd: app,
    env: { ...process.env, PORT: '0', REDIS_URL: redis.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${file} did not start:\n${out}`)), 15_000);
    const onData = (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) { clearTimeout(timer); ok(m[1]); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', (d) => { out += d; });
    proc.once('exit', (code) => { clearTimeout(timer); fail(new Error(`${file} exited ${code}:\n${out}`)); });
  });
  return { url, stop: () => { proc.kill('SIGKILL'); return new Promise((r) => proc.once('close', r)); }, output: () => out };
}

// Five requests a minute per client: five answers 200 with the headers, the sixth 429.
async function assertQuickstart(file) {
  // Each run starts from an empty limit (the identity is the same loopback address).
  await run('redis-cli', ['-p', String(redis.port), 'FLUSHALL']);
  const server = await startApp(file);
  try {
    const statuses = [];
    let last;
    for (let i = 0; i < 6; i++) {
      last = await fetch(server.url);
      statuses.push(last.status);
      await last.arrayBuffer();
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429], server.output());
    assert.equal(last.headers.get('ratelimit-policy'), '"per-minute";q=5;w=60');
    assert.match(last.headers.get('ratelimit'), /^"per-minute";r=0;t=\d+$/);
    assert.ok(Number(last.headers.get('retry-after')) > 0);
  } finally {
    await server.stop();
  }
}

describe('the packed package in a fresh npm init app', () => {
  it('packs the CommonJS build, the types and the license', async () => {
    const { stdout } = await npm(['pack', '--dry-run', '--json'], kit);
    const files = JSON.parse(stdout)[0].files.map((f) => f.path);
    for (const f of ['LICENSE', 'package.json', 'index.js', 'index.d.ts', 'dist/cjs/index.cjs', 'dist/cjs/index.d.cts',
      'dist/cjs/src/adapters/nestjs.cjs', 'dist/cjs/src/adapters/rate-limiter-flexible.cjs', 'src/metrics.js', 'dist/cjs/src/metrics.cjs']) {
      assert.ok(files.includes(f), `${f} is not in the tarball: ${files.join(', ')}`);
    }
    assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('node_modules/')), files.join(', '));
  });

  it('is installed as a copy with its dependency', () => {
    assert.ok(!lstatSync(join(app, 'node_modules/redis-rl')).isSymbolicLink());
    assert.ok(existsSync(join(app, 'node_modules/cluster-key-slot/package.json')));
  });

  it('every entry point loads with require and with import', async () => {
    const subpaths = ['redis-rl', 'redis-rl/express-rate-limit', 'redis-rl/nestjs', 'redis-rl/fastify', 'redis-rl/rate-limiter-flexible'];
    const names = { 'redis-rl': 'createRateLimiter', 'redis-rl/express-rate-limit': 'RedisRlStore', 'redis-rl/nestjs': 'RedisRlThrottlerStorage', 'redis-rl/fastify': 'redisRlStore', 'redis-rl/rate-limiter-flexible': 'RateLimiterRedisRl' };
    for (const s of subpaths) {
      const cjs = `const m = require(${JSON.stringify(s)}); if (typeof m.${names[s]} !== 'function') throw new Error('no ${names[s]}'); console.log(require.resolve(${JSON.stringify(s)}))`;
      const { stdout } = await run(process.execPath, ['-e', cjs], { cwd: app });
      assert.match(stdout, /dist\/cjs\/.*\.cjs$/m, s);
      const esm = `const m = await import(${JSON.stringify(s)}); if (typeof m.${names[s]} !== 'function') throw new Error('no ${names[s]}'); console.log(import.meta.resolve(${JSON.stringify(s)}))`;
      const { stdout: out } = await run(process.execPath, ['--input-type=module', '-e', esm], { cwd: app });
      assert.match(out, /redis-rl\/(index|src\/adapters\/[\w-]+)\.js$/m, s);
    }
  });

  it('runs the CommonJS quickstart as app.js', () => assertQuickstart('app.js'));

  it('runs the ESM quickstart as app.mjs', () => assertQuickstart('app.mjs'));

  it('runs the rate-limiter-flexible example as rlflex.js, blockDuration included', async () => {
    await run('redis-cli', ['-p', String(redis.port), 'FLUSHALL']);
    const { stdout } = await run(process.execPath, ['rlflex.js'], { cwd: app, env: { ...process.env, REDIS_URL: redis.url }, timeout: 15_000 });
    assertShown('rate-limiter-flexible.out', stdout); // what docs/frameworks/rate-limiter-flexible.md shows
  });

  it('works without prom-client (an optional peer), and asks for it when metrics are turned on', async () => {
    assert.ok(!existsSync(join(app, 'node_modules/prom-client')), 'npm installed the optional peer');
    const make = "createRateLimiter({ client: { sendCommand() {} }, failure: 'open', metrics: true })";
    const cjs = `const { createRateLimiter } = require('redis-rl'); ${make.replace('true', 'false')}; ${make}`;
    const esm = `import { createRateLimiter } from 'redis-rl'; ${make.replace('true', 'false')}; ${make}`;
    for (const args of [['-e', cjs], ['--input-type=module', '-e', esm]]) {
      await assert.rejects(run(process.execPath, args, { cwd: app }), (err) => /metrics need prom-client, which is not installed: npm install prom-client/.test(err.stderr));
    }
  });

  it("keeps working after the app's next plain npm install", async () => {
    await npm(['install'], app);
    assert.ok(!lstatSync(join(app, 'node_modules/redis-rl')).isSymbolicLink());
    assert.ok(existsSync(join(app, 'node_modules/cluster-key-slot/package.json')));
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    assert.equal(pkg.dependencies['redis-rl'], `file:${tarball}`);
    await assertQuickstart('app.js');
  });

  it('with prom-client installed, the metrics example serves /metrics as metrics.js', async () => {
    await npm(['install', 'prom-client'], app);
    await run('redis-cli', ['-p', String(redis.port), 'FLUSHALL']);
    const server = await startApp('metrics.js');
    try {
      await (await fetch(server.url)).arrayBuffer();
      const text = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(text, /^redis_rl_decisions_total\{limit="per-minute",outcome="allowed",backend="module"\} 1$/m, text);
      assert.match(text, /^redis_rl_call_duration_seconds_count\{limit="per-minute"\} 1$/m, text);
    } finally {
      await server.stop();
    }
  });
});
