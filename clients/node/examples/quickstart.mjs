// app.mjs: an Express app whose every route allows 5 requests a minute per client.
// npm install ./redis-rl-0.1.0.tgz express ioredis, then node app.mjs (Redis with the module on REDIS_URL).
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
import express from 'express';
import { Redis } from 'ioredis';
import { createRateLimiter, ioredisOptions } from 'redis-rl';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', ioredisOptions());
redis.on('error', (err) => console.error('redis:', err.message));

// failure: what happens while Redis is unreachable: 'open' admits, 'closed' answers 503.
const rl = createRateLimiter({ client: redis, failure: 'open' });

const app = express();
app.use(rl.middleware({
  limits: { name: 'per-minute', algorithm: 'slidecount', limit: 5, window: 60 },
  identify: (req) => req.ip,
}));
app.get('/', (req, res) => res.send('hello\n'));

// Serve once Redis is reachable; later outages go to the failure policy.
redis.once('ready', () => {
  const server = app.listen(process.env.PORT ?? 3000, () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
  });
});
