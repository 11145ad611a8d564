// What a doc page shows an example printing is examples/<name>.out (tests/docs.rs checks
// that the page shows that file as it is); a test compares what the example printed with
// it, after masking, on both sides, the values the clock decides.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples');

export function assertShown(name, printed, masks = []) {
  const mask = (text) => masks.reduce((t, re) => t.replace(re, (m) => `${m.replace(/\d+/g, 'N')}`), text);
  assert.equal(mask(printed), mask(readFileSync(join(examples, name), 'utf8')), `examples/${name}`);
}

// A response as `curl -si` prints it, with the headers the docs show (in that order).
export async function curlText(res, headers = ['RateLimit-Policy', 'RateLimit', 'Retry-After', 'Content-Type']) {
  const lines = [`HTTP/1.1 ${res.status} ${res.statusText}`];
  for (const h of headers) if (res.headers.has(h)) lines.push(`${h}: ${res.headers.get(h)}`);
  return `${lines.join('\n')}\n\n${await res.text()}\n`;
}
