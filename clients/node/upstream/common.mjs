// What the upstream runners (run.mjs, nest.mjs) share: where the tarballs and the
// installed test dependencies are, running a suite's process, and checking its results
// against an expected-differences list.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const top = resolve(here, '../../..');
export const upstream = resolve(top, process.env.RL_UPSTREAM_SRC ?? '../shared/upstream');
const tools = resolve(top, '.tools/upstream-node');

/** Installs ./<name>/package.json's test dependencies once into .tools/upstream-node/<name>. */
export function install(name) {
  const want = readFileSync(join(here, name, 'package.json'), 'utf8');
  const dir = join(tools, name);
  const stamp = join(dir, 'package.json');
  if (existsSync(join(dir, 'node_modules')) && existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return dir;
  mkdirSync(dir, { recursive: true });
  writeFileSync(stamp, want);
  console.log(`upstream ${name}: installing its test dependencies into ${dir}`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], { cwd: dir, stdio: 'inherit' });
  return dir;
}

export function run(cmd, args, { cwd, env }) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', fail);
    child.on('close', (code) => ok({ code, out }));
  });
}

/**
 * An expected-differences list: `test name :: why`, one per line; # starts a comment. A
 * line starting `~ ` is a test that may pass or fail here (it depends on the environment
 * and fails on the stock store too).
 */
export function expected(file) {
  if (!existsSync(file)) return new Map();
  return new Map(readFileSync(file, 'utf8').split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => {
      const at = l.lastIndexOf(' :: ');
      if (at < 0) throw new Error(`${file}: "${l}" has no " :: why"`);
      const either = l.startsWith('~ ');
      return [l.slice(either ? 2 : 0, at).trim(), { why: l.slice(at + 4).trim(), either }];
    }));
}

export const count = (tests) => `${tests.filter((t) => t.status === 'passed').length} / ${tests.filter((t) => t.status !== 'skipped').length}`;

/** What is wrong with `tests` against the list `listed` (named `list` in the messages). */
export function problems(tests, listed, list) {
  const seen = new Set(tests.map((t) => t.name));
  const found = [];
  for (const t of tests) {
    if (t.status === 'failed' && !listed.has(t.name)) found.push(`FAILED, not listed: ${t.name}\n      ${String(t.error ?? '').split('\n').slice(0, 6).join('\n      ')}`);
    if (t.status === 'passed' && listed.has(t.name) && !listed.get(t.name).either) found.push(`PASSED, but listed (remove it from ${list}): ${t.name}`);
  }
  for (const n of listed.keys()) if (!seen.has(n)) found.push(`listed, but no such test ran: ${n}`);
  // A suite that ran nothing (a broken config) must not look green.
  if (!tests.length) found.push('no tests ran');
  return found;
}
