#!/usr/bin/env python3
"""A terminal view of a redis-rl server: decisions per second from INFO rl and the
most-denied keys from RL.TOP, refreshed every second (`make top`; Ctrl-C stops it).

    tools/top.py [--once] [--count N] [--interval S] [redis-cli options...]

Anything it does not know is passed to redis-cli (`-p 6380`, `-h host`, `-a pw`,
`--tls`...), so it reaches any server redis-cli can. Needs only python3 and
redis-cli (7.0+, for --json)."""
import json
import subprocess
import sys
import time
from datetime import datetime, timezone


def cli(conn, *args):
    out = subprocess.run(
        ["redis-cli", *conn, *args], capture_output=True, text=True, check=False
    )
    text = out.stdout.strip()
    if out.returncode != 0 or text.startswith(("Could not connect", "ERR", "NOAUTH")) or (
        not text and out.stderr
    ):
        raise RuntimeError((text or out.stderr.strip()) or f"redis-cli exited {out.returncode}")
    return text


def info_rl(conn):
    fields = {}
    for line in cli(conn, "INFO", "rl").splitlines():
        name, _, value = line.strip().partition(":")
        if name.startswith("rl_") and value.isdigit():
            fields[name[3:]] = int(value)
    return fields


def top(conn, count):
    rows = json.loads(cli(conn, "--json", "RL.TOP", "COUNT", str(count)) or "[]")
    return rows if isinstance(rows, list) else []


COUNTERS = ("calls", "allowed", "denied", "errors")


def commands(fields):
    names = sorted({k.rsplit("_", 1)[0] for k in fields if k.endswith("_calls")})
    return [n for n in names if n != "pseudonym"]


def shown_key(key, width=56):
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in key)
    return text if len(text) <= width else text[: width - 1] + "…"


def when(ms):
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def frame(target, now, before, after, elapsed, rows):
    out = [
        f"redis-rl top  {target}  {now:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"{'command':<14}{'calls/s':>10}{'allowed/s':>11}{'denied/s':>10}{'errors/s':>10}"
        f"{'calls':>14}{'denied':>12}",
    ]
    for name in commands(after):
        rate = []
        for c in COUNTERS:
            if before is None or elapsed <= 0:
                rate.append("-")
            else:
                delta = after.get(f"{name}_{c}", 0) - before.get(f"{name}_{c}", 0)
                rate.append(f"{max(delta, 0) / elapsed:.0f}")
        out.append(
            f"{name:<14}{rate[0]:>10}{rate[1]:>11}{rate[2]:>10}{rate[3]:>10}"
            f"{after.get(name + '_calls', 0):>14}{after.get(name + '_denied', 0):>12}"
        )
    entries, size = after.get("top_entries", 0), after.get("top_bytes", 0)
    out += [
        "",
        f"RL.TOP: the {len(rows)} most denied of {entries} tracked ({size / 1024:.0f} KiB)",
        f"{'#':>3} {'denied':>10} {'±error':>8} {'admitted':>9}  {'last denial (UTC)':<19}  "
        f"{'command':<15}{'algorithm':<12}key",
    ]
    for i, r in enumerate(rows, 1):
        out.append(
            f"{i:>3} {r.get('denied', 0):>10} {r.get('error', 0):>8} {r.get('admitted', 0):>9}  "
            f"{when(r.get('last_denied_ms', 0)):<19}  {r.get('command', ''):<15}"
            f"{r.get('algorithm', ''):<12}{shown_key(str(r.get('key', '')))}"
        )
    if not rows:
        out.append("    (nothing denied since the summary started)")
    return "\n".join(out)


def main(argv):
    once, count, interval, conn = False, 10, 1.0, []
    args = iter(argv)
    for a in args:
        if a == "--once":
            once = True
        elif a == "--count":
            count = int(next(args))
        elif a == "--interval":
            interval = float(next(args))
        elif a in ("-?", "--help"):
            print(__doc__)
            return 0
        else:
            conn.append(a)
    target = "redis-cli " + (" ".join(conn) or "-p 6379")
    before, at = None, None
    try:
        while True:
            after, t = info_rl(conn), time.monotonic()
            rows = top(conn, count)
            text = frame(target, datetime.now(timezone.utc), before, after,
                         (t - at) if at else 0, rows)
            if once:
                print(text)
                return 0
            # Clear the screen and home the cursor, as top does.
            sys.stdout.write("\x1b[H\x1b[2J" + text + "\n\n(Ctrl-C stops)\n")
            sys.stdout.flush()
            before, at = after, t
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, json.JSONDecodeError) as e:
        print(f"top: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
