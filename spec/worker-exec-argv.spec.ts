import { expect } from 'chai';
import { Worker } from 'node:worker_threads';
import { workerExecArgv } from '../lib/worker-exec-argv.ts';

describe('workerExecArgv', () => {
  const saved = process.execArgv;

  afterEach(() => {
    process.execArgv = saved;
  });

  it('drops the flags a worker refuses (--expose-gc) or cannot use (--input-type), and keeps the rest', () => {
    process.execArgv = ['--expose-gc', '--input-type=module', '--import', 'tsx', '--max-old-space-size=512'];
    expect(workerExecArgv()).to.deep.equal(['--import', 'tsx', '--max-old-space-size=512']);
  });

  it('gives arguments a worker starts with, under --expose-gc', async () => {
    process.execArgv = [...saved, '--expose-gc'];
    const worker = new Worker('require("node:worker_threads").parentPort.postMessage("up")', { eval: true, execArgv: workerExecArgv() });
    const [message] = (await Promise.race([
      new Promise((resolve) => worker.once('message', (m) => resolve([m]))),
      new Promise((_, reject) => worker.once('error', reject)),
    ])) as [string];
    expect(message).to.equal('up');
    await worker.terminate();
  });
});
