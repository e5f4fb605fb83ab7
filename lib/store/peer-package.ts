/**
 * The packages a store needs that Herald does not install: its drivers
 * (`pg`, `mongodb`, `mongodb-memory-server-core`) are optional peer
 * dependencies, which the application that uses that store installs beside
 * Herald. They are imported on first use, never when Herald itself is
 * imported, and a missing one is reported as a `ConfigError` that names it
 * and the command that installs it.
 */
import { createRequire } from 'node:module';
import { ConfigError } from '../errors.ts';

/** A package a store imports on first use, and how. */
export interface PeerPackage<T> {
  readonly name: string;
  /** The importing module's own `import('<name>')`: written literally there, so its type is the package's. */
  readonly load: () => Promise<T>;
}

/** What asked for the package, as the error reports it: a configuration key and its value. */
export interface PeerRequest {
  readonly key: string;
  readonly value: string;
}

/**
 * True when `name` cannot be found from Herald's own files, in the folders `import()` looks in.
 * Resolved as `require` would: each peer Herald names has a CommonJS entry, and this works
 * whichever way the module itself was loaded.
 */
function isMissing(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(name);
    return false;
  } catch {
    return true;
  }
}

/**
 * Imports the package; errors other than the package itself missing (one of its own
 * dependencies missing, an error while it loads) are rethrown as they are.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming the request's key and value, the package
 *   and `npm install <name>`, when the package is not installed.
 */
export async function importPeer<T>(peer: PeerPackage<T>, request: PeerRequest): Promise<T> {
  try {
    return await peer.load();
  } catch (error) {
    if (!isMissing(peer.name)) throw error;
    throw new ConfigError(request.key, request.value, `needs the package "${peer.name}", not installed: npm install ${peer.name}`);
  }
}
