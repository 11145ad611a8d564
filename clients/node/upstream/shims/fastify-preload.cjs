// Preloaded (NODE_OPTIONS=--require) into every test process of @fastify/rate-limit's own
// suite. It swaps two things, and nothing in the tests:
//  - the plugin's stores (`./store/LocalStore`, `./store/RedisStore` as index.js requires
//    them) for a Redis-backed one on the test server:
//      RL_UPSTREAM_STORE=ours   redis-rl's store (RL_UPSTREAM_ALGORITHM, default slidecount)
//      RL_UPSTREAM_STORE=stock  the plugin's own RedisStore (the control)
//    LocalStore's replacement gets a fresh name space per instance (each plugin
//    registration starts empty, as an in-memory store does) and the test's clock
//    (Date.now, which node:test's mock timers move), sent to the module as NOW;
//  - `ioredis`, so the tests' `new Redis({ host })` reach the test server's port.
// The plugin builds its built-in stores from two flags (continueExceeding,
// exponentialBackoff), not from its options, and ours needs the global `ban` too (a
// custom store gets them all): `fastify-plugin`, as index.js requires it, wraps the
// plugin so that the stand-ins read the options of the registration that builds them.
'use strict';
const Module = require('node:module');
const path = require('node:path');

const root = process.env.RL_UPSTREAM_ROOT;
const port = Number(process.env.RL_UPSTREAM_PORT);
const stock = process.env.RL_UPSTREAM_STORE === 'stock';
const algorithm = process.env.RL_UPSTREAM_ALGORITHM || undefined;
const realResolve = Module._resolveFilename;
const stores = { LocalStore: `${__filename}#LocalStore`, RedisStore: `${__filename}#RedisStore` };

Module._resolveFilename = function resolve(request, parent, ...rest) {
  const from = parent?.filename ?? '';
  if (from.startsWith(root) && !from.includes('node_modules')) {
    const m = /^\.\/store\/(LocalStore|RedisStore)(\.js)?$/.exec(request);
    if (m && path.dirname(from) === root) return stores[m[1]];
    if (request === 'ioredis') return `${__filename}#ioredis`;
    if (request === 'fastify-plugin' && from === path.join(root, 'index.js')) return `${__filename}#fastify-plugin`;
  }
  return realResolve.call(this, request, parent, ...rest);
};

const define = (id, exports) => {
  const m = new Module(id, module);
  m.filename = id;
  m.loaded = true;
  m.exports = exports;
  Module._cache[id] = m;
};

const realRedisPath = realResolve.call(Module, 'ioredis', { filename: path.join(root, 'index.js'), paths: Module._nodeModulePaths(root) });
const RealRedis = require(realRedisPath);
class TestRedis extends RealRedis {
  constructor(options = {}, ...rest) {
    super(typeof options === 'object' ? { ...options, port } : options, ...rest);
  }
}
define(`${__filename}#ioredis`, TestRedis);

// The options of the registration running now. The plugin builds its store before its
// first await, so a stand-in built inside that call reads them.
let registering = {};
const realFp = require(realResolve.call(Module, 'fastify-plugin', { filename: path.join(root, 'index.js'), paths: Module._nodeModulePaths(root) }));
define(`${__filename}#fastify-plugin`, (plugin, meta) => realFp(function fastifyRateLimit(fastify, settings) {
  registering = settings ?? {};
  try {
    return plugin(fastify, settings);
  } finally {
    registering = {};
  }
}, meta));

let shared;
// One connection for the stores that had none (LocalStore's stand-in). It holds the
// process open only while a reply is awaited, so that a test file's process can exit
// with it open, as with an in-memory store.
function sharedClient() {
  if (!shared) {
    shared = new RealRedis({ port });
    let pending = 0;
    const idle = () => { if (pending === 0) shared.stream?.unref?.(); };
    shared.on('connect', idle);
    const send = shared.sendCommand.bind(shared);
    shared.sendCommand = (command, ...rest) => {
      pending += 1;
      shared.stream?.ref?.();
      const reply = send(command, ...rest);
      command.promise.finally(() => { pending -= 1; idle(); }).catch(() => {});
      return reply;
    };
  }
  return shared;
}

let instances = 0;
const fresh = () => `fastify-rl-${process.pid}-${++instances}-`;

const StockRedisStore = () => require(path.join(root, 'store', 'RedisStore.js'));
// node:test's mock timers start Date at 0 (or a given time), and a mocked Date reads far
// before 2001; the module takes NOW as unix time. The algorithms that decide at NOW alone
// read the test's clock from a fixed epoch that keeps every step it makes. RL.COUNTER
// ends a window when its key expires on the server clock, so for it NOW is the real time
// plus the steps the test has made since it enabled the mock clock.
const EPOCH = Date.UTC(2025, 0, 1);
const realNow = Date.now.bind(Date);
let mockStart = 0;
const MockTimers = Object.getPrototypeOf(require('node:test').mock.timers);
const enable = MockTimers.enable;
MockTimers.enable = function enableAndMark(...args) {
  const result = enable.apply(this, args);
  mockStart = Date.now();
  return result;
};
const mocked = () => Date.now() < 1e12;
const clock = algorithm === 'counter'
  ? () => (mocked() ? realNow() + Date.now() - mockStart : Date.now())
  : () => (mocked() ? EPOCH + Date.now() : Date.now());
function ours(continueExceeding, exponentialBackoff, client, nameSpace) {
  const { redisRlStore } = require('../../src/adapters/fastify.js');
  // The first call connects and finds the backend; on a busy machine that can take more
  // than the default 300 ms, and a timed-out call is a 500 the test did not earn. A slow
  // reply still fails its test, never passes it.
  const Store = redisRlStore({ client, nameSpace, algorithm, clock, timeout: 5000 });
  return new Store({ continueExceeding, exponentialBackoff, ban: registering.ban });
}

function LocalStore(continueExceeding, exponentialBackoff) {
  if (stock) return new (StockRedisStore())(continueExceeding, exponentialBackoff, sharedClient(), fresh());
  return ours(continueExceeding, exponentialBackoff, sharedClient(), fresh());
}
function RedisStore(continueExceeding, exponentialBackoff, redis, nameSpace) {
  if (stock) return new (StockRedisStore())(continueExceeding, exponentialBackoff, redis, nameSpace);
  return ours(continueExceeding, exponentialBackoff, redis, nameSpace);
}
define(stores.LocalStore, LocalStore);
define(stores.RedisStore, RedisStore);
