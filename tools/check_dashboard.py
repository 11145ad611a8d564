#!/usr/bin/env python3
"""Checks docs/grafana/redis-rl.json against docs/metrics.md: well-formed JSON, every
metric a query names is in the ```metrics block (a histogram's _bucket/_count/_sum
included), every label it matches on is one the metric has, and every outcome/backend
value is in the ```labels block. With --fields a,b,c (the INFO rl fields a server
gave through docs/grafana/rl-info.lua), each redis_script_values key matcher must
match at least one of them. Exits 1 with the problems listed."""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELS = {
    "redis_rl_decisions_total": {"limit", "outcome", "backend"},
    "redis_rl_call_duration_seconds": {"limit", "le"},
    "redis_script_values": {"key"},
}


def block(text, kind):
    m = re.search(r"^```" + kind + r"\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit(f"docs/metrics.md has no ```{kind} block")
    return [line.split() for line in m.group(1).splitlines() if line.strip()]


def exprs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "definition") and isinstance(v, str):
                yield v
            else:
                yield from exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from exprs(v)


def main():
    doc = (ROOT / "docs/metrics.md").read_text()
    types = {name: kind for name, kind in block(doc, "metrics")}
    values = {row[0]: set(row[1:]) for row in block(doc, "labels")}
    fields = None
    if len(sys.argv) == 3 and sys.argv[1] == "--fields":
        fields = [f for f in sys.argv[2].split(",") if f]
    try:
        dash = json.loads((ROOT / "docs/grafana/redis-rl.json").read_text())
    except json.JSONDecodeError as e:
        sys.exit(f"docs/grafana/redis-rl.json is not JSON: {e}")
    problems = []
    if set(types) != set(LABELS):
        problems.append(f"the metrics block {sorted(types)} and this checker's labels disagree")
    panels = dash.get("panels", [])
    if not panels:
        problems.append("no panels")
    for p in panels:
        if not p.get("title") or not p.get("description") or not p.get("targets"):
            problems.append(f"panel {p.get('id')}: needs a title, a description and targets")
    found = set()
    for expr in exprs(dash):
        for m in re.finditer(r"\b(redis_[A-Za-z0-9_]+)\s*(\{([^}]*)\})?", expr):
            name, matchers = m.group(1), m.group(3) or ""
            base = name
            for suffix in ("_bucket", "_count", "_sum"):
                if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
                    base = name[: -len(suffix)]
            if base not in types:
                problems.append(f"{name} is not in docs/metrics.md: {expr}")
                continue
            found.add(base)
            for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                if label not in LABELS[base]:
                    problems.append(f"{base} has no label {label}: {expr}")
                if label in values:
                    wanted = value.split("|") if "~" in op else [value]
                    bad = [v for v in wanted if v not in values[label]]
                    if bad:
                        problems.append(f"{label} value(s) {bad} are not in docs/metrics.md: {expr}")
                if base == "redis_script_values" and label == "key" and fields is not None:
                    pattern = value if "~" in op else re.escape(value)
                    if not any(re.fullmatch(pattern, f) for f in fields):
                        problems.append(f'key{op}"{value}" matches no INFO rl field of {fields}')
    missing = set(types) - found
    if missing:
        problems.append(f"no panel uses {sorted(missing)}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"{len(panels)} panels, metrics {sorted(found)}: all in docs/metrics.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
