// The CommonJS build: dist/cjs/ mirrors the ESM source file for file (index.js ->
// dist/cjs/index.cjs, src/x.js -> dist/cjs/src/x.cjs), so the source stays the only
// copy and a require()d adapter shares one limiter module with the rest of the build.
// Run by `npm run build`, `prepack` and test.sh.
import { build } from 'esbuild';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const kit = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(kit, 'dist/cjs');
const sources = ['index.js', ...readdirSync(join(kit, 'src'), { recursive: true })
  .filter((f) => f.endsWith('.js')).map((f) => join('src', f))];

// Each file is its own output: a relative import stays an import (of the .cjs twin),
// packages stay the app's.
const keepRelative = {
  name: 'keep-relative',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) => (args.kind === 'entry-point' ? undefined : { path: args.path.replace(/\.js$/, '.cjs'), external: true }));
  },
};

rmSync(out, { recursive: true, force: true });
await build({
  absWorkingDir: kit,
  entryPoints: sources,
  outdir: out,
  outbase: '.',
  outExtension: { '.js': '.cjs' },
  bundle: true,
  packages: 'external',
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  plugins: [keepRelative],
  // createRequire(import.meta.url) is the ESM way to require(); CommonJS has a filename.
  define: { 'import.meta.url': '__rl_module_url' },
  banner: { js: 'const __rl_module_url = require("node:url").pathToFileURL(__filename).href;' },
  logLevel: 'warning',
});

// The types, as .d.cts for a CommonJS consumer (TypeScript's node16 resolution).
mkdirSync(out, { recursive: true });
for (const name of ['index', 'adapters']) {
  const text = readFileSync(join(kit, `${name}.d.ts`), 'utf8').replace(/from '\.\/(\w+)\.js'/g, "from './$1.cjs'");
  writeFileSync(join(out, `${name}.d.cts`), text);
}
