// What every adapter suite does the same way: the boundary burst on two clocks, a
// restart under traffic, an HTTP server to fetch from.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before } from 'node:test';
import { ioredisClient } from './clients.js';
import { startServer } from './servers.js';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The boundary burst of the seed page on windows that start at the first hit (what the
// libraries' stock stores count): the first request opens the window, 7 more arrive
// just before it ends and 8 just after. 16 requests in little more than one window;
// the last 15 within DELTA + EPSILON.
export const BURST_WINDOW_MS = 2000;
const DELTA = 400;
const EPSILON = 250;
export const BURST_PATTERN = [[0, 1], [BURST_WINDOW_MS - DELTA, 7], [BURST_WINDOW_MS + EPSILON, 8]];

/**
 * Runs the pattern on a stepped clock and returns how many were admitted.
 * @param {(ms: number) => Promise<void>} at sets the clock to ms after the start
 * @param {() => Promise<boolean>} hit one request; true when admitted
 */
export async function boundaryBurst(at, hit) {
  return (await run(at, hit)).admitted;
}

// Each group is sent at once, so that it takes little time even on a loaded machine.
async function run(at, hit) {
  let admitted = 0;
  const spans = [];
  for (const [ms, n] of BURST_PATTERN) {
    await at(ms);
    const start = performance.now();
    const results = await Promise.all(Array.from({ length: n }, () => hit()));
    spans.push([start, performance.now()]);
    admitted += results.filter(Boolean).length;
  }
  return { admitted, spans };
}

/**
 * The same pattern in real time, for a stock store that counts on the server's clock.
 * The run only counts if the groups really fell on either side of the window's end (its
 * start is somewhere in the first request's round trip); on a machine too loaded for
 * that it runs again, with a fresh identity from `newHit()`, up to 3 times.
 */
export async function realTimeBurst(newHit) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const { admitted, spans: [[openStart, openEnd], [, beforeEnd], [afterStart]] } = await run(realTime(), newHit());
    if (beforeEnd < openStart + BURST_WINDOW_MS && afterStart > openEnd + BURST_WINDOW_MS) return admitted;
  }
  throw new Error('the machine was too slow to place the burst on both sides of the window boundary, 3 times');
}

/**
 * The boundary burst on a library's stock store, in real time, then on the module with
 * each algorithm, on a stepped clock from `start`: `{ stock, slidecount, slidelog, gcra,
 * fixed }`, each the number admitted of 16. `stock()` and `ours(algorithm, clock)`
 * resolve to `{ admit(id) }` (true when a request for `id` passes) and, when they hold
 * a server, `close()`. With `counter`, also `counter`: the module's RL.COUNTER, whose
 * window starts at the first hit on the server clock, so it runs in real time as the
 * stock store does (no NOW).
 */
export async function burstResults({ freshId, start, stock, ours, counter = false }) {
  const results = {};
  const theirs = await stock();
  try {
    results.stock = await realTimeBurst(() => {
      const id = freshId();
      return () => theirs.admit(id);
    });
  } finally {
    await theirs.close?.();
  }
  for (const algorithm of ['slidecount', 'slidelog', 'gcra', 'fixed']) {
    const time = steppedTime(start);
    const limiter = await ours(algorithm, time.clock);
    try {
      const id = freshId();
      results[algorithm] = await boundaryBurst(time.at, () => limiter.admit(id));
    } finally {
      await limiter.close?.();
    }
  }
  if (counter) {
    const limiter = await ours('counter', undefined);
    try {
      results.counter = await realTimeBurst(() => {
        const id = freshId();
        return () => limiter.admit(id);
      });
    } finally {
      await limiter.close?.();
    }
  }
  return results;
}

/** An app a suite built (`hit(id)`, `close()`) as `burstResults` takes it: 200 passes. */
export function admitting(app) {
  return { admit: async (id) => (await app.hit(id)).status === 200, close: () => app.close() };
}

/** Real time from now: at(ms) sleeps until then. */
function realTime() {
  const start = performance.now();
  return async (ms) => {
    const wait = start + ms - performance.now();
    if (wait > 0) await sleep(wait);
  };
}

/** A stepped clock: `clock` for the store, at(ms) sets it to start + ms. */
export function steppedTime(start) {
  const time = { now: start };
  return { clock: () => time.now, at: async (ms) => { time.now = start + ms; } };
}

/**
 * Traffic while the server is killed (SIGKILL) and started again on its fsynced AOF.
 * `request()` resolves to 'admitted' | 'denied' | 'failure' (the library's failure path).
 * Returns the counts; with a fixed clock and a limit L, 'admitted' must be exactly L.
 */
export async function restartUnderTraffic(server, request, { before = 5, after = 40 } = {}) {
  const counts = { admitted: 0, denied: 0, failure: 0 };
  const one = async () => { counts[await request()] += 1; };
  for (let i = 0; i < before; i++) await one();
  let restarting = true;
  const restart = server.restart({ downMs: 150 }).finally(() => { restarting = false; });
  // Traffic goes on while the server is down and while it starts again.
  while (restarting) {
    await one();
    await sleep(20);
  }
  await restart;
  // The clients reconnect with a backoff: keep going until Redis decides again.
  const deadline = Date.now() + 5000;
  let decided = 0;
  while (decided < after && Date.now() < deadline) {
    const before2 = counts.failure;
    await one();
    if (counts.failure === before2) decided += 1;
    else await sleep(50);
  }
  return counts;
}

/** An http.Server on a free loopback port, and fetch against it. */
export async function listen(server) {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    get: async (path = '/') => {
      const res = await fetch(base + path);
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
    close: () => new Promise((ok) => { server.closeAllConnections?.(); server.close(ok); }),
  };
}

// The kit's 300 ms timeout is tested in failure.test.js; where a test counts decisions,
// a machine shared by many builds must not turn a slow reply into a failure.
export const SLOW_OK = 5000;

// One server (with the module on its backend's run) and one ioredis connection for a whole test file, and
// identities that never repeat within it.
export function sharedServer() {
  let ids = 0;
  const shared = { freshId: () => `user-${++ids}` };
  before(async () => {
    shared.redis = await startServer();
    // ioredis's own command timeout too: a first script call is three round trips.
    shared.conn = await ioredisClient(shared.redis.port, { commandTimeout: SLOW_OK });
  });
  after(async () => {
    await shared.conn?.close();
    await shared.redis?.stop();
  });
  return shared;
}

// What a restart under traffic (restartUnderTraffic) must show: exactly the limit
// admitted across it, the rest denied, the traffic really met the down server, and no
// NOSCRIPT among the reported errors.
export function assertNothingLost(counts, errors, limit) {
  assert.equal(counts.admitted, limit, JSON.stringify(counts));
  assert.ok(counts.denied > 10, JSON.stringify(counts));
  assert.ok(counts.failure > 0, `the traffic met the restart: ${JSON.stringify(counts)}`);
  assert.ok(errors.every((m) => !/NOSCRIPT/.test(m)));
}
