// app.js: @fastify/rate-limit, decided by the redis-rl module.
// npm install ./redis-rl-0.1.0.tgz fastify @fastify/rate-limit ioredis, then node app.js.
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
const Fastify = require('fastify');
const Redis = require('ioredis');
const { redisRlStore } = require('redis-rl/fastify');

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

async function main() {
  const app = Fastify();
  // The plugin's options, unchanged; only the store is redis-rl's.
  await app.register(require('@fastify/rate-limit'), {
    max: 5,
    timeWindow: '1 minute',
    store: redisRlStore({ client: redis }),
  });
  app.get('/', async () => 'hello\n');
  const url = await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });
  console.log(`listening on ${url}`);
}

main();
