#!/usr/bin/env node
// The `herald` command: the compiled CLI (dist/cli/main.js), run in this process with no
// TypeScript loader. dist/ ships in the package; in a checkout, `npm ci` builds it (the
// `prepare` script) and `npm run build` rebuilds it.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write(`herald: ${fileURLToPath(main)} is missing: run \`npm run build\` in ${fileURLToPath(new URL('../..', import.meta.url))}\n`);
  process.exit(1);
}
await import(main.href);
