/**
 * The scenario's side of `open-loop-producer.ts`: forks it (an application
 * process of its own), starts its schedule, and hands back what it committed.
 * Registered with a `Cleanup`, so it is killed with the scenario on SIGINT/SIGTERM.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopChild, stopPidSync } from '../../test-kit/process-stop.ts';
import type { ProducerJob, ProducerReport } from './open-loop-producer.ts';
import type { Cleanup } from './peers/peer-kit.ts';

const PRODUCER_FILE = fileURLToPath(new URL('./open-loop-producer.ts', import.meta.url));
const READY_LIMIT_MS = 30_000;

export interface ProducerRun {
  /** Resolves when the warm-up is over (machine clock, ms: when the first counted event was due). */
  readonly measuring: Promise<number>;
  /** Resolves when every event is committed. */
  readonly done: Promise<ProducerReport>;
}

export interface OpenLoopProducer {
  readonly pid: number;
  /** Runs the schedule. */
  start(): ProducerRun;
  close(): Promise<void>;
}

/** Forks the producer with `job` and waits until its connection is open. */
export async function startOpenLoopProducer(job: ProducerJob, cleanup: Cleanup): Promise<OpenLoopProducer> {
  const child: ChildProcess = fork(PRODUCER_FILE, [JSON.stringify(job)], {
    execArgv: process.execArgv.filter((arg) => arg !== '--expose-gc' && !arg.startsWith('--cpu-prof')),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const close = (): Promise<void> => stopChild(child, () => (child.connected ? child.send({ type: 'close' }) : child.kill('SIGTERM')), 5_000);
  cleanup.add(`producer ${child.pid}`, () => child.pid !== undefined && stopPidSync(child.pid, 'SIGKILL', 2_000), close);
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null): void => {
      clearTimeout(timer);
      reject(new Error(`the producer exited with ${code} before it was ready`));
    };
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      reject(new Error(`the producer was not ready within ${READY_LIMIT_MS / 1000} s`));
    }, READY_LIMIT_MS);
    child.once('exit', onExit);
    child.once('message', () => {
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve();
    });
  });

  return {
    pid: child.pid!,
    start() {
      let measured: (at: number) => void = () => undefined;
      const measuring = new Promise<number>((resolve) => (measured = resolve));
      const done = new Promise<ProducerReport>((resolve, reject) => {
        const onMessage = (message: { type: string; at?: number; report?: ProducerReport; message?: string }): void => {
          if (message.type === 'measuring') measured(message.at!);
          else if (message.type === 'done' || message.type === 'failed') {
            child.off('message', onMessage);
            if (message.type === 'done') resolve(message.report!);
            else reject(new Error(`the producer failed: ${message.message}`));
          }
        };
        child.on('message', onMessage);
        child.once('exit', (code) => reject(new Error(`the producer exited with ${code}`)));
      });
      child.send({ type: 'start' });
      return { measuring, done };
    },
    close,
  };
}
