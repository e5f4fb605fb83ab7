/**
 * Herald as users run it, for a round: the compiled `herald start` service
 * (herald-service.ts) with default settings unless `config` says otherwise,
 * on a fresh SQLite file or a fresh database of the bench's PostgreSQL
 * server; 100 endpoints (one per sink path) created through its admin API;
 * the producer in its own process publishing 1 000 events per transaction
 * with the compiled package (`publish` on SQLite, `publishPg` in `BEGIN …
 * COMMIT` on PostgreSQL).
 */
import type { ConfigOverrides } from '../../../lib/config/config.ts';
import type { PostgresServer } from '../../../test-kit/postgres-server.ts';
import { stopPidSync } from '../../../test-kit/process-stop.ts';
import { startProducer } from '../harness.ts';
import { startHeraldService } from '../herald-service.ts';
import { ENDPOINTS, ENQUEUE_BATCH, processTicks, treeTicks } from './peer-kit.ts';
import type { PeerSystem } from './peer-round.ts';
import { openCountedDatabase } from './pg-cost.ts';

export interface HeraldSystemOptions {
  readonly name: string;
  /** `postgres`: a database created fresh each round on `server`. */
  readonly store: 'sqlite' | 'postgres';
  readonly server?: PostgresServer;
  /** Settings beyond the defaults (the service's `--config` file). */
  readonly config?: ConfigOverrides;
}

const TENANT = 'bench';

export function heraldSystem(options: HeraldSystemOptions): PeerSystem {
  const server = options.server;
  if (options.store === 'postgres' && server === undefined) throw new Error('heraldSystem: store postgres needs a server');
  return {
    name: options.name,
    details: { store: options.store, settings: options.config ?? 'defaults', run: 'node dist/cli/main.js start (compiled), its own process' },
    async start({ sink, bodies, cleanup, roundId }) {
      const database = server === undefined ? undefined : await openCountedDatabase(server, `herald_${roundId}`, cleanup);
      const service = await startHeraldService({ store: database?.url ?? 'sqlite', config: options.config });
      cleanup.add(`herald service ${service.pid}`, () => service.closeSync(), () => service.close());
      const endpointIds = await service.createEndpoints(TENANT, Array.from({ length: ENDPOINTS }, (_, i) => `${sink.url}/ep/${i}`));
      const producer = await startProducer({
        target: database === undefined
          ? { system: 'herald-sqlite', dbPath: service.sqlitePath!, endpointIds }
          : { system: 'herald-postgres', connectionString: database.url, endpointIds },
        events: bodies,
        batch: ENQUEUE_BATCH,
      });
      cleanup.add(`producer ${producer.pid}`, () => stopPidSync(producer.pid, 'SIGKILL', 2_000), () => producer.close());
      const postmasterPid = server?.postmasterPid;
      return {
        readers: {
          worker: () => processTicks(service.pid),
          producer: () => processTicks(producer.pid),
          database: () => (postmasterPid === undefined ? 0 : treeTicks(postmasterPid)),
        },
        produce: (from, to) => producer.publish(from, to),
        statsClient: database?.statsClient,
        async stop() {
          await producer.close();
          await service.close();
        },
      };
    },
  };
}
