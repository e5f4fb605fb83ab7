/**
 * What importing Herald loads, in the repository, where every store's driver is installed: the
 * entry must not load one (the packed package is checked the same way, without them installed,
 * in package.spec.ts). A fresh process, so that no other spec has loaded a driver before.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The packages of the optional stores, and the ones only they load. */
const STORE_PACKAGES = ['mongodb', 'bson', 'mongodb-memory-server-core', 'pg', 'pg-pool', 'pg-protocol'];

/** Imports `entry`, then prints the packages whose CommonJS modules are loaded (every driver is CommonJS). */
const LOADED_PACKAGES = `
import { createRequire } from 'node:module';
const entry = await import(process.argv[1]);
const packages = new Set(Object.keys(createRequire(process.argv[1]).cache).map((path) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\/(?!.*node_modules)/.exec(path)?.[1]));
console.log(JSON.stringify({ exports: Object.keys(entry).length, packages: [...packages].filter(Boolean) }));
`;

describe('the public entry (lib/index.ts)', () => {
  it('loads no store driver when imported, although all are installed', async function () {
    this.timeout(60_000);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', LOADED_PACKAGES, join(ROOT, 'lib', 'index.ts')], { cwd: ROOT });
    const { exports, packages } = JSON.parse(stdout) as { exports: number; packages: string[] };
    expect(exports, 'the entry was imported').to.be.greaterThan(10);
    expect(packages, 'some CommonJS package is seen loaded (the check sees them)').to.include('better-sqlite3');
    expect(packages.filter((name) => STORE_PACKAGES.includes(name))).to.deep.equal([]);
  });
});
