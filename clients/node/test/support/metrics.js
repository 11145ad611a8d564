// Reading a prom-client registry's text output in the tests.
import assert from 'node:assert/strict';
import { BACKEND } from './servers.js';

/** Prometheus text → { 'name{a="x",b="y"}': value }, the labels sorted by name. */
export function scrape(text) {
  const series = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => `${k}="${v}"`).sort();
    series[`${m[1]}{${labels.join(',')}}`] = Number(m[3]);
  }
  return series;
}

/** The series whose key starts with `prefix`. */
export const only = (series, prefix) => Object.fromEntries(Object.entries(series).filter(([k]) => k.startsWith(prefix)));

/** The key of one redis_rl_decisions_total series (by default on the backend the suite runs on). */
export const decision = (limit, outcome, backend = BACKEND) => `redis_rl_decisions_total{backend="${backend}",limit="${limit}",outcome="${outcome}"}`;

/** { 'outcome': n } of one limit's decisions, and its histogram _count, from a registry. */
export async function decisionsOf(registry, limit) {
  const series = scrape(await registry.metrics());
  const outcomes = {};
  for (const [key, value] of Object.entries(only(series, 'redis_rl_decisions_total'))) {
    if (key.includes(`limit="${limit}"`)) outcomes[/outcome="(\w+)"/.exec(key)[1]] = value;
  }
  return { outcomes, timed: series[`redis_rl_call_duration_seconds_count{limit="${limit}"}`] ?? 0 };
}
