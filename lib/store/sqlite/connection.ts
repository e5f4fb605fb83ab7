/**
 * The SQLite store's connection: the database file opened in WAL mode, its statements prepared
 * once, and how one port operation gets the write lock and its transaction.
 *
 *   created ──open()──► open ──close()──► closed
 *
 * better-sqlite3 is synchronous: an operation runs to completion on the event loop when the
 * database is free. An operation that finds the lock held by another connection blocks for at
 * most `blockingWaitMs`, then waits for it on the clock (`LockWaiter`), so a producer holding the
 * lock for seconds never freezes the process; it fails after `busyTimeoutMs` in all. With
 * `groupCommit`, the writes issued while one group waits share its transaction, each in a
 * savepoint (`CommitGroup`).
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type BetterSqlite3 from 'better-sqlite3';
import { durationText, type Clock } from '../../clock.ts';
import { ClosedError, HeraldError, messageOf, StoreError } from '../../errors.ts';
import { ClaimStatements } from './claims.ts';
import { CommitGroup, type MemberOutcome } from './commit-group.ts';
import { DeadLetterStatements } from './dead-letters.ts';
import { DeliveryLogStatements } from './delivery-log.ts';
import { DeliveryMinuteStatements } from './delivery-minutes.ts';
import { EndpointChangeStatements } from './endpoint-changes.ts';
import { EndpointStatements } from './endpoints.ts';
import { EventTypeStatements } from './event-types.ts';
import { FailureGroupStatements } from './failure-groups.ts';
import { FanOutStatements } from './fan-out.ts';
import { LeaseStatements } from './leases.ts';
import { LockWaiter, LockWaitTimeout, type LockAccess } from './lock-waiter.ts';
import { ReplayJobStatements } from './replay-jobs.ts';
import { RetentionStatements } from './retention.ts';
import { ensureSchema } from './schema.ts';
import { SettleStatements } from './settle.ts';
import { DynamicStatements, isBusy, type Statement } from './sql.ts';
import { TenantTokenStatements } from './tenant-tokens.ts';

export interface SqliteConnectionOptions {
  readonly path: string;
  readonly clock: Clock;
  readonly busyTimeoutMs: number;
  /** At most `busyTimeoutMs`. */
  readonly blockingWaitMs: number;
  readonly lockRetryIntervalMs: number;
  readonly groupCommit: boolean;
}

/** The open connection and its statements, each prepared once when it opens. */
export interface OpenState {
  readonly db: BetterSqlite3.Database;
  readonly dataVersion: Statement<number>;
  readonly dynamic: DynamicStatements;
  readonly endpoints: EndpointStatements;
  readonly endpointChanges: EndpointChangeStatements;
  readonly fanOut: FanOutStatements;
  readonly leases: LeaseStatements;
  readonly claims: ClaimStatements;
  readonly settle: SettleStatements;
  readonly log: DeliveryLogStatements;
  readonly deadLetters: DeadLetterStatements;
  readonly failures: FailureGroupStatements;
  readonly retention: RetentionStatements;
  readonly tenantTokens: TenantTokenStatements;
  readonly eventTypes: EventTypeStatements;
  readonly replayJobs: ReplayJobStatements;
  readonly minutes: DeliveryMinuteStatements;
  /** Runs a function in a savepoint of the open transaction (a commit group's member). */
  readonly inSavepoint: (run: () => unknown) => unknown;
}

export class SqliteConnection {
  readonly #path: string;
  readonly #busyTimeoutMs: number;
  readonly #blockingWaitMs: number;
  readonly #lock: LockWaiter;
  /** Present when writes are group-committed. */
  readonly #group: CommitGroup | undefined;
  /** The operation running now found the lock held at first and waited for it on the clock. */
  #waitedForLock = false;
  /** The connection's busy timeout as last set: the blocking wait on first tries, 0 on retries. */
  #busyWaitMs = -1;
  #state: OpenState | undefined;
  /** The first `open()` opens the file; a second one running meanwhile waits for the same opening. */
  #opening: Promise<OpenState> | undefined;
  #closed = false;

