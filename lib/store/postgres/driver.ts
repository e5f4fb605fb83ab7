/**
 * node-postgres, the one module of the adapter that imports it as a value.
 * It is loaded on first use (`PostgresStore.init()`), never when Herald is
 * imported: `pg` is an optional peer dependency, and an application on
 * another store neither installs nor loads it. Every other module of the
 * adapter imports its types only; the store keeps the loaded driver with its
 * pool.
 *
 *   not loaded ──loadPgDriver()──► loaded (for the life of the process)
 */
import { importPeer, type PeerPackage, type PeerRequest } from '../peer-package.ts';

/** The package's default export, the CommonJS module itself (its ES module entry re-exports it). */
export type PgDriver = (typeof import('pg'))['default'];

const PG_PACKAGE: PeerPackage<PgDriver> = Object.freeze({ name: 'pg', load: async () => (await import('pg')).default });

let loaded: PgDriver | undefined;

/**
 * Loads node-postgres, once per process.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming `request` when `pg` is not installed.
 */
export async function loadPgDriver(request: PeerRequest): Promise<PgDriver> {
  if (loaded === undefined) loaded = await importPeer(PG_PACKAGE, request);
  return loaded;
}
