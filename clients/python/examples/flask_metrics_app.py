"""Flask-Limiter on redis-rl with the limiter's metrics on /metrics for Prometheus: the
storage option `metrics` names the registry. `python examples/flask_metrics_app.py`
sends three requests and a scrape in-process."""

import os

import flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from prometheus_client import CollectorRegistry, make_wsgi_app
from werkzeug.middleware.dispatcher import DispatcherMiddleware

import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
registry = CollectorRegistry()  # or True: prometheus_client's default REGISTRY
app = flask.Flask(__name__)
app.config.update(
    RATELIMIT_STORAGE_URI=redis_url.replace("redis://", "redis+rl://", 1) + "?failure=open&key_prefix=rl:demo:flask-metrics",
    RATELIMIT_STORAGE_OPTIONS={"metrics": registry},
)
limiter = Limiter(get_remote_address, app=app)


@app.route("/")
@limiter.limit("2/minute")  # a minute, not a second: the demo's requests fall well inside it
def hello() -> str:
    return "hello\n"


# prometheus_client's WSGI app on /metrics, beside Flask: the scraper is not limited.
app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/metrics": make_wsgi_app(registry)})


if __name__ == "__main__":
    limiter.reset()  # a clean slate, so the demo prints the same each run
    client = app.test_client()
    print(*(client.get("/").status_code for _ in range(3)))
    scraped = client.get("/metrics")
    print(scraped.status_code, scraped.headers["Content-Type"])
    for line in scraped.get_data(as_text=True).splitlines():
        if line.startswith(("redis_rl_decisions_total", "redis_rl_call_duration_seconds_count")):
            print(line)
