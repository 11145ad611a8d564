"""SlowAPI on redis-rl: the storage URI is the only change (and the import that
registers it). `python examples/slowapi_app.py` sends three requests in-process."""

import os

from fastapi import FastAPI, Request, Response
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address
from starlette.testclient import TestClient

import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
limiter = Limiter(
    key_func=get_remote_address,
    storage_uri=redis_url.replace("redis://", "redis+rl://", 1) + "?failure=open",
    headers_enabled=True,
)
app = FastAPI()
app.state.limiter = limiter
app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)


@app.get("/")
@limiter.limit("2/second")
async def hello(request: Request, response: Response) -> dict:
    return {"hello": "world"}


if __name__ == "__main__":
    limiter.reset()  # a clean slate, so the demo prints the same each run
    client = TestClient(app)
    for _ in range(3):
        r = client.get("/")
        extra = f" retry-after {r.headers['Retry-After']}" if r.status_code == 429 else ""
        print(r.status_code, "remaining", r.headers["X-RateLimit-Remaining"] + extra)
