// A node:test reporter that writes one JSON line per test (not per suite): its file, its
// name with its describe() ancestors ("suite > test"), and whether it passed.
import { basename } from 'node:path';

export default async function* reporter(source) {
  const stacks = new Map();
  for await (const { type, data } of source) {
    if (type === 'test:start') {
      const stack = stacks.get(data.file) ?? [];
      stack.length = data.nesting;
      stack.push(data.name);
      stacks.set(data.file, stack);
    } else if ((type === 'test:pass' || type === 'test:fail') && data.details?.type !== 'suite') {
      const ancestors = (stacks.get(data.file) ?? []).slice(0, data.nesting);
      const status = type === 'test:pass' ? (data.skip || data.todo ? 'skipped' : 'passed') : 'failed';
      const error = data.details?.error?.cause?.message ?? data.details?.error?.message;
      yield `${JSON.stringify({ file: basename(data.file ?? ''), name: [...ancestors, data.name].join(' > '), status, error })}\n`;
    }
  }
}
