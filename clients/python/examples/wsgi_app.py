"""A WSGI app behind the middleware, served by the standard library:
python examples/wsgi_app.py, then curl -i http://127.0.0.1:8000/ a few times."""

import os
from wsgiref.simple_server import make_server

from redis_rl import FailurePolicy, Limit, RateLimiter, WSGIRateLimitMiddleware, connect


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


limiter = RateLimiter(connect(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")),
                      failure=FailurePolicy.CLOSED, pseudonym_secret=os.environ.get("RL_SECRET"))
app = WSGIRateLimitMiddleware(hello, limiter, [Limit.gcra("burst", "rl:wsgi:burst", 2, "1s")],
                              legacy_headers=True)

if __name__ == "__main__":
    with make_server("127.0.0.1", int(os.environ.get("PORT", "8000")), app) as httpd:
        httpd.serve_forever()
