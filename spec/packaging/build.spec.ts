/**
 * scripts/build/build.mjs, which `npm run build`, `prepare` and `prestart` run, on a copy of the
 * build set-up (the script, the two tsconfigs) around a two-module lib/ in a temporary
 * folder, so the checkout's dist/ is left alone. Its node_modules is the checkout's.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('scripts/build/build.mjs', function () {
  // Each build is a tsc run: seconds on a busy machine.
  this.timeout(120_000);
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-build-'));
    mkdirSync(join(dir, 'scripts', 'build'), { recursive: true });
    mkdirSync(join(dir, 'lib'));
    for (const file of ['scripts/build/build.mjs', 'tsconfig.json', 'tsconfig.build.json']) copyFileSync(join(ROOT, file), join(dir, file));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'herald', type: 'module' }));
    writeFileSync(join(dir, 'lib', 'greeting.ts'), "export const greeting = (name: string): string => `hello ${name}`;\n");
    writeFileSync(join(dir, 'lib', 'index.ts'), "export { greeting } from './greeting.ts';\n");
    writeFileSync(join(dir, 'lib', 'index.cts'), "import herald = require('./index.ts');\nexport = herald;\n");
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function build(...args: string[]): Promise<void> {
    await run(process.execPath, ['scripts/build/build.mjs', ...args], { cwd: dir });
  }

  /** Sets a file's times `secondsFromNow` away, so an order between files does not hang on the clock's resolution. */
  function age(path: string, secondsFromNow: number): void {
    const at = new Date(Date.now() + secondsFromNow * 1000);
    utimesSync(path, at, at);
  }

  it('compiles lib/ to ES modules with declarations and the CommonJS entry, from scratch each time', async () => {
    await build();
    expect(readFileSync(join(dir, 'dist', 'index.js'), 'utf8')).to.match(/from ["']\.\/greeting\.js["']/);
    expect(existsSync(join(dir, 'dist', 'greeting.d.ts'))).to.equal(true);
    expect(readFileSync(join(dir, 'dist', 'index.cjs'), 'utf8')).to.match(/require\(["']\.\/index\.js["']\)/);
    expect(existsSync(join(dir, 'dist', 'index.d.cts'))).to.equal(true);

    // A module gone from lib/ is gone from dist/.
    writeFileSync(join(dir, 'lib', 'index.ts'), 'export const nothing = 0;\n');
    rmSync(join(dir, 'lib', 'greeting.ts'));
    await build();
    expect(existsSync(join(dir, 'dist', 'greeting.js'))).to.equal(false);
  });

  it('fails, leaving no dist/, when tsc finds an error', async () => {
    await build();
    writeFileSync(join(dir, 'lib', 'greeting.ts'), 'export const greeting: number = "not a number";\n');
    const failure = await build().then(
      () => 'built',
      (error: { code?: number; stderr?: string }) => `${error.code}: ${error.stderr}`,
    );
    expect(failure).to.match(/^1: .*tsc failed/s);
    expect(existsSync(join(dir, 'dist'))).to.equal(false);
  });

  context('with --if-stale (npm start)', () => {
    it('builds when dist/ is missing, leaves a build newer than lib/ alone, and builds again once lib/ changed', async () => {
      await build('--if-stale');
      const built = join(dir, 'dist', 'index.js');
      expect(existsSync(built)).to.equal(true);

      age(built, 60);
      const { mtimeMs } = statSync(built);
      await build('--if-stale');
      expect(statSync(built).mtimeMs, 'rebuilt although nothing changed').to.equal(mtimeMs);

      age(join(dir, 'lib', 'greeting.ts'), 120);
      await build('--if-stale');
      expect(statSync(built).mtimeMs, 'not rebuilt after lib/ changed').to.not.equal(mtimeMs);
    });
  });
});
