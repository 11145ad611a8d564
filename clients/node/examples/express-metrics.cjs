// app.js: the quickstart's Express app (5 requests a minute per client) with the limiter's
// metrics on a /metrics route for Prometheus to scrape.
// npm install ./redis-rl-0.1.0.tgz express ioredis prom-client, then node app.js (Redis with the module on REDIS_URL).
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
const express = require('express');
const Redis = require('ioredis');
const { Registry, collectDefaultMetrics } = require('prom-client');
const { createRateLimiter, ioredisOptions } = require('redis-rl');

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', ioredisOptions());
redis.on('error', (err) => console.error('redis:', err.message));

// The app's registry: the limiter adds redis_rl_decisions_total and
// redis_rl_call_duration_seconds to it (metrics: true would use prom-client's default one).
const registry = new Registry();
collectDefaultMetrics({ register: registry });
const rl = createRateLimiter({ client: redis, failure: 'open', metrics: registry });

const app = express();
// Before the limiter, so that scrapes are neither limited nor counted.
app.get('/metrics', async (req, res) => {
  res.set('Content-Type', registry.contentType);
  res.send(await registry.metrics());
});
app.use(rl.middleware({
  limits: { name: 'per-minute', algorithm: 'slidecount', limit: 5, window: 60 },
  identify: (req) => req.ip,
}));
app.get('/', (req, res) => res.send('hello\n'));

redis.once('ready', () => {
  const server = app.listen(process.env.PORT ?? 3000, () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
  });
});
