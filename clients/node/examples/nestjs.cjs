// app.js: @nestjs/throttler, decided by the redis-rl module.
// npm install ./redis-rl-0.1.0.tgz @nestjs/common @nestjs/core @nestjs/platform-express @nestjs/throttler
//   reflect-metadata rxjs ioredis, then node app.js.
// redis-rl-0.1.0.tgz: the package, built with npm pack (docs/frameworks/node.md#install).
// (Plain JavaScript: the decorators are applied as functions; in TypeScript write
// @Module({...}) and @Controller() as usual.)
require('reflect-metadata');
const { Controller, Get, Module } = require('@nestjs/common');
const { APP_GUARD, NestFactory } = require('@nestjs/core');
const { ThrottlerModule } = require('@nestjs/throttler');
const Redis = require('ioredis');
const { RedisRlThrottlerStorage, redisRlThrottlerGuard } = require('redis-rl/nestjs');

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

class HelloController {
  hello() {
    return 'hello\n';
  }
}
Controller()(HelloController);
Get()(HelloController.prototype, 'hello', Object.getOwnPropertyDescriptor(HelloController.prototype, 'hello'));

class AppModule {}
Module({
  imports: [ThrottlerModule.forRoot({
    // 5 a minute; after a denial, blocked for 5 minutes.
    throttlers: [{ ttl: 60_000, limit: 5, blockDuration: 300_000 }],
    storage: new RedisRlThrottlerStorage({ client: redis, failure: 'open' }),
  })],
  controllers: [HelloController],
  // One RL.ALL per request over every throttler (ThrottlerGuard works too).
  providers: [{ provide: APP_GUARD, useClass: redisRlThrottlerGuard() }],
})(AppModule);

async function main() {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  console.log(`listening on ${await app.getUrl()}`);
}

main();
