"""The kit in one screen: python examples/quickstart.py (REDIS_URL to point elsewhere)."""

import os

from redis_rl import FailurePolicy, Limit, RateLimiter, connect, ratelimit_headers

client = connect(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
# Redis down → admit, and log it. The server's RL_SECRET lets the kit compute pseudonyms
# itself where the module is not loaded (it then runs the module's Lua scripts).
limiter = RateLimiter(client, failure=FailurePolicy.OPEN, pseudonym_secret=os.environ.get("RL_SECRET"))

user = limiter.pseudonym("203.0.113.7")  # daily-rotating, so no raw IP becomes a key
burst = Limit.gcra("burst", f"rl:{{{user}}}:burst", 10, "1s", burst=2)
hourly = Limit.fixed("hourly", f"rl:{{{user}}}:hourly", 1000, 3600)
limiter.reset(burst)  # a clean slate, so the demo prints the same each run
limiter.reset(hourly)


def show(label, decision):
    print(f"{label}: allowed={decision.allowed} remaining={decision.remaining} "
          f"retry_after={decision.retry_after} reset_after={decision.reset_after}")
    for name, value in ratelimit_headers(decision):
        print(f"    {name}: {value}")


for n in range(1, 4):
    show(f"burst #{n}", limiter.check(burst))
show("cost 3 > burst 2", limiter.check(burst, cost=3))

limiter.reset(burst)
decision = limiter.check_all([burst, hourly])  # all or nothing
show("RL.ALL", decision)
