"""limits on redis-rl: a storage URI, then the library's own strategies.
`python examples/limits_app.py` checks one limit three times."""

import os

from limits import parse, storage, strategies

import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
backend = storage.storage_from_string(redis_url.replace("redis://", "redis+rl://", 1) + "?failure=open")
limiter = strategies.MovingWindowRateLimiter(backend)  # runs on RL.SLIDELOG
per_second = parse("2/second")

if __name__ == "__main__":
    limiter.clear(per_second, "demo-user")  # a clean slate, so the demo prints the same each run
    for _ in range(3):
        print(limiter.hit(per_second, "demo-user"), limiter.get_window_stats(per_second, "demo-user").remaining)
