/**
 * A Herald node in a child process (spec/fixtures/herald-node.ts), with what it
 * reports on stdout: readiness, the slots it owns after each renewal (and their
 * epochs), attempts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { ConfigOverrides } from '../../lib/config/config.ts';

export interface NodeProcess {
  readonly child: ChildProcess;
  /** The slots it reported owning last. */
  slots: readonly number[];
  /** The same leases' epochs, by slot. */
  epochs: ReadonlyMap<number, number>;
  /** Event ids of attempts whose settle was refused (fenced): the lease had moved on. */
  readonly fenced: Set<string>;
  /** Event ids of attempts it settled as delivered (applied). */
  readonly delivered: Set<string>;
  readonly exited: Promise<number | null>;
  /** Resolves the next time its output satisfies `test` (checked now, then on every line). */
  until(test: () => boolean): Promise<void>;
  stop(signal: NodeJS.Signals): Promise<number | null>;
}

const waiters = new Set<{ test: () => boolean; resolve: () => void }>();

/** Re-checks every pending condition (any node's line may satisfy a condition about all of them). */
function recheck(): void {
  for (const waiter of [...waiters]) {
    if (waiter.test()) {
      waiters.delete(waiter);
      waiter.resolve();
    }
  }
}

export async function startNodeProcess(overrides: ConfigOverrides): Promise<NodeProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'spec/fixtures/herald-node.ts', JSON.stringify(overrides)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  let buffered = '';
  let ready = false;
  const node: NodeProcess = {
    child,
    slots: [],
    epochs: new Map(),
    fenced: new Set(),
    delivered: new Set(),
    exited,
    until(test) {
      if (test()) return Promise.resolve();
      return new Promise((resolve) => waiters.add({ test, resolve }));
    },
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (line.startsWith('ready ')) ready = true;
      const [kind, id = '', settled, outcome] = line.split(' ');
      if (kind === 'attempt' && outcome === 'fenced') node.fenced.add(id);
      if (kind === 'attempt' && settled === 'delivered' && outcome === 'applied') node.delivered.add(id);
      if (kind === 'slots') {
        const [slots, epochs] = line.split(' ').slice(2).map((list) => (list === '' ? [] : list.split(',').map(Number)));
        node.slots = slots ?? [];
        node.epochs = new Map(node.slots.map((slot, i) => [slot, epochs?.[i] ?? 0]));
      }
    }
    recheck();
  });
  await new Promise<void>((resolve, reject) => {
    void exited.then((code) => reject(new Error(`node exited with ${code} before it was ready: ${stderr}`)));
    void node.until(() => ready).then(resolve);
  });
  return node;
}
