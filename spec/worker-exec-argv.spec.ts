import { expect } from 'chai';
import { Worker } from 'node:worker_threads';
import { workerExecArgv } from '../lib/worker-exec-argv.ts';
import { workerModule } from '../lib/worker-module.ts';

const SOURCE_WORKER = new URL('file:///app/lib/signing/sign-worker.ts');
const COMPILED_WORKER = new URL('file:///app/dist/signing/sign-worker.js');

describe('workerExecArgv', () => {
  const saved = process.execArgv;

  afterEach(() => {
    process.execArgv = saved;
  });

  it('drops the flags a worker refuses (V8 flags such as --expose-gc) or cannot use (--input-type), and keeps the rest', () => {
    process.execArgv = ['--expose-gc', '--input-type=module', '--import', 'tsx', '--max-old-space-size=512', '--cpu-prof', '--cpu-prof-dir=/tmp/p'];
    expect(workerExecArgv(SOURCE_WORKER)).to.deep.equal(['--import', 'tsx', '--cpu-prof', '--cpu-prof-dir=/tmp/p']);
  });

  context('when the worker is compiled JavaScript', () => {
    it('adds no tsx (compiled Herald runs without it)', () => {
      process.execArgv = ['--expose-gc', '--enable-source-maps'];
      expect(workerExecArgv(COMPILED_WORKER)).to.deep.equal(['--enable-source-maps']);
    });
  });

  it('gives arguments a worker starts with, under the V8 heap and GC flags an operator sets on the process', async () => {
    process.execArgv = [...saved, '--expose-gc', '--max-old-space-size=512', '--max_semi_space_size=4', '--trace-gc', '--stack-trace-limit=20'];
    const worker = new Worker('require("node:worker_threads").parentPort.postMessage("up")', { eval: true, execArgv: workerExecArgv(SOURCE_WORKER) });
    const [message] = (await Promise.race([
      new Promise((resolve) => worker.once('message', (m) => resolve([m]))),
      new Promise((_, reject) => worker.once('error', reject)),
    ])) as [string];
    expect(message).to.equal('up');
    await worker.terminate();
  });
});

describe('workerModule', () => {
  it('names a TypeScript worker next to a TypeScript module (Herald run from its sources)', () => {
    expect(workerModule('file:///app/lib/signing/signing-pool.ts', './sign-worker').href).to.equal(SOURCE_WORKER.href);
  });

  it('names a compiled worker next to a compiled module (Herald run from dist/)', () => {
    expect(workerModule('file:///app/dist/signing/signing-pool.js', './sign-worker').href).to.equal(COMPILED_WORKER.href);
  });
});
