// The scripts backend: the module's commands run as the kit's copy of the Lua scripts
// (scripts/*.lua), which have the module's contract: the same arguments, replies, error
// texts and keys. So a server that cannot load the module (most managed Redis) gives the
// same decisions, on the same keys, as one that has it.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export const BACKENDS = ['auto', 'module', 'scripts'];

const FILES = {
  'RL.FIXED': 'fixed',
  'RL.COUNTER': 'counter',
  'RL.SLIDECOUNT': 'slidecount',
  'RL.SLIDELOG': 'slidelog',
  'RL.SLIDEWINDOW': 'slidewindow',
  'RL.GCRA': 'gcra',
  'RL.TOKENBUCKET': 'tokenbucket',
  'RL.CONCURRENCY': 'concurrency',
  'RL.THROTTLE': 'throttle',
  'RL.ALL': 'all',
};

// The ESM source is src/backend.js, the CommonJS build dist/cjs/src/backend.cjs: both
// read the one copy of the scripts at the package's top.
const SCRIPTS_DIR = new URL(import.meta.url.endsWith('.cjs') ? '../../../scripts/' : '../scripts/', import.meta.url);

const loaded = new Map();

/** The script of a module command: { body, sha }, read once per process. */
export function scriptOf(command) {
  const name = String(command).toUpperCase();
  if (!loaded.has(name)) {
    const file = FILES[name];
    if (!file) throw new TypeError(`redis-rl: ${command} has no script`);
    const body = readFileSync(new URL(`${file}.lua`, SCRIPTS_DIR), 'utf8');
    loaded.set(name, { body, sha: createHash('sha1').update(body).digest('hex') });
  }
  return loaded.get(name);
}

/**
 * A module command line as its script: EVALSHA <sha> <numkeys> <keys...> <every argument
 * after the command's name, unchanged>. KEYS are the command's own keys (one per limit):
 * the per-window counters, the lease sets and the rest are named inside the script and
 * share the first key's slot through its {hash tag}, so a cluster routes the call by
 * the first key, as it does the module's command. `eval` sends the body instead (EVAL),
 * which also caches it under the same sha, after a NOSCRIPT.
 * @param {{ args: string[], keys: string[] }} cmd
 */
export function asScript({ args: [command, ...argv], keys }, { eval: withBody = false } = {}) {
  const { body, sha } = scriptOf(command);
  return { args: [withBody ? 'EVAL' : 'EVALSHA', withBody ? body : sha, String(keys.length), ...keys, ...argv], key: keys[0] };
}

/** Whether an error reply says the server has no such RL.* command (no module loaded);
 * Redis 7+ quotes the name with ', Redis 6.2 with `. */
export function isUnknownRlCommand(err) {
  return typeof err?.message === 'string' && /^ERR unknown command ['`]?RL\./i.test(err.message);
}

export const isNoScript = (err) => typeof err?.message === 'string' && err.message.startsWith('NOSCRIPT');
