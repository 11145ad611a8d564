"""pyrate-limiter on redis-rl: a bucket factory, then pyrate's own Limiter.
`python examples/pyrate_app.py` asks three times for one name."""

import os

from pyrate_limiter import Duration, Limiter, Rate

from redis_rl import FailurePolicy, RateLimiter, connect
from redis_rl.pyrate import RedisRLBucketFactory

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
rl = RateLimiter(connect(redis_url), failure=FailurePolicy.OPEN)
rates = [Rate(2, Duration.SECOND), Rate(100, Duration.MINUTE)]
limiter = Limiter(RedisRLBucketFactory(rates, rl, prefix="rl:demo:pyrate", algorithm="slidelog"))

if __name__ == "__main__":
    bucket = limiter.bucket_factory.get(limiter.bucket_factory.wrap_item("demo-user"))
    bucket.flush()  # a clean slate, so the demo prints the same each run
    print([limiter.try_acquire("demo-user", blocking=False) for _ in range(3)])
