"""FastAPI behind the kit's ASGI middleware, with the limiter's metrics on /metrics for
Prometheus. `uvicorn examples.fastapi_metrics_app:app` serves it; `python
examples/fastapi_metrics_app.py` sends three requests and a scrape in-process."""

import os

import redis
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, make_asgi_app
from starlette.testclient import TestClient

from redis_rl import AsyncRateLimiter, FailurePolicy, Limit, RateLimitMiddleware, connect_async

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
registry = CollectorRegistry()  # or metrics=True: prometheus_client's default REGISTRY
limiter = AsyncRateLimiter(
    connect_async(redis_url),
    failure=FailurePolicy.OPEN,
    metrics=registry,
    pseudonym_secret=os.environ.get("RL_SECRET"),  # for pseudonyms where the module is not loaded
)

api = FastAPI()


@api.get("/")
async def hello() -> dict:
    return {"hello": "world"}


limited = RateLimitMiddleware(api, limiter, [Limit.gcra("per-client", "rl:demo:metrics", 2, "1s")])
scrape = make_asgi_app(registry)


async def app(scope, receive, send):
    # The scraper is not a client: /metrics is served outside the limits.
    if scope["type"] == "http" and scope["path"] == "/metrics":
        await scrape(scope, receive, send)
    else:
        await limited(scope, receive, send)


if __name__ == "__main__":
    demo_keys = list(redis.Redis.from_url(redis_url).scan_iter("rl:demo:metrics:*"))
    if demo_keys:
        redis.Redis.from_url(redis_url).delete(*demo_keys)  # a clean slate for the demo
    with TestClient(app, client=("203.0.113.9", 50000)) as client:
        print(*(client.get("/").status_code for _ in range(3)))
        metrics = client.get("/metrics")
        print(metrics.status_code, metrics.headers["content-type"])
        for line in metrics.text.splitlines():
            if line.startswith(("redis_rl_decisions_total", "redis_rl_call_duration_seconds_count")):
                print(line)
