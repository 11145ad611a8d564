"""fastapi-limiter 0.2 on redis-rl: a pyrate-limiter Limiter over redis-rl buckets,
one RL.ALL per request over both rates. `python examples/fastapi_limiter_app.py`
sends three requests in-process."""

import os

import redis
from fastapi import Depends, FastAPI
from fastapi_limiter.depends import RateLimiter
from pyrate_limiter import Duration, Limiter, Rate
from starlette.testclient import TestClient

from redis_rl import AsyncRateLimiter, FailurePolicy, connect_async
from redis_rl.pyrate import RedisRLBucketFactory

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
rl = AsyncRateLimiter(connect_async(redis_url), failure=FailurePolicy.OPEN)
buckets = RedisRLBucketFactory([Rate(2, Duration.SECOND), Rate(100, Duration.MINUTE)], rl, prefix="rl:demo:fastapi")
app = FastAPI()


@app.get("/", dependencies=[Depends(RateLimiter(limiter=Limiter(buckets)))])
async def hello() -> dict:
    return {"hello": "world"}


if __name__ == "__main__":
    demo_keys = redis.Redis.from_url(redis_url).scan_iter("rl:demo:fastapi:*")
    redis.Redis.from_url(redis_url).delete(*demo_keys, "rl:demo:none")  # a clean slate for the demo
    with TestClient(app) as client:
        for _ in range(3):
            r = client.get("/")
            print(r.status_code, r.json())
