// app.js: express-rate-limit, decided by the redis-rl module.
// npm install ./redis-rl-0.1.0.tgz express express-rate-limit ioredis, then node app.js.
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
const express = require('express');
const { rateLimit } = require('express-rate-limit');
const Redis = require('ioredis');
const { RedisRlStore } = require('redis-rl/express-rate-limit');

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

const app = express();
// express-rate-limit's options, unchanged; only the store is redis-rl's.
app.use(rateLimit({
  windowMs: 60_000,
  limit: 5,
  standardHeaders: 'draft-7',
  legacyHeaders: false,
  store: new RedisRlStore({ client: redis }),
}));
app.get('/', (req, res) => res.send('hello\n'));

const server = app.listen(process.env.PORT ?? 3000, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
