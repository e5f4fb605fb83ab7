/**
 * The Herald processes running beside one store's data on this host, each
 * recorded in a file, so a restarted process can take its dead predecessor's
 * slots at once instead of waiting for their leases to expire.
 *
 * Every started node writes `<folder>/<nodeId>.json` (atomically: a temporary
 * file, then a rename) and removes it when it closes. At start, before it takes
 * any lease, it reads the other records and reaps a record's node (releases
 * its leases, removes it from `nodes`, deletes the file) only when it can prove
 * that process is gone: same host, same boot, same pid namespace, and its pid
 * no longer exists, is a zombie, or belongs to a process started at another
 * time (the pid was reused). Anything else — another host, another pid
 * namespace (a sibling container), a live pid, a pid it may not signal, an
 * unreadable record — is left alone: that node's leases expire as they always
 * did. Releasing a lease does not weaken fencing: the next owner takes the
 * slot at the next epoch, so a late write of the old owner is still refused.
 *
 *   idle ──start()──► recorded (own file written, dead predecessors reaped)
 *        ──close()──► idle (own file removed)
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Clock } from '../clock.ts';
import { ValidationError } from '../errors.ts';
import type { Store } from '../store/port.ts';

/** What a node writes about itself. */
export interface LocalNodeRecord {
  readonly nodeId: string;
  /** Which data it serves (a digest of the store setting: never the URI, which may hold a password). */
  readonly store: string;
  readonly pid: number;
  readonly hostname: string;
  /** `/proc/sys/kernel/random/boot_id`: a pid means nothing across a reboot. `null` without /proc. */
  readonly bootId: string | null;
  /** `/proc/self/ns/pid`: a pid means nothing in another pid namespace (another container). `null` without /proc. */
  readonly pidNamespace: string | null;
  /** Field 22 of `/proc/<pid>/stat`, the process start time in ticks since boot: tells a reused pid apart. */
  readonly processStartTicks: string | null;
  readonly startedAt: number;
}

/** This process, as a record would describe it. */
export type ProcessIdentity = Pick<LocalNodeRecord, 'pid' | 'hostname' | 'bootId' | 'pidNamespace' | 'processStartTicks'>;

/** What probing a pid found. */
export type ProcessState =
  | { readonly kind: 'gone'; readonly detail: string }
  | { readonly kind: 'alive'; readonly startTicks: string | null; readonly zombie: boolean }
  /** It may exist, but this process cannot tell (EPERM and the like). */
  | { readonly kind: 'unknown'; readonly detail: string };

/** How this module looks at processes; injected so tests can fake any of them. */
export interface ProcessProbe {
  self(): ProcessIdentity;
  inspect(pid: number): ProcessState;
}

export type Verdict = { readonly dead: true; readonly why: string } | { readonly dead: false; readonly why: string };

/**
 * Whether `record` names a process that is provably gone, judged from `here`.
 * `inspect` is called only when the pid can mean the same process here.
 */
export function judgeRecord(record: LocalNodeRecord, here: ProcessIdentity, inspect: (pid: number) => ProcessState): Verdict {
  if (record.hostname !== here.hostname) return { dead: false, why: `another host (${record.hostname})` };
  if (record.bootId !== here.bootId) return { dead: false, why: 'another boot id (another machine with this hostname, or before a reboot)' };
  if (record.pidNamespace !== here.pidNamespace) {
    return { dead: false, why: `another pid namespace (${record.pidNamespace ?? 'unknown'}): its pid means nothing here` };
  }
  const state = inspect(record.pid);
  switch (state.kind) {
    case 'gone':
      return { dead: true, why: `pid ${record.pid} is gone (${state.detail})` };
    case 'unknown':
      return { dead: false, why: `pid ${record.pid} cannot be probed (${state.detail})` };
    case 'alive':
      if (record.processStartTicks !== null && state.startTicks !== null && state.startTicks !== record.processStartTicks) {
        return { dead: true, why: `pid ${record.pid} was reused (started at tick ${state.startTicks}, not ${record.processStartTicks})` };
      }
      if (state.zombie) return { dead: true, why: `pid ${record.pid} is a zombie (exited, not yet waited for)` };
      if (record.processStartTicks === null || state.startTicks === null) {
        return { dead: false, why: `pid ${record.pid} is alive and its start time is unknown` };
      }
      return { dead: false, why: `pid ${record.pid} is alive` };
  }
}

