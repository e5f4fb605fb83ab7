/**
 * Whether a deployment can carry Herald, decided from its `hello` and
 * `buildInfo` answers. Pure, so every case is tested without a server.
 *
 * Herald needs change streams and multi-document transactions: a replica set
 * (a single node is enough) or a sharded cluster, on MongoDB 4.4 or newer
 * (wire version 9), the oldest server the MongoDB Node driver v7 talks to
 * (`MIN_SUPPORTED_WIRE_VERSION` in its `cmap/wire_protocol/constants.ts`). A
 * standalone mongod has neither. An older server never answers here: the
 * driver refuses it during its handshake, and the store turns that refusal
 * into {@link tooOldProblem} (`isIncompatibleServerError` in `mongo-errors.ts`).
 */

/** A server's reply to a command: the driver's `Document`, its fields read with a type check each. */
export type CommandReply = Readonly<Record<string, unknown>>;

/** MongoDB 4.4: the oldest server the driver (v7) connects to, and so the oldest Herald supports. */
export const MIN_WIRE_VERSION = 9;
export const MIN_SERVER_VERSION = '4.4';

export interface ServerFacts {
  /** The `hello` (or legacy `isMaster`) reply. */
  readonly hello: CommandReply;
  /** The `buildInfo` reply, for the version in messages. */
  readonly buildInfo?: CommandReply;
}

export interface ServerSupport {
  readonly topology: 'replica-set' | 'sharded';
  readonly version: string;
  readonly maxWireVersion: number;
}

/** Herald's sentence for a server older than 4.4, `version` and `maxWireVersion` when known. */
export function tooOldProblem(version = 'unknown', maxWireVersion?: number): string {
  const wire = maxWireVersion === undefined ? '' : ` (wire version ${maxWireVersion})`;
  const which = version === 'unknown' ? `the server${wire}` : `MongoDB ${version}${wire}`;
  return `${which} is too old: Herald needs MongoDB ${MIN_SERVER_VERSION} or newer (wire version ${MIN_WIRE_VERSION}), the oldest its driver supports`;
}

/**
 * @returns what the deployment is, or a sentence saying why Herald cannot use
 *   it and what to do (`problem`).
 */
export function checkServerSupport(facts: ServerFacts): { readonly ok: true; readonly support: ServerSupport } | { readonly ok: false; readonly problem: string } {
  const { hello } = facts;
  const version = typeof facts.buildInfo?.['version'] === 'string' ? (facts.buildInfo['version'] as string) : 'unknown';
  const maxWireVersion = typeof hello['maxWireVersion'] === 'number' ? hello['maxWireVersion'] : 0;
  if (maxWireVersion < MIN_WIRE_VERSION) return { ok: false, problem: tooOldProblem(version, maxWireVersion) };
  if (hello['msg'] === 'isdbgrid') return { ok: true, support: { topology: 'sharded', version, maxWireVersion } };
  if (typeof hello['setName'] !== 'string' || hello['setName'] === '') {
    return {
      ok: false,
      problem:
        'the server is not part of a replica set (no replicaSet in the URI and hello reports no setName); ' +
        'Herald needs change streams and transactions, which only a replica set offers: start mongod with ' +
        '--replSet rs0, run rs.initiate() once, and add ?replicaSet=rs0 to the URI (a single-node replica set is enough)',
    };
  }
  return { ok: true, support: { topology: 'replica-set', version, maxWireVersion } };
}
