// mocha --require hook: rate-limiter-flexible's own tests, unmodified, against the server
// the runner started (RLFLEX_PORT) instead of 6379, and, with RLFLEX_STORE=ours, with
// `require('../lib/RateLimiterRedis')` answered by redis-rl's adapter.
//   RLFLEX_PORT       the module-enabled redis-server's port
//   RLFLEX_STORE      'stock' (the library's RateLimiterRedis: the control) or 'ours'
//   RLFLEX_ALGORITHM  the adapter's algorithm (default: the adapter's default)
//   RLFLEX_ADAPTER    the adapter's CommonJS build
const Module = require('node:module');
const path = require('node:path');

const port = Number(process.env.RLFLEX_PORT);
if (!port) throw new Error('hook.cjs: set RLFLEX_PORT');
const upstream = path.resolve(process.cwd());
const lib = path.join(upstream, 'lib');
const ours = process.env.RLFLEX_STORE === 'ours';
const kit = path.resolve(__dirname, '../..');

const resolve = Module._resolveFilename;
Module._resolveFilename = function resolveFilename(request, parent, ...rest) {
  // The adapter's `rate-limiter-flexible` is the tree under test, not the kit's copy.
  if (request === 'rate-limiter-flexible') return path.join(upstream, 'index.js');
  if (request.startsWith('rate-limiter-flexible/')) return resolve.call(this, path.join(upstream, request.slice('rate-limiter-flexible/'.length)), parent, ...rest);
  // The adapter's clients are the tests' (ioredis 5, node-redis 4), not the kit's.
  if ((request === 'ioredis' || request === 'redis') && parent?.filename?.startsWith(kit)) {
    return resolve.call(this, request, { ...parent, paths: Module._nodeModulePaths(upstream), filename: path.join(upstream, 'x.js') }, ...rest);
  }
  const file = resolve.call(this, request, parent, ...rest);
  if (ours && file === path.join(lib, 'RateLimiterRedis.js') && parent && !parent.filename.startsWith(lib)) {
    return path.join(__dirname, 'store.cjs');
  }
  return file;
};

// The clients: the tests name 6379 (or nothing); both mean the runner's server.
const ioredis = require(require.resolve('ioredis', { paths: [upstream] }));
const connect = ioredis.prototype.connect;
ioredis.prototype.connect = function connectToRunnerServer(...args) {
  if (!this.options.port || this.options.port === 6379) this.options.port = port;
  return connect.apply(this, args);
};

const load = Module._load;
const redisRewritten = new Map();
Module._load = function loadModule(request, parent, ...rest) {
  const mod = load.call(this, request, parent, ...rest);
  if (request !== 'redis' || typeof mod.createClient !== 'function') return mod;
  if (!redisRewritten.has(mod)) {
    const toRunner = (o = {}) => ({ ...o, socket: { host: '127.0.0.1', ...o.socket, port } });
    redisRewritten.set(mod, {
      ...mod,
      createClient: (o) => mod.createClient(toRunner(o)),
      createCluster: (o) => mod.createCluster({ ...o, rootNodes: (o.rootNodes ?? []).map(toRunner) }),
    });
  }
  return redisRewritten.get(mod);
};
