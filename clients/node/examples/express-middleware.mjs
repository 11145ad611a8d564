// app.mjs: two limits on one route (one RL.ALL), the caller known by a pseudonym of its IP.
// npm install ./redis-rl-0.1.0.tgz express redis, then node app.mjs (Redis with the module
// on REDIS_URL, started with RL_SECRET set).
import express from 'express';
import { createClient } from 'redis';
import { createRateLimiter, nodeRedisOptions } from 'redis-rl';

const client = createClient({ ...nodeRedisOptions(), url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
client.on('error', (err) => console.error('redis:', err.message));
// Wait for the connection, but at most a second: while Redis is away the failure policy
// answers, and start-up doesn't hang.
await Promise.race([client.connect().catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);

const rl = createRateLimiter({
  client,
  failure: 'open', // an edge limiter still stands in front of us; without one, choose 'closed'
  onError: (err, info) => console.error(`rate limiter: ${info.command} failed (${info.failure}): ${err.message}`),
  secret: process.env.RL_SECRET, // only used where the server lacks the module (the scripts backend)
});

const app = express();
app.set('trust proxy', 'loopback'); // req.ip is then the client's address, not the proxy's

app.get('/api/v1/trending',
  rl.middleware({
    limits: [ // several limits: one RL.ALL, all or nothing
      { name: 'burst', algorithm: 'gcra', limit: 10, window: 1, burst: 5 },
      { name: 'per-minute', algorithm: 'slidelog', limit: 3, window: 60 },
    ],
    scope: 'trending', // identity: RL.PSEUDONYM of req.ip, scope 'trending'
  }),
  (req, res) => res.json({ videos: [] }));

const server = app.listen(process.env.PORT ?? 3000, () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/api/v1/trending`);
});
