/**
 * Whether a MongoDB deployment can carry Herald, decided from its `hello` and
 * `buildInfo` answers. Pure, so every case is tested without a server.
 *
 * Herald needs change streams and multi-document transactions: a replica set
 * (a single node is enough) on MongoDB 4.0 or newer (wire version 7), or a
 * sharded cluster on 4.2 or newer (wire version 8). A standalone mongod has
 * neither.
 */
import type { Document } from 'mongodb';

/** MongoDB 4.0: change streams on a database, transactions on a replica set. */
export const MIN_REPLICA_SET_WIRE_VERSION = 7;
/** MongoDB 4.2: transactions on a sharded cluster. */
export const MIN_SHARDED_WIRE_VERSION = 8;

export interface ServerFacts {
  /** The `hello` (or legacy `isMaster`) reply. */
  readonly hello: Document;
  /** The `buildInfo` reply, for the version in messages. */
  readonly buildInfo?: Document;
}

export interface ServerSupport {
  readonly topology: 'replica-set' | 'sharded';
  readonly version: string;
  readonly maxWireVersion: number;
}

/**
 * @returns what the deployment is, or a sentence saying why Herald cannot use
 *   it and what to do (`problem`).
 */
export function checkServerSupport(facts: ServerFacts): { readonly ok: true; readonly support: ServerSupport } | { readonly ok: false; readonly problem: string } {
  const { hello } = facts;
  const version = typeof facts.buildInfo?.['version'] === 'string' ? (facts.buildInfo['version'] as string) : 'unknown';
  const maxWireVersion = typeof hello['maxWireVersion'] === 'number' ? hello['maxWireVersion'] : 0;
  const sharded = hello['msg'] === 'isdbgrid';
  if (sharded) {
    if (maxWireVersion < MIN_SHARDED_WIRE_VERSION) {
      return {
        ok: false,
        problem: `MongoDB ${version} (wire version ${maxWireVersion}) is too old: a sharded cluster needs 4.2 or newer for transactions`,
      };
    }
    return { ok: true, support: { topology: 'sharded', version, maxWireVersion } };
  }
  if (typeof hello['setName'] !== 'string' || hello['setName'] === '') {
    return {
      ok: false,
      problem:
        'the server is not part of a replica set (no replicaSet in the URI and hello reports no setName); ' +
        'Herald needs change streams and transactions, which only a replica set offers: start mongod with ' +
        '--replSet rs0, run rs.initiate() once, and add ?replicaSet=rs0 to the URI (a single-node replica set is enough)',
    };
  }
  if (maxWireVersion < MIN_REPLICA_SET_WIRE_VERSION) {
    return {
      ok: false,
      problem: `MongoDB ${version} (wire version ${maxWireVersion}) is too old: Herald needs 4.0 or newer for change streams and transactions`,
    };
  }
  return { ok: true, support: { topology: 'replica-set', version, maxWireVersion } };
}
