/**
 * The baseline as a system of the peers' rounds: raw-worker.ts in its own
 * process posting the workload with an undici `Pool` (16 connections, 256
 * requests in flight, Herald's defaults), no producer, no database.
 */
import { fileURLToPath } from 'node:url';
import { forkWorker, processTicks } from './peer-kit.ts';
import type { PeerSystem } from './peer-round.ts';
import type { RawWorkerConfig } from './raw-worker.ts';

const WORKER_FILE = fileURLToPath(new URL('./raw-worker.ts', import.meta.url));
/** Herald's default `maxInFlight`. */
const IN_FLIGHT = 256;

export function rawSystem(name = 'raw undici Pool'): PeerSystem {
  return {
    name,
    details: { settings: { connections: 16, inFlight: IN_FLIGHT, signing: false } },
    async start({ sink, bodies, cleanup }) {
      const config: RawWorkerConfig = { sinkUrl: sink.url, bodies, inFlight: IN_FLIGHT };
      const worker = await forkWorker(WORKER_FILE, config, cleanup);
      const pid = worker.pid!;
      return {
        readers: { worker: () => processTicks(pid), producer: () => 0, database: () => 0 },
        produce: (from, to) =>
          new Promise<void>((resolve, reject) => {
            const onMessage = (message: { type: string; message?: string }): void => {
              if (message.type !== 'posted' && message.type !== 'error') return;
              worker.off('message', onMessage);
              if (message.type === 'posted') resolve();
              else reject(new Error(`raw worker: ${message.message}`));
            };
            worker.on('message', onMessage);
            worker.send({ type: 'post', from, to });
          }),
        stop: async () => {},
      };
    },
  };
}
