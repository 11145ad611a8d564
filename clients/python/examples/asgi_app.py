"""A plain ASGI app behind the middleware.

Serve it with any ASGI server (`uvicorn examples.asgi_app:app`), or run
`python examples/asgi_app.py` to send it three requests in-process.
"""

import asyncio
import os

from redis_rl import AsyncRateLimiter, FailurePolicy, Limit, RateLimitMiddleware, connect_async


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello\n"})


limiter = AsyncRateLimiter(
    connect_async(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")),
    failure=FailurePolicy.OPEN,
    pseudonym_secret=os.environ.get("RL_SECRET"),  # for pseudonyms where the module is not loaded
)
app = RateLimitMiddleware(
    hello,
    limiter,
    # Key prefixes: a request's key is `<prefix>:{<RL.PSEUDONYM of its IP>}`.
    [Limit.gcra("burst", "rl:demo:burst", 10, "1s", burst=2),
     Limit.slidecount("minute", "rl:demo:minute", 100, 60)],
)


async def main():
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [],
             "client": ("203.0.113.9", 50000)}

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        if message["type"] == "http.response.start":
            print(message["status"])
            for name, value in message["headers"]:
                print(f"    {name.decode()}: {value.decode()}")

    for _ in range(3):
        await app(scope, receive, send)


if __name__ == "__main__":
    asyncio.run(main())
