/**
 * The baseline's process (forked by raw-system.ts): no store, no queue, no
 * signing, an undici `Pool` of 16 connections keeping 256 requests in flight,
 * posting the workload's bodies to their sink paths. What the HTTP client and
 * the sink alone allow on this machine.
 *
 * Beyond the worker protocol (peer-kit.ts `workerProcess`):
 *   → {type: 'post', from, to}   post events `from` to `to` (exclusive)
 *   ← {type: 'posted'}           when every answer has arrived
 */
import { Pool } from 'undici';
import { CONNECTIONS, workerProcess, workload } from './peer-kit.ts';

export interface RawWorkerConfig {
  readonly sinkUrl: string;
  readonly bodies: number;
  readonly inFlight: number;
}

workerProcess<RawWorkerConfig>(async (config) => {
  const jobs = workload(config.bodies);
  const pool = new Pool(config.sinkUrl, { connections: CONNECTIONS, pipelining: 1 });
  const post = async (from: number, to: number): Promise<void> => {
    let next = from;
    const lane = async (): Promise<void> => {
      while (next < to) {
        const job = jobs[next++]!;
        const { body } = await pool.request({ path: job.path, method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': job.id }, body: job.body });
        await body.dump();
      }
    };
    await Promise.all(Array.from({ length: config.inFlight }, lane));
  };
  process.on('message', (message: { type: string; from?: number; to?: number }) => {
    if (message.type !== 'post') return;
    post(message.from!, message.to!).then(
      () => process.send?.({ type: 'posted' }),
      (error: unknown) => process.send?.({ type: 'error', message: String(error) }),
    );
  });
  return () => pool.close();
});