  constructor(options: SqliteConnectionOptions) {
    this.#path = options.path;
    this.#busyTimeoutMs = options.busyTimeoutMs;
    this.#blockingWaitMs = options.blockingWaitMs;
    this.#lock = new LockWaiter({
      clock: options.clock,
      waitLimitMs: options.busyTimeoutMs,
      retryIntervalMs: options.lockRetryIntervalMs,
      isBusy,
    });
    this.#group = options.groupCommit
      ? new CommitGroup({ commit: (members, access) => this.#lock.run('group commit', (blocking) => this.#commitGroup(members, blocking), access) })
      : undefined;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The operation running now found the lock held at first and waited for it on the clock (a
   * call that got it at its first try waited at most `blockingWaitMs`, and the calls before it
   * in its commit group).
   */
  get waitedForLock(): boolean {
    return this.#waitedForLock;
  }

  /** Opens the file and creates or migrates the schema, once. */
  async open(): Promise<void> {
    if (this.#closed) throw new ClosedError('SqliteStore');
    this.#opening ??= this.#open();
    this.#state ??= await this.#opening;
  }

  /** What callers were already promised is written before the connection goes. */
  async close(): Promise<void> {
    await this.#group?.settled();
    this.#closed = true;
    this.#lock.close();
    const state = this.#state;
    state?.dynamic.clear();
    this.#state = undefined;
    try {
      state?.db.close();
    } catch (error) {
      throw new StoreError(`sqlite: close failed: ${messageOf(error)}`, { cause: error });
    }
  }

  ready(): OpenState {
    if (this.#closed) throw new ClosedError('SqliteStore');
    if (this.#state === undefined) throw new StoreError('SqliteStore: call init() before using the store');
    return this.#state;
  }

  /**
   * Runs one port operation (at most one transaction: it may run again after finding the
   * lock held), turning driver errors into `StoreError`s that name it. `access` says how it
   * waits for the lock (`LockAccess`).
   */
  async run<T>(operation: string, fn: (state: OpenState) => T, access: LockAccess = 'write'): Promise<T> {
    this.ready();
    try {
      if (this.#group !== undefined && access !== 'read') return await this.#group.add(() => fn(this.ready()), access);
      return await this.#lock.run(
        operation,
        (blocking) => {
          const state = this.ready();
          this.#setBusyWait(state.db, blocking ? this.#blockingWaitMs : 0);
          this.#waitedForLock = !blocking;
          return fn(state);
        },
        access,
      );
    } catch (error) {
      if (error instanceof HeraldError) throw error;
      if (error instanceof LockWaitTimeout) {
        throw new StoreError(`sqlite: ${error.message} (busyTimeoutMs: ${durationText(this.#busyTimeoutMs)})`, { cause: error });
      }
      throw new StoreError(`sqlite: ${operation} failed: ${messageOf(error)}`, { cause: error });
    }
  }

  async #open(): Promise<OpenState> {
    let db: BetterSqlite3.Database | undefined;
    try {
      if (this.#path !== ':memory:') mkdirSync(dirname(this.#path), { recursive: true });
      const opened = new Database(this.#path, { timeout: this.#blockingWaitMs });
      db = opened;
      this.#busyWaitMs = this.#blockingWaitMs;
      // WAL and the schema need the write lock on a first start: a producer holding it is waited for like
      // any other lock (safe to run again: every step is idempotent, the schema one transaction).
      return await this.#lock.run(
        'open',
        (blocking) => {
          this.#setBusyWait(opened, blocking ? this.#blockingWaitMs : 0);
          opened.pragma('journal_mode = WAL');
          // NORMAL in WAL: a power loss may drop the last commits but never corrupts; ~6× faster single-row commits.
          opened.pragma('synchronous = NORMAL');
          opened.pragma('cache_size = -16384');
          opened.pragma('temp_store = MEMORY');
          ensureSchema(opened);
          return prepareConnection(opened);
        },
        'write',
      );
    } catch (error) {
      db?.close();
      throw new StoreError(`sqlite: cannot open ${this.#path}: ${messageOf(error)}`, { cause: error });
    }
  }

  /**
   * One group's transaction: each member in a savepoint, so one that throws is undone alone.
   * Busy cannot happen after `BEGIN IMMEDIATE` has the lock; if it did, the whole group is undone
   * and tried again by the lock waiter, like any operation found busy.
   */
  #commitGroup(members: ReadonlyArray<() => unknown>, blocking: boolean): MemberOutcome[] {
    const { db, inSavepoint } = this.ready();
    this.#setBusyWait(db, blocking ? this.#blockingWaitMs : 0);
    this.#waitedForLock = !blocking;
    return db.transaction(() =>
      members.map((run): MemberOutcome => {
        try {
          return { ok: true, value: inSavepoint(run) };
        } catch (error) {
          if (isBusy(error)) throw error;
          return { ok: false, error };
        }
      }),
    ).immediate();
  }

  #setBusyWait(db: BetterSqlite3.Database, ms: number): void {
    if (this.#busyWaitMs === ms) return;
    db.pragma(`busy_timeout = ${ms}`);
    this.#busyWaitMs = ms;
  }
}

/** The connection's statements, each prepared once: run after the schema exists. */
function prepareConnection(db: BetterSqlite3.Database): OpenState {
  const dynamic = new DynamicStatements(db);
  const leases = new LeaseStatements(db);
  return {
    db,
    dataVersion: db.prepare<unknown[], number>('PRAGMA data_version').pluck(),
    dynamic,
    endpoints: new EndpointStatements(db),
    endpointChanges: new EndpointChangeStatements(db),
    fanOut: new FanOutStatements(db, leases),
    leases,
    claims: new ClaimStatements(db, leases),
    settle: new SettleStatements(db),
    log: new DeliveryLogStatements(db, dynamic),
    deadLetters: new DeadLetterStatements(db, dynamic),
    failures: new FailureGroupStatements(db, dynamic),
    retention: new RetentionStatements(db),
    tenantTokens: new TenantTokenStatements(db),
    eventTypes: new EventTypeStatements(db),
    replayJobs: new ReplayJobStatements(db),
    minutes: new DeliveryMinuteStatements(db),
    inSavepoint: db.transaction((run: () => unknown) => run()),
  };
}
