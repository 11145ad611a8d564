"""Flask-Limiter on redis-rl: the storage URI is the only change (and the import that
registers it). `python examples/flask_limiter_app.py` sends three requests in-process."""

import os

import flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
app = flask.Flask(__name__)
app.config.update(
    RATELIMIT_STORAGE_URI=redis_url.replace("redis://", "redis+rl://", 1) + "?failure=open",
    RATELIMIT_HEADERS_ENABLED=True,
)
limiter = Limiter(get_remote_address, app=app)


@app.route("/")
@limiter.limit("2/second")
def hello() -> str:
    return "hello\n"


if __name__ == "__main__":
    limiter.reset()  # a clean slate, so the demo prints the same each run
    client = app.test_client()
    for _ in range(3):
        r = client.get("/")
        extra = f" retry-after {r.headers['Retry-After']}" if r.status_code == 429 else ""
        print(r.status_code, "remaining", r.headers["X-RateLimit-Remaining"] + extra)
