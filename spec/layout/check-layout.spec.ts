import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHECKER = join(ROOT, 'scripts', 'tools', 'check-layout.ts');
const TSX = join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');

/** Runs the checker on a lib/ made of `files` (path → text); its exit code and output. */
async function check(files: Record<string, string>, ...args: string[]): Promise<{ code: number; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'layout-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return await new Promise((done) => {
      execFile(process.execPath, [TSX, CHECKER, '--root', dir, ...args], (error, stdout, stderr) => {
        done({ code: error === null ? 0 : Number(error.code), out: stdout + stderr });
      });
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the layout check of lib/ (npm test runs it on lib/)', function () {
  this.timeout(60_000);

  it('passes rooms that import in one direction, and prints the room graph', async () => {
    const result = await check(
      {
        'clock.ts': 'export const now = 1;\n',
        'store/port.ts': "import { now } from '../clock.ts';\nexport const port = now;\n",
        'engine/actor.ts': "import type { port } from '../store/port.ts';\nexport type A = typeof port;\n",
      },
      '--graph',
    );
    expect(result.code, result.out).to.equal(0);
    expect(result.out).to.include('engine/ -> store/').and.include('store/ -> clock').and.include('no module or room cycle');
  });

  it('fails on two rooms that import each other through different modules, type-only imports included', async () => {
    const result = await check({
      'store/port.ts': "import type { Limit } from '../engine/limit.ts';\nexport type Port = Limit;\n",
      'engine/limit.ts': 'export type Limit = number;\n',
      'engine/actor.ts': "import type { Port } from '../store/port.ts';\nexport type A = Port;\n",
    });
    expect(result.code).to.equal(1);
    expect(result.out).to.match(/room cycle: (store\/ -> engine\/ -> store\/|engine\/ -> store\/ -> engine\/)/);
    expect(result.out).to.include('store/port.ts -> engine/limit.ts').and.include('engine/actor.ts -> store/port.ts');
  });

  it('fails on a module cycle inside one room', async () => {
    const result = await check({
      'engine/a.ts': "import { b } from './b.ts';\nexport const a = () => b;\n",
      'engine/b.ts': "import { a } from './a.ts';\nexport const b = () => a;\n",
    });
    expect(result.code).to.equal(1);
    expect(result.out).to.include('module cycle: engine/a.ts -> engine/b.ts -> engine/a.ts');
  });

  it('fails on a module over 600 lines, naming it', async () => {
    const result = await check({ 'engine/long.ts': 'export const x = 1;\n'.repeat(601), 'engine/short.ts': 'export const y = 1;\n'.repeat(600) });
    expect(result.code).to.equal(1);
    expect(result.out).to.include('too long: engine/long.ts has 601 lines').and.not.include('short.ts');
  });
});
