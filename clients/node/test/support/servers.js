// Real redis-server processes for the tests: standalone or a 3-node cluster, each on a free
// loopback port, the module loaded, killed by stop(). Every wait here is bounded.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { scriptOf } from '../../src/backend.js';

const kitDir = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const MODULE = resolve(kitDir, process.env.RL_MODULE ?? '../../target/release/libredis_rl.so');
export const SERVER = process.env.RL_SERVER ?? 'redis-server';
export const SECRET = 'some-test-secret';

/**
 * The backend this run tests (test.sh runs the suite once for each): 'module', servers
 * with the module; 'scripts', servers without it, where the kit (backend 'auto', the
 * default) decides through its scripts.
 */
export const BACKEND = process.env.RL_BACKEND ?? 'module';
export const ON_SCRIPTS = BACKEND === 'scripts';
if (!['module', 'scripts'].includes(BACKEND)) throw new Error(`RL_BACKEND must be module or scripts, got ${BACKEND}`);

export function freePort() {
  return new Promise((ok, fail) => {
    const srv = net.createServer().once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

/** Sends one inline command on a fresh socket and returns the raw reply text. */
export function rawCommand(port, line, timeoutMs = 1000) {
  return new Promise((ok, fail) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => { sock.destroy(); fail(new Error(`no reply to ${line}`)); }, timeoutMs);
    sock.on('error', (err) => { clearTimeout(timer); fail(err); });
    sock.on('data', (chunk) => {
      data += chunk;
      // Bulk replies ($n) are complete once the announced length has arrived.
      const bulk = /^\$(\d+)\r\n/.exec(data);
      if (bulk ? data.length >= bulk[0].length + Number(bulk[1]) + 2 : data.endsWith('\r\n')) {
        clearTimeout(timer);
        sock.end();
        ok(data);
      }
    });
    sock.write(`${line}\r\n`);
  });
}

async function until(what, check, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts one redis-server, with the module unless this run is the scripts backend's.
 * `module: false` starts it without the module, `module: true` with it; `persist: true`
 * keeps every write in an fsynced AOF, so that restart() loses nothing.
 * @returns {Promise<{port: number, url: string, stop: () => Promise<void>, dir: string}>}
 */
export async function startServer({ module = !ON_SCRIPTS, cluster = false, persist = false, extra = [] } = {}) {
  if (module && !existsSync(MODULE)) throw new Error(`module not found: ${MODULE} (set RL_MODULE)`);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rl-node-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--enable-module-command', 'yes',
    ...(persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'])];
  if (module) args.push('--loadmodule', MODULE);
  if (cluster) {
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'),
      '--cluster-port', String(await freePort()), '--cluster-node-timeout', '5000');
  }
  args.push(...extra);
  const server = { port, dir, url: `redis://127.0.0.1:${port}` };
  let proc;
  let exited;
  let dead = true;
  const launch = async () => {
    proc = spawn(SERVER, args, { env: { ...process.env, RL_SECRET: SECRET }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout.on('data', (d) => { log += d; });
    proc.stderr.on('data', (d) => { log += d; });
    dead = false;
    exited = new Promise((r) => proc.once('exit', r));
    exited.then(() => { dead = true; });
    try {
      await until(`redis-server on ${port}`, async () => {
        if (dead) throw Object.assign(new Error(`redis-server exited:\n${log}`), { fatal: true });
        return (await rawCommand(port, 'PING', 300)).startsWith('+PONG');
      });
    } catch (err) {
      proc.kill('SIGKILL');
      throw err;
    }
  };
  const kill = async () => {
    if (!dead) {
      proc.kill('SIGKILL');
      await exited;
    }
  };
  await launch();
  /** SIGKILL, then the same server again on the same port and data folder. */
  server.restart = async ({ downMs = 0, module: withModule } = {}) => {
    await kill();
    if (downMs) await new Promise((r) => setTimeout(r, downMs));
    // restart({ module: true }): the same server, now with the module.
    if (withModule !== undefined) {
      const at = args.indexOf('--loadmodule');
      if (at >= 0) args.splice(at, 2);
      if (withModule) args.push('--loadmodule', MODULE);
    }
    await launch();
  };
  server.stop = async () => {
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };
  return server;
}

/** Three primaries (with the module unless on the scripts backend), all slots assigned, cluster_state:ok on every node. */
export async function startCluster() {
  const nodes = [];
  try {
    for (let i = 0; i < 3; i++) nodes.push(await startServer({ cluster: true }));
    await promisify(execFile)('redis-cli', ['--cluster', 'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20000 });
    for (const n of nodes) {
      await until(`cluster_state:ok on ${n.port}`, async () => {
        const info = await rawCommand(n.port, 'CLUSTER INFO');
        return info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:3');
      });
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
  return { nodes, stop: () => Promise.all(nodes.map((n) => n.stop())) };
}

/** Sum of errorstat_MOVED over the given servers (INFO errorstats). */
export async function movedCount(nodes) {
  let total = 0;
  for (const n of nodes) {
    const info = await rawCommand(n.port, 'INFO errorstats');
    total += Number(/errorstat_MOVED:count=(\d+)/.exec(info)?.[1] ?? 0);
  }
  return total;
}

/**
 * Whether the server's module has RL.ALL and REFUND/RESET (added after the first
 * release); tests of those skip, saying so, on a module without them.
 */
export async function features(port) {
  // The scripts implement the whole contract of the current module.
  if (ON_SCRIPTS) return { all: true, refundReset: true, counter: true };
  // In a cluster the probe key may live on another node: follow one MOVED.
  const ask = async (line) => {
    const reply = await rawCommand(port, line);
    const moved = /^-MOVED \d+ [\d.]+:(\d+)/.exec(reply);
    return moved ? rawCommand(Number(moved[1]), line) : reply;
  };
  const all = await ask('RL.ALL 1 FIXED {probe}a 1 1 PEEK');
  const reset = await ask('RL.FIXED {probe}b 1 1 RESET');
  const counter = await ask('RL.COUNTER {probe}c 1 1 PEEK');
  return {
    all: !all.startsWith('-ERR unknown command'),
    refundReset: !reset.startsWith('-ERR syntax error'),
    counter: !counter.startsWith('-ERR unknown command'),
  };
}

/** A command as RESP, for rawCommand (a script's text does not fit an inline command). */
export const resp = (args) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`.slice(0, -2);

let blockProbe;
/**
 * Undefined when this run's backend has BLOCK, else the reason to skip a test that needs
 * it: the scripts may not implement the penalty box yet (asked once, on a bare server).
 */
export async function noBlock() {
  if (!ON_SCRIPTS) return undefined;
  blockProbe ??= (async () => {
    const { body } = scriptOf('RL.FIXED');
    const server = await startServer({ module: false });
    try {
      const reply = await rawCommand(server.port, resp(['EVAL', body, '0', '{probe}b', '1', '60', 'BLOCK', '10']));
      return /redis-rl scripts do not implement BLOCK/.test(reply) ? 'redis-rl scripts do not implement BLOCK' : undefined;
    } finally {
      await server.stop();
    }
  })();
  return blockProbe;
}

export const NO_ALL = 'the module at RL_MODULE has no RL.ALL yet';
export const NO_REFUND_RESET = 'the module at RL_MODULE has no REFUND/RESET yet';
export const NO_COUNTER = 'the module at RL_MODULE has no RL.COUNTER yet';