/** Reads what it needs from /proc where there is one (Linux); elsewhere start times are unknown. */
export const systemProcessProbe: ProcessProbe = Object.freeze({
  self(): ProcessIdentity {
    return {
      pid: process.pid,
      hostname: hostname(),
      bootId: readOrNull(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()),
      pidNamespace: readOrNull(() => readlinkSync('/proc/self/ns/pid')),
      processStartTicks: readOrNull(() => statOf(readFileSync('/proc/self/stat', 'utf8'))?.startTicks ?? null),
    };
  },
  inspect(pid: number): ProcessState {
    try {
      process.kill(pid, 0);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      return code === 'ESRCH' ? { kind: 'gone', detail: code } : { kind: 'unknown', detail: code };
    }
    let stat: ReturnType<typeof statOf>;
    try {
      stat = statOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch (error) {
      // With a /proc, a pid that answered the signal but has no entry exited in between.
      const vanished = (error as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc/self/stat');
      if (vanished) return { kind: 'gone', detail: `/proc/${pid} vanished` };
      stat = undefined;
    }
    return { kind: 'alive', startTicks: stat?.startTicks ?? null, zombie: stat?.state === 'Z' || stat?.state === 'X' };
  },
});

/** The state (field 3) and start time (field 22) of a `/proc/<pid>/stat` line; `comm` may hold spaces and parentheses. */
export function statOf(line: string): { readonly state: string; readonly startTicks: string } | undefined {
  const fields = line.slice(line.lastIndexOf(')') + 2).trim().split(' ');
  const state = fields[0];
  const startTicks = fields[22 - 3];
  if (state === undefined || startTicks === undefined || !/^\d+$/.test(startTicks)) return undefined;
  return { state, startTicks };
}

function readOrNull<T>(read: () => T): T | null {
  try {
    return read();
  } catch {
    return null;
  }
}

/**
 * The folder of the records for a store setting: `nodes/` beside the SQLite
 * file, or in `dataDir` for any other store (where the admin token is kept);
 * `undefined` for an in-memory database, which no other process can share.
 */
export function localNodesFolder(store: string, dataDir: string): string | undefined {
  if (store.startsWith('sqlite:')) {
    const path = store.slice('sqlite:'.length);
    if (path === ':memory:' || path === '') return undefined;
    return join(dirname(resolve(path)), 'nodes');
  }
  return join(resolve(dataDir), 'nodes');
}

/** A digest naming the data a store setting points at (a SQLite path is made absolute first). */
export function storeKeyOf(store: string): string {
  const canonical = store.startsWith('sqlite:') ? `sqlite:${resolve(store.slice('sqlite:'.length))}` : store;
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

/** Parses a record file's text; `undefined` when it is not a record. */
export function parseRecord(text: string): LocalNodeRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const stringOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';
  if (
    typeof r.nodeId !== 'string' ||
    r.nodeId === '' ||
    typeof r.store !== 'string' ||
    typeof r.pid !== 'number' ||
    !Number.isInteger(r.pid) ||
    r.pid <= 0 ||
    typeof r.hostname !== 'string' ||
    !stringOrNull(r.bootId) ||
    !stringOrNull(r.pidNamespace) ||
    !stringOrNull(r.processStartTicks) ||
    typeof r.startedAt !== 'number'
  ) {
    return undefined;
  }
  return {
    nodeId: r.nodeId,
    store: r.store,
    pid: r.pid,
    hostname: r.hostname,
    bootId: r.bootId,
    pidNamespace: r.pidNamespace,
    processStartTicks: r.processStartTicks,
    startedAt: r.startedAt,
  };
}

export interface LocalNodesOptions {
  /** The records' folder (see {@link localNodesFolder}); created if missing. */
  readonly folder: string;
  readonly nodeId: string;
  /** See {@link storeKeyOf}: records of other data in the same folder are left alone. */
  readonly storeKey: string;
}

/** A predecessor whose leases and node row were released. */
export interface ReapedNode {
  readonly nodeId: string;
  readonly pid: number;
  readonly slots: readonly number[];
  readonly why: string;
}

export interface LocalNodesDeps {
  readonly store: Pick<Store, 'listLeases' | 'releaseLeases' | 'removeNode'>;
  readonly clock: Clock;
  /** @default systemProcessProbe */
  readonly probe?: ProcessProbe;
  reaped(node: ReapedNode): void;
  /** A record file that could not be read or parsed (left where it is), or a failed reap. */
  onError(file: string, error: unknown): void;
}

export class LocalNodes {
  readonly #options: LocalNodesOptions;
  readonly #deps: LocalNodesDeps;
  readonly #probe: ProcessProbe;
  #recorded = false;

  constructor(options: LocalNodesOptions, deps: LocalNodesDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#probe = deps.probe ?? systemProcessProbe;
  }

  get file(): string {
    return join(this.#options.folder, `${this.#options.nodeId}.json`);
  }

  /**
   * Records this process, then reaps the provably dead predecessors on this
   * host. Call it before taking leases. Never throws: a folder it cannot write
   * or read is reported to `onError`, and the leases expire as without it.
   */
  async start(): Promise<ReapedNode[]> {
    const { folder, nodeId, storeKey } = this.#options;
    const here = this.#probe.self();
    const record: LocalNodeRecord = { nodeId, store: storeKey, ...here, startedAt: this.#deps.clock.now() };
    let names: string[];
    try {
      mkdirSync(folder, { recursive: true });
      const temporary = join(folder, `.${nodeId}.json.tmp`);
      writeFileSync(temporary, `${JSON.stringify(record)}\n`);
      renameSync(temporary, this.file);
      this.#recorded = true;
      names = readdirSync(folder);
    } catch (error) {
      this.#deps.onError(this.file, error);
      return [];
    }

    const reaped: ReapedNode[] = [];
    for (const name of names) {
      if (!name.endsWith('.json') || name.startsWith('.') || name === `${nodeId}.json`) continue;
      const file = join(folder, name);
      let other: LocalNodeRecord | undefined;
      try {
        other = parseRecord(readFileSync(file, 'utf8'));
        if (other === undefined) throw new ValidationError(file, 'is not a Herald node record (left as it is)');
      } catch (error) {
        // Removed meanwhile by a sibling that reaped it, or gracefully by its owner.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#deps.onError(file, error);
        continue;
      }
      if (other.store !== storeKey || other.nodeId === nodeId) continue;
      const verdict = judgeRecord(other, here, (pid) => this.#probe.inspect(pid));
      if (!verdict.dead) continue;
      try {
        reaped.push(await this.#reap(other, file, verdict.why));
      } catch (error) {
        this.#deps.onError(file, error);
      }
    }
    for (const node of reaped) this.#deps.reaped(node);
    return reaped;
  }

  /** Removes this process's record (after its leases were released). */
  close(): void {
    if (!this.#recorded) return;
    this.#recorded = false;
    try {
      rmSync(this.file, { force: true });
    } catch (error) {
      this.#deps.onError(this.file, error);
    }
  }

  async #reap(record: LocalNodeRecord, file: string, why: string): Promise<ReapedNode> {
    const { store } = this.#deps;
    const slots = (await store.listLeases()).filter((lease) => lease.owner === record.nodeId).map((lease) => lease.slot);
    if (slots.length > 0) await store.releaseLeases(record.nodeId, slots);
    await store.removeNode(record.nodeId);
    // Last: were a store write to fail, the next start would try again.
    rmSync(file, { force: true });
    return { nodeId: record.nodeId, pid: record.pid, slots, why };
  }
}
