// The framework quickstarts in docs/frameworks/{express-rate-limit,fastify,nestjs}.md are
// these files: each runs as `node app.js` (CommonJS) against a real module-enabled server,
// and its sixth request in a minute is refused. The middleware and RL.THROTTLE examples
// of docs/frameworks/node.md run too, and print what the page shows (examples/*.out).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { BACKEND, SECRET, noBlock, startServer } from './support/servers.js';
import { assertShown, curlText } from './support/shown.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../examples');

let redis;
before(async () => { redis = await startServer(); });
after(async () => { await redis?.stop(); });

async function startApp(file, redisUrl = redis.url) {
  const proc = spawn(process.execPath, [join(examples, file)], {
    env: { ...process.env, PORT: '0', REDIS_URL: redisUrl, RL_SECRET: SECRET },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${file} did not start:\n${out}`)), 20_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    proc.stderr.on('data', (d) => { out += d; });
    proc.once('exit', (code) => { clearTimeout(timer); fail(new Error(`${file} exited ${code}:\n${out}`)); });
  });
  return { url, output: () => out, stop: () => { proc.kill('SIGKILL'); return new Promise((r) => proc.once('close', r)); } };
}

describe('framework quickstarts', () => {
  for (const [file, retryAtLeast] of [['express-rate-limit.cjs', 1], ['fastify.cjs', 1], ['nestjs.cjs', 299]]) {
    it(`${file}: five requests a minute pass, the sixth is refused with its Retry-After`, async (t) => {
      // The Nest quickstart blocks for 5 minutes after a denial (blockDuration).
      const skip = file === 'nestjs.cjs' && await noBlock();
      if (skip) return t.skip(skip);
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
        // Nest's blockDuration: the wait is the 5-minute block, not the minute.
        assert.ok(Number(last.headers.get('retry-after')) >= retryAtLeast, `retry-after ${last.headers.get('retry-after')}`);
      } finally {
        await server.stop();
      }
    });
  }
});

describe('the metrics example', () => {
  it('express-metrics.cjs: /metrics shows the five admitted and the one refused, scrapes uncounted', async () => {
    const server = await startApp('express-metrics.cjs');
    try {
      const statuses = [];
      for (let i = 0; i < 6; i++) {
        const r = await fetch(server.url);
        statuses.push(r.status);
        await r.arrayBuffer();
        // Scrapes in between are neither limited nor counted.
        await (await fetch(`${server.url}/metrics`)).text();
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429], server.output());
      const scrape = await fetch(`${server.url}/metrics`);
      assert.match(scrape.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
      const text = await scrape.text();
      const lines = text.split('\n').filter((l) => l.startsWith('redis_rl_decisions_total') || l.startsWith('redis_rl_call_duration_seconds_count'));
      assert.deepEqual(lines.sort(), [
        'redis_rl_call_duration_seconds_count{limit="per-minute"} 6',
        `redis_rl_decisions_total{limit="per-minute",outcome="allowed",backend="${BACKEND}"} 5`,
        `redis_rl_decisions_total{limit="per-minute",outcome="denied",backend="${BACKEND}"} 1`,
      ], text);
      // The app's own metrics are in the same registry.
      assert.match(text, /^process_cpu_user_seconds_total /m);
    } finally {
      await server.stop();
    }
  });
});

describe('the middleware example of docs/frameworks/node.md', () => {
  it('express-middleware.mjs: the first and fourth answers, then an answer while Redis is down, as shown', async () => {
    const own = await startServer(); // stopped halfway
    const server = await startApp('express-middleware.mjs', own.url);
    try {
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await curlText(await fetch(server.url)));
      // The burst's remaining count depends on how fast the requests came.
      assertShown('express-middleware.out', answers[0] + answers[3], [/"burst";r=\d+/g]);
      await own.stop();
      const offline = await curlText(await fetch(server.url));
      const reports = server.output().split('\n').filter((l) => l.startsWith('rate limiter: '));
      assertShown('express-middleware-offline.out', `${reports.join('\n')}\n${offline}`);
    } finally {
      await server.stop();
      await own.stop();
    }
  });
});

describe('the RL.THROTTLE example of docs/frameworks/node.md', () => {
  it('throttle.mjs prints what the page shows', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(examples, 'throttle.mjs')], {
      env: { ...process.env, REDIS_URL: redis.url }, timeout: 15_000,
    });
    // A lease's wait counts down from its ttl as the clock runs.
    assertShown('throttle.out', stdout, [/"retryAfter":1[12]\d{4}/g]);
  });
});
