/**
 * The embedded store: one SQLite file in WAL mode, shared by every Herald
 * process on the machine (and by producers publishing from their own
 * connections).
 *
 *   created ──init()──► open ──close()──► closed
 *
 * Methods other than `init` and `close` reject with a `StoreError` before
 * `init()` and with a `ClosedError` after `close()`. better-sqlite3 is
 * synchronous: a method runs to completion on the event loop when the
 * database is free. Every method that writes more than one row runs in one
 * `BEGIN IMMEDIATE` transaction: taking the write lock up front means a
 * method finds the lock held before it has changed anything, never while a
 * read transaction tries to upgrade. A method that finds the lock held by
 * another connection blocks for at most `blockingWaitMs`, then waits for it
 * on the clock (`LockWaiter`), so a producer holding the lock for seconds
 * never freezes the process; it fails after `busyTimeoutMs` in all. With
 * `groupCommit` (the store's own thread turns it on), the writes issued while
 * one group waits share its transaction, each in a savepoint (`CommitGroup`).
 *
 * The work signal for other processes is `PRAGMA data_version`, which changes
 * on this connection whenever another connection commits; polling it costs a
 * few microseconds.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type BetterSqlite3 from 'better-sqlite3';
import type { Clock, TimerHandle } from '../../clock.ts';
import { ClosedError, ConflictError, HeraldError, NotFoundError, StoreError, ValidationError } from '../../errors.ts';
import { slotOf } from '../../ids.ts';
import type {
  Attempt,
  DeadLetter,
  Delivery,
  DeliveryJob,
  DeliveryStatus,
  Endpoint,
  OutboxEvent,
  Outcome,
} from '../../model.ts';
import { DeliveryStatus as Status, EndpointStatus } from '../../model.ts';
import type {
  ClaimRequest,
  DeadLetterFilter,
  DeliveryFilter,
  EndpointClaimRequest,
  EndpointPatch,
  FanOut,
  FanOutClaim,
  LeaseRequest,
  NodeRecord,
  PurgeResult,
  SettleResult,
  Settlement,
  SlotLease,
  Store,
} from '../port.ts';
import { CommitGroup, type MemberOutcome } from './commit-group.ts';
import { LockWaiter, LockWaitTimeout, type LockAccess } from './lock-waiter.ts';
import { ensureSchema, eventFromRow, TERMINAL_STATUSES_SQL, type EventRow } from './schema.ts';

export interface SqliteStoreOptions {
  /** The database file; its folder is created if missing. `:memory:` works for a single connection. */
  readonly path: string;
  readonly clock: Clock;
  /**
   * How often `watch()` polls `PRAGMA data_version` for commits by other connections.
   * @default 50
   */
  readonly pollIntervalMs?: number;
  /**
   * How long an operation waits in all for another connection's write lock before it fails
   * with a `StoreError`.
   * @default 5000
   */
  readonly busyTimeoutMs?: number;
  /**
   * How long an operation may block the event loop waiting for the lock (SQLite's own busy
   * wait) before it waits on the clock instead. Short locks (another Herald process's
   * transaction) are waited out here; long ones (a producer's slow transaction) cannot
   * freeze the process for longer than this.
   * @default 20
   */
  readonly blockingWaitMs?: number;
  /**
   * How often an operation waiting on the clock tries the lock again (without blocking).
   * @default 10
   */
  readonly lockRetryIntervalMs?: number;
  /**
   * Run the writes issued while a group waits in one transaction (`CommitGroup`). It pays where
   * writes arrive while others run: on the store's own thread (`SqliteStoreThread` turns it on).
   * Reads run at once as ever.
   * @default false
   */
  readonly groupCommit?: boolean;
}

const DEFAULTS = Object.freeze({
  pollIntervalMs: 50,
  busyTimeoutMs: 5_000,
  blockingWaitMs: 20,
  lockRetryIntervalMs: 10,
  groupCommit: false,
} satisfies Required<Omit<SqliteStoreOptions, 'path' | 'clock'>>);

/** Listing limits: the port's default, and a cap so one request cannot read the whole table. */
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1_000;
/** Rows per transaction for bulk work (replay, purge), so other processes get the write lock in between. */
const CHUNK = 500;
const MAX_SLOT_COUNT = 65_536;

interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string;
  event_types: string;
  retry: string;
  timeout_ms: number;
  mode: string;
  concurrency: number;
  status: string;
  disabled_reason: string | null;
  failing_since: number | null;
  secrets: string;
  created_at: number;
  updated_at: number;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  slot: number;
  status: string;
  attempts: number;
  round: number;
  next_attempt_at: number;
  lease_epoch: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
}

interface AttemptRow {
  delivery_id: string;
  number: number;
  round: number;
  started_at: number;
  duration_ms: number;
  outcome: string;
  error: string | null;
}

interface DeadLetterRow {
  id: string;
  delivery_id: string;
  event_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  payload: string;
  reason: string;
  last_outcome: string;
  round: number;
  created_at: number;
  replayed_at: number | null;
}

interface NodeRow {
  id: string;
  started_at: number;
  seen_at: number;
}

interface LeaseRow {
  slot: number;
  owner: string;
  until: number;
  epoch: number;
}

/** What a settle statement hands back about the delivery it changed. */
interface SettledRow {
  attempts: number;
  round: number;
  endpoint_id: string;
  event_id: string;
  tenant_id: string;
  event_type: string;
}

type Params = Record<string, string | number | null>;

// A delivery is settled only while in flight at the epoch it was claimed with, and only
// while that epoch is still the slot's: once another owner has taken the slot, the old
// claimer's writes are refused even before the new owner reclaims the delivery.
const FENCE = `id = @id AND status = 'in_flight' AND lease_epoch = @epoch
  AND lease_epoch = (SELECT epoch FROM leases WHERE leases.slot = deliveries.slot)`;
const SETTLED = `RETURNING attempts, round, endpoint_id, event_id, tenant_id, event_type`;

/*
 * Claiming: due work in the owner's live slots is pending and due, or in flight
 * under an epoch older than the slot's (claimed by a process that crashed or
 * lost the slot). Each endpoint gets at most `perEndpoint` rows (ROW_NUMBER)
 * so one backlog cannot fill the claim; then the earliest due go first.
 *
 * Two ways to find the candidates, the same rows either way:
 * - by scan: every due row, in one pass over the due index. Cheapest while
 *   little is due; its cost grows with the backlog.
 * - by endpoint: walk the distinct endpoints with pending rows in each owned
 *   slot (a skip scan over `deliveries_pending_claim`) and take only the first
 *   `perEndpoint` due rows of each. Its cost grows with the number of busy
 *   endpoints, not with the backlog (measured: ~7 ms per claim of 100 with a
 *   50 000-row backlog over 200 endpoints, against ~100 ms by scan).
 * `claimDue` picks the second once more than CLAIM_SCAN_MAX rows are due.
 */
const CLAIM_SCAN_MAX = 1_000;

// RETURNING allows no table.* wildcard.
const CLAIMED_COLUMNS = `deliveries.id, deliveries.event_id, deliveries.endpoint_id, deliveries.tenant_id, deliveries.event_type,
  deliveries.slot, deliveries.status, deliveries.attempts, deliveries.round, deliveries.next_attempt_at,
  deliveries.lease_epoch, deliveries.last_error, deliveries.created_at, deliveries.updated_at, deliveries.delivered_at`;

// Correlated EXISTS rather than `IN (SELECT … FROM endpoints)`: given an IN list, the planner
// may drive the claim from every delivery of every enabled endpoint, delivered ones included.
const claimFilters = (endpointId: string): string => `
  AND ${endpointId} NOT IN (SELECT value FROM json_each(@skip))
  AND (@endpointId IS NULL OR ${endpointId} = @endpointId)
  AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = ${endpointId} AND e.status = 'enabled')`;

const ORPHANS = `SELECT d.id, d.endpoint_id, d.next_attempt_at, owned.epoch
  FROM deliveries d JOIN owned ON owned.slot = d.slot
  WHERE d.status = 'in_flight' AND d.lease_epoch < owned.epoch ${claimFilters('d.endpoint_id')}`;

const CLAIM_BY_SCAN = `candidates AS (
  SELECT d.id, d.endpoint_id, d.next_attempt_at, owned.epoch
  FROM deliveries d JOIN owned ON owned.slot = d.slot
  WHERE d.status = 'pending' AND d.next_attempt_at <= @now ${claimFilters('d.endpoint_id')}
  UNION ALL
  ${ORPHANS}
)`;

const CLAIM_BY_ENDPOINT = `busy (slot, epoch, endpoint_id) AS (
  SELECT slot, epoch, (SELECT min(endpoint_id) FROM deliveries WHERE status = 'pending' AND slot = owned.slot)
  FROM owned
  UNION ALL
  SELECT busy.slot, busy.epoch, (SELECT min(endpoint_id) FROM deliveries
    WHERE status = 'pending' AND slot = busy.slot AND endpoint_id > busy.endpoint_id)
  FROM busy WHERE busy.endpoint_id IS NOT NULL
),
candidates AS (
  SELECT d.id, d.endpoint_id, d.next_attempt_at, busy.epoch
  FROM busy JOIN deliveries d ON d.id IN (
    SELECT id FROM deliveries
    WHERE status = 'pending' AND slot = busy.slot AND endpoint_id = busy.endpoint_id AND next_attempt_at <= @now
    ORDER BY next_attempt_at, id LIMIT @perEndpoint)
  WHERE busy.endpoint_id IS NOT NULL ${claimFilters('busy.endpoint_id')}
  UNION ALL
  ${ORPHANS}
)`;

// One endpoint's pending due rows, earliest first (ties in insertion order): a seek on
// `deliveries_pending_claim` that stops at the limit, so the cost follows the rows taken, not the
// endpoint's backlog. Positional parameters (cheaper to bind): it runs once per endpoint per refill.
const ENDPOINT_DUE = `SELECT id FROM deliveries
  WHERE status = 'pending' AND slot = ? AND endpoint_id = ? AND next_attempt_at <= ?
  ORDER BY next_attempt_at, rowid LIMIT ?`;

function claimSql(candidates: string): string {
  return `WITH RECURSIVE
    owned AS (SELECT slot, epoch FROM leases WHERE owner = @owner AND until > @now),
    ${candidates},
    ranked AS (
      SELECT id, next_attempt_at, epoch,
             ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id) AS rank
      FROM candidates
    ),
    picked AS (
      SELECT id, epoch FROM ranked WHERE rank <= @perEndpoint ORDER BY next_attempt_at, id LIMIT @limit
    )
    -- Not UPDATE … FROM picked: the planner may then scan all deliveries to join the few picked.
    UPDATE deliveries
    SET status = 'in_flight', updated_at = @now,
        lease_epoch = (SELECT picked.epoch FROM picked WHERE picked.id = deliveries.id)
    WHERE deliveries.id IN (SELECT id FROM picked)
    RETURNING ${CLAIMED_COLUMNS}`;
}

function prepareStatements(db: BetterSqlite3.Database) {
  const stmt = <Row = unknown>(sql: string) => db.prepare<unknown[], Row>(sql);
  return {
    dataVersion: stmt<number>('PRAGMA data_version').pluck(),
    initSlotCount: stmt(`INSERT OR IGNORE INTO meta (key, value) VALUES ('slot_count', ?)`),
    getSlotCount: stmt<string>(`SELECT value FROM meta WHERE key = 'slot_count'`).pluck(),

    insertEndpoint: stmt(`INSERT INTO endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode,
        concurrency, status, disabled_reason, failing_since, secrets, created_at, updated_at)
      VALUES (@id, @tenant_id, @url, @description, @event_types, @retry, @timeout_ms, @mode,
        @concurrency, @status, @disabled_reason, @failing_since, @secrets, @created_at, @updated_at)`),
    replaceEndpoint: stmt(`UPDATE endpoints SET url = @url, description = @description, event_types = @event_types,
        retry = @retry, timeout_ms = @timeout_ms, mode = @mode, concurrency = @concurrency, status = @status,
        disabled_reason = @disabled_reason, failing_since = @failing_since, secrets = @secrets, updated_at = @updated_at
      WHERE id = @id`),
    getEndpoint: stmt<EndpointRow>(`SELECT * FROM endpoints WHERE id = ?`),
    listEndpoints: stmt<EndpointRow>(`SELECT * FROM endpoints ORDER BY created_at, id`),
    listTenantEndpoints: stmt<EndpointRow>(`SELECT * FROM endpoints WHERE tenant_id = ? ORDER BY created_at, id`),
    deleteEndpoint: stmt(`DELETE FROM endpoints WHERE id = ?`),
    resumeDeliveries: stmt(`UPDATE deliveries SET next_attempt_at = @now, updated_at = @now
      WHERE endpoint_id = @endpointId AND status = 'pending' AND next_attempt_at > @now`),
    cancelDeliveries: stmt(`UPDATE deliveries SET status = 'cancelled', updated_at = @now
      WHERE endpoint_id = @endpointId AND status IN ('pending', 'in_flight')`),
    tenantExists: stmt<number>(`SELECT 1 FROM endpoints WHERE tenant_id = ? LIMIT 1`).pluck(),
    clearFailing: stmt(`UPDATE endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL`),
    markFailing: stmt(`UPDATE endpoints SET failing_since = @since WHERE id = @id AND failing_since IS NULL`),

    insertEvent: stmt(`INSERT INTO events (id, tenant_id, type, payload, created_at, endpoint_id)
      VALUES (@id, @tenantId, @type, @payload, @createdAt, @endpointId) ON CONFLICT (id) DO NOTHING`),
    getEvent: stmt<EventRow>(`SELECT * FROM events WHERE id = ?`),
    eventsByIds: stmt<EventRow>(`SELECT * FROM events WHERE id IN (SELECT value FROM json_each(?))`),
    unfannedEvents: stmt<EventRow>(
      `SELECT * FROM events WHERE fanned_out_at IS NULL ORDER BY created_at, rowid LIMIT ?`,
    ),
    // Through the partial index of waiting events: the count stops at the cap.
    countUnfanned: stmt<number>(`SELECT count(*) FROM (SELECT 1 FROM events WHERE fanned_out_at IS NULL LIMIT ?)`).pluck(),
    markFannedOut: stmt(`UPDATE events SET fanned_out_at = COALESCE(fanned_out_at, @now) WHERE id = @id`),
    // RETURNING gives the row only when it was inserted (not when the id existed).
    insertDelivery: stmt<DeliveryRow>(`INSERT OR IGNORE INTO deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot,
        status, attempts, round, next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at)
      VALUES (@id, @eventId, @endpointId, @tenantId, @eventType, @slot,
        @status, 0, 0, @nextAttemptAt, @epoch, NULL, @createdAt, CASE WHEN @status = 'pending' THEN @createdAt ELSE @now END, NULL)
      RETURNING ${CLAIMED_COLUMNS}`),

    acquireLease: stmt(`INSERT INTO leases (slot, owner, until, epoch) VALUES (@slot, @owner, @until, 1)
      ON CONFLICT (slot) DO UPDATE SET
        epoch = CASE WHEN leases.owner = excluded.owner THEN leases.epoch ELSE leases.epoch + 1 END,
        owner = excluded.owner,
        until = excluded.until
      WHERE leases.owner IS NULL OR leases.until <= @now OR leases.owner = excluded.owner`),
    heldLeases: stmt<LeaseRow>(`SELECT slot, owner, until, epoch FROM leases
      WHERE owner = @owner AND until > @now AND slot IN (SELECT value FROM json_each(@slots)) ORDER BY slot`),
    releaseLeases: stmt(`UPDATE leases SET owner = NULL, until = 0
      WHERE owner = @owner AND slot IN (SELECT value FROM json_each(@slots))`),
    heartbeat: stmt(`INSERT INTO nodes (id, started_at, seen_at) VALUES (@id, @startedAt, @now)
      ON CONFLICT (id) DO UPDATE SET seen_at = MAX(nodes.seen_at, excluded.seen_at)`),
    listNodes: stmt<NodeRow>(`SELECT id, started_at, seen_at FROM nodes WHERE seen_at >= ? ORDER BY id`),
    removeNode: stmt(`DELETE FROM nodes WHERE id = ?`),
    listLeases: stmt<LeaseRow>(`SELECT slot, owner, until, epoch FROM leases WHERE owner IS NOT NULL ORDER BY slot`),

    claimByScan: stmt<DeliveryRow>(claimSql(CLAIM_BY_SCAN)),
    claimByEndpoint: stmt<DeliveryRow>(claimSql(CLAIM_BY_ENDPOINT)),
    ownedLease: stmt<{ epoch: number }>(`SELECT epoch FROM leases WHERE slot = @slot AND owner = @owner AND until > @now`),
    endpointDue: stmt<string>(ENDPOINT_DUE).pluck(),
    endpointEnabled: stmt<number>(`SELECT 1 FROM endpoints WHERE id = ? AND status = 'enabled'`).pluck(),
    claimById: stmt<DeliveryRow>(`UPDATE deliveries SET status = 'in_flight', updated_at = ?, lease_epoch = ?
      WHERE id = ? RETURNING ${CLAIMED_COLUMNS}`),
    countDue: stmt<number>(`SELECT count(*) FROM
      (SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= @now LIMIT @cap)`).pluck(),
    // A claimed delivery whose event is gone (deleted by hand) can never be sent.
    cancelOrphan: stmt(`UPDATE deliveries SET status = 'cancelled', last_error = 'event missing', updated_at = @now
      WHERE id = @id`),

    settleDelivered: stmt<SettledRow>(`UPDATE deliveries SET status = 'delivered', attempts = attempts + 1,
        last_error = @error, delivered_at = @now, updated_at = @now WHERE ${FENCE} ${SETTLED}`),
    settleRetry: stmt<SettledRow>(`UPDATE deliveries SET status = 'pending', attempts = attempts + 1,
        next_attempt_at = @next, last_error = @error, updated_at = @now WHERE ${FENCE} ${SETTLED}`),
    settleDead: stmt<SettledRow>(`UPDATE deliveries SET status = 'dead', attempts = attempts + 1,
        last_error = @error, updated_at = @now WHERE ${FENCE} ${SETTLED}`),
    settleRelease: stmt<SettledRow>(`UPDATE deliveries SET status = 'pending', next_attempt_at = @next,
        updated_at = @now WHERE ${FENCE} ${SETTLED}`),
    insertAttempt: stmt(`INSERT INTO attempts (delivery_id, number, round, started_at, duration_ms, outcome, error)
      VALUES (@deliveryId, @number, @round, @startedAt, @durationMs, @outcome, @error)`),
    insertDeadLetter: stmt(`INSERT INTO dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type,
        payload, reason, last_outcome, round, created_at, replayed_at)
      SELECT @id, @deliveryId, e.id, @endpointId, @tenantId, @eventType, e.payload, @reason, @lastOutcome, @round, @now, NULL
      FROM events e WHERE e.id = @eventId`),

    getDelivery: stmt<DeliveryRow>(`SELECT * FROM deliveries WHERE id = ?`),
    listAttempts: stmt<AttemptRow>(`SELECT * FROM attempts WHERE delivery_id = ? ORDER BY id`),
    listRoundAttempts: stmt<AttemptRow>(`SELECT * FROM attempts WHERE delivery_id = ? AND round = ? ORDER BY id`),
    countDeliveries: stmt<{ status: string; n: number }>(
      `SELECT status, count(*) AS n FROM deliveries GROUP BY status`,
    ),
    nextDueAt: stmt<number>(`SELECT d.next_attempt_at FROM deliveries d
      WHERE d.status = 'pending'
        AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.status = 'enabled')
      ORDER BY d.next_attempt_at LIMIT 1`).pluck(),

    getDeadLetter: stmt<DeadLetterRow>(`SELECT * FROM dead_letters WHERE id = ?`),
    unreplayedByIds: stmt<DeadLetterRow>(`SELECT * FROM dead_letters
      WHERE id IN (SELECT value FROM json_each(?)) AND replayed_at IS NULL ORDER BY created_at, id`),
    // A delivery whose endpoint was deleted stays dead: replaying it would leave it pending forever.
    replayDelivery: stmt(`UPDATE deliveries SET status = 'pending', attempts = 0, round = round + 1,
        next_attempt_at = @now, last_error = NULL, delivered_at = NULL, updated_at = @now
      WHERE id = @id AND status = 'dead' AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id)`),
    markReplayed: stmt(`UPDATE dead_letters SET replayed_at = @now WHERE id = @id`),

    purgeAttempts: stmt(`DELETE FROM attempts WHERE id IN
      (SELECT id FROM attempts WHERE started_at < @before LIMIT @limit)`),
    purgeDeadLetters: stmt(`DELETE FROM dead_letters WHERE id IN
      (SELECT id FROM dead_letters WHERE created_at < @before LIMIT @limit)`),
    // An event goes once it is fanned out, every delivery of it finished before the horizon,
    // and no dead letter of it still waits for a replay (a replay needs the event to send).
    purgeableEvents: stmt<string>(`SELECT ev.id FROM events ev
      WHERE ev.created_at < @before AND ev.fanned_out_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id
          AND (d.status NOT IN ${TERMINAL_STATUSES_SQL} OR d.updated_at >= @before))
        AND NOT EXISTS (SELECT 1 FROM dead_letters dl WHERE dl.event_id = ev.id AND dl.replayed_at IS NULL)
      LIMIT @limit`).pluck(),
    purgeEventDeliveries: stmt(`DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?))`),
    purgeEvents: stmt(`DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))`),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

interface OpenState {
  readonly db: BetterSqlite3.Database;
  readonly s: Statements;
  /** Runs a function in a savepoint of the open transaction (a commit group's member). */
  readonly inSavepoint: (run: () => unknown) => unknown;
}

export class SqliteStore implements Store {
  readonly #path: string;
  readonly #clock: Clock;
  readonly #pollIntervalMs: number;
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
  /** The first `init()` opens the file; a second one running meanwhile waits for the same opening. */
  #opening: Promise<OpenState> | undefined;
  /** Fixed by the first `init()` on this data; deliveries' slots are derived from it. */
  #slotCount = 0;
  #closed = false;
  readonly #watchers = new Set<TimerHandle>();
  /** Statements whose text depends on which filters are set, prepared once per shape. */
  readonly #dynamic = new Map<string, BetterSqlite3.Statement<unknown[], unknown>>();

  constructor(options: SqliteStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('SqliteStore options', 'must be an object with path and clock');
    }
    if (typeof options.path !== 'string' || options.path.trim() === '') {
      throw new ValidationError('path', `must be a non-empty file path (got ${JSON.stringify(options.path)})`);
    }
    const clock = options.clock as Partial<Clock> | undefined;
    if (typeof clock?.now !== 'function' || typeof clock.setInterval !== 'function') {
      throw new ValidationError('clock', 'must be a Clock with now() and setInterval()');
    }
    const pollIntervalMs = options.pollIntervalMs ?? DEFAULTS.pollIntervalMs;
    if (!Number.isInteger(pollIntervalMs) || pollIntervalMs < 1) {
      throw new ValidationError('pollIntervalMs', `must be a positive integer (got ${String(pollIntervalMs)})`);
    }
    const busyTimeoutMs = nonNegativeInteger(options.busyTimeoutMs ?? DEFAULTS.busyTimeoutMs, 'busyTimeoutMs');
    const blockingWaitMs = nonNegativeInteger(options.blockingWaitMs ?? DEFAULTS.blockingWaitMs, 'blockingWaitMs');
    const lockRetryIntervalMs = options.lockRetryIntervalMs ?? DEFAULTS.lockRetryIntervalMs;
    if (!Number.isInteger(lockRetryIntervalMs) || lockRetryIntervalMs < 1) {
      throw new ValidationError('lockRetryIntervalMs', `must be a positive integer (got ${String(lockRetryIntervalMs)})`);
    }
    this.#path = options.path;
    this.#clock = options.clock;
    this.#pollIntervalMs = pollIntervalMs;
    this.#busyTimeoutMs = busyTimeoutMs;
    this.#blockingWaitMs = Math.min(blockingWaitMs, busyTimeoutMs);
    this.#lock = new LockWaiter({
      clock: options.clock,
      waitLimitMs: busyTimeoutMs,
      retryIntervalMs: lockRetryIntervalMs,
      isBusy,
    });
    this.#group = (options.groupCommit ?? DEFAULTS.groupCommit)
      ? new CommitGroup({ commit: (members, access) => this.#lock.run('group commit', (blocking) => this.#commitGroup(members, blocking), access) })
      : undefined;
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    const wanted = options.slotCount;
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > MAX_SLOT_COUNT) {
      throw new ValidationError('slotCount', `must be an integer from 1 to ${MAX_SLOT_COUNT} (got ${String(wanted)})`);
    }
    if (this.#closed) throw new ClosedError('SqliteStore');
    this.#opening ??= this.#open();
    this.#state ??= await this.#opening;
    return this.#run('init', ({ db, s }) =>
      db.transaction(() => {
        // The first start fixes the slot count for the data: endpoints hash into it forever after.
        s.initSlotCount.run(String(wanted));
        const stored = Number(s.getSlotCount.get());
        this.#slotCount = stored;
        return { slotCount: stored };
      }).immediate(),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // What callers were already promised is written before the connection goes.
    await this.#group?.settled();
    this.#closed = true;
    this.#lock.close();
    for (const watcher of this.#watchers) watcher.cancel();
    this.#watchers.clear();
    this.#dynamic.clear();
    const state = this.#state;
    this.#state = undefined;
    try {
      state?.db.close();
    } catch (error) {
      throw new StoreError(`sqlite: close failed: ${messageOf(error)}`, { cause: error });
    }
  }

  watch(listener: () => void): () => void {
    const { s } = this.#ready();
    let seen = s.dataVersion.get();
    const timer = this.#clock.setInterval(() => {
      let version: number | undefined;
      try {
        version = s.dataVersion.get();
      } catch {
        // Closed under us: close() is about to cancel this timer.
        return;
      }
      if (version === seen) return;
      seen = version;
      listener();
    }, this.#pollIntervalMs);
    this.#watchers.add(timer);
    return () => {
      timer.cancel();
      this.#watchers.delete(timer);
    };
  }

  // Endpoints

  async createEndpoint(endpoint: Endpoint): Promise<void> {
    return this.#run('createEndpoint', ({ s }) => {
      try {
        s.insertEndpoint.run(endpointToRow(endpoint));
      } catch (error) {
        if (sqliteCode(error) === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
          throw new ConflictError(`endpoint '${endpoint.id}' already exists`);
        }
        throw error;
      }
    });
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', ({ s }) => {
      const row = s.getEndpoint.get(id);
      return row === undefined ? undefined : endpointFromRow(row);
    }, 'read');
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', ({ s }) => {
      const rows = filter?.tenantId === undefined ? s.listEndpoints.all() : s.listTenantEndpoints.all(filter.tenantId);
      return rows.map(endpointFromRow);
    }, 'read');
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#run('updateEndpoint', ({ db, s }) =>
      db.transaction(() => {
        const row = s.getEndpoint.get(id);
        if (row === undefined) return undefined;
        const current = endpointFromRow(row);
        const changes = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
        const next: Endpoint = { ...current, ...changes, id: current.id, tenantId: current.tenantId, updatedAt: now };
        s.replaceEndpoint.run(endpointToRow(next));
        return next;
      }).immediate(),
    );
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', ({ db, s }) =>
      db.transaction(() => {
        const deleted = s.deleteEndpoint.run(id).changes > 0;
        if (deleted) s.cancelDeliveries.run({ endpointId: id, now });
        return deleted;
      }).immediate(),
    );
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', ({ s }) => s.resumeDeliveries.run({ endpointId, now }).changes);
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', ({ s }) => s.tenantExists.get(tenantId) !== undefined, 'read');
  }

  // Outbox

  /** Idempotent: an event whose id is already stored is left as it is. */
  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    return this.#run('appendEvents', ({ db, s }) =>
      db.transaction(() => {
        for (const event of events) {
          s.insertEvent.run({
            id: event.id,
            tenantId: event.tenantId,
            type: event.type,
            payload: event.payload,
            createdAt: event.createdAt,
            endpointId: event.endpointId,
          });
        }
      }).immediate(),
    );
  }

  async unfannedEvents(limit: number): Promise<OutboxEvent[]> {
    return this.#run('unfannedEvents', ({ s }) => s.unfannedEvents.all(Math.max(0, Math.floor(limit))).map(eventFromRow), 'read');
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    const limit = Math.max(0, Math.floor(cap));
    return this.#run('countUnfannedEvents', ({ s }) => s.countUnfanned.get(limit) ?? 0, 'read');
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    return this.#run('recordFanOuts', ({ db, s }) =>
      db.transaction(() => {
        const claimed: Delivery[] = [];
        const epochs = new Map<number, number | undefined>();
        const epochOf = (slot: number, owner: string): number | undefined => {
          if (!epochs.has(slot)) epochs.set(slot, s.ownedLease.get({ slot, owner, now })?.epoch);
          return epochs.get(slot);
        };
        for (const { eventId, deliveries } of fanOuts) {
          if (s.markFannedOut.run({ id: eventId, now }).changes === 0) throw new NotFoundError('event', eventId);
          for (const d of deliveries) {
            const epoch = claim?.deliveryIds.has(d.id) === true ? epochOf(d.slot, claim.owner) : undefined;
            const row = s.insertDelivery.get({
              id: d.id,
              eventId: d.eventId,
              endpointId: d.endpointId,
              tenantId: d.tenantId,
              eventType: d.eventType,
              slot: d.slot,
              status: epoch === undefined ? Status.PENDING : Status.IN_FLIGHT,
              epoch: epoch ?? 0,
              nextAttemptAt: d.nextAttemptAt,
              createdAt: d.createdAt,
              now,
            });
            if (row !== undefined && epoch !== undefined) claimed.push(deliveryFromRow(row));
          }
        }
        return claimed;
      }).immediate(),
    );
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', ({ s }) => {
      const row = s.getEvent.get(id);
      return row === undefined ? undefined : eventFromRow(row);
    }, 'read');
  }

  // Leases

  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, slots, now, leaseMs } = request;
    const askedAt = this.#clock.now();
    return this.#run('acquireLeases', ({ db, s }) =>
      db.transaction(() => {
        // Count the lease from the moment the write lock is ours: waiting for it behind another
        // connection must not shorten the lease we write (a lapse means a takeover and a duplicate
        // send). The wait is measured on this store's clock and added to the caller's `now`, so the
        // two clocks need not agree (the store may run on a thread of its own, on the system clock).
        // A call that got the lock at its first try waited at most `blockingWaitMs` (and the calls
        // before it in its commit group): milliseconds against a lease of seconds, not counted.
        const at = this.#waitedForLock ? now + Math.max(0, this.#clock.now() - askedAt) : now;
        const until = at + leaseMs;
        for (const slot of slots) s.acquireLease.run({ slot, owner, until, now: at });
        return s.heldLeases.all({ owner, now: at, slots: JSON.stringify(slots) }).map(leaseFromRow);
      }).immediate(),
      'urgent',
    );
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    return this.#run('releaseLeases', ({ s }) => {
      s.releaseLeases.run({ owner, slots: JSON.stringify(slots) });
    });
  }

  // Membership

  async heartbeat(node: { readonly id: string; readonly startedAt: number; readonly now: number }): Promise<void> {
    return this.#run(
      'heartbeat',
      ({ s }) => {
        s.heartbeat.run({ id: node.id, startedAt: node.startedAt, now: node.now });
      },
      'urgent',
    );
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', ({ s }) =>
      s.listNodes.all(seenSince).map((row) => ({ id: row.id, startedAt: row.started_at, seenAt: row.seen_at })), 'read'
    );
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', ({ s }) => {
      s.removeNode.run(id);
    });
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', ({ s }) => s.listLeases.all().map(leaseFromRow), 'read');
  }

  // Deliveries

  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    if (request.limit <= 0 || request.perEndpointLimit <= 0) return [];
    return this.#run('claimDue', ({ db, s }) =>
      db.transaction(() => {
        const backlog = s.countDue.get({ now, cap: CLAIM_SCAN_MAX + 1 }) ?? 0;
        const statement = backlog > CLAIM_SCAN_MAX ? s.claimByEndpoint : s.claimByScan;
        const rows = statement.all({
          owner,
          now,
          skip: JSON.stringify(request.skipEndpointIds),
          endpointId: request.endpointId ?? null,
          perEndpoint: Math.floor(request.perEndpointLimit),
          limit: Math.floor(request.limit),
        });
        return this.#jobsFor(s, rows, now);
      }).immediate(),
    );
  }

  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    const wanted = request.endpoints.filter((want) => want.limit >= 1);
    if (wanted.length === 0) return [];
    const slotCount = this.#slotCount;
    return this.#run('claimForEndpoints', ({ db, s }) =>
      db.transaction(() => {
        const rows: DeliveryRow[] = [];
        for (const { endpointId, limit } of wanted) {
          const slot = slotOf(endpointId, slotCount);
          const lease = s.ownedLease.get({ slot, owner, now });
          if (lease === undefined || s.endpointEnabled.get(endpointId) === undefined) continue;
          for (const id of s.endpointDue.all(slot, endpointId, now, Math.floor(limit))) {
            const row = s.claimById.get(now, lease.epoch, id);
            if (row !== undefined) rows.push(row);
          }
        }
        return this.#jobsFor(s, rows, now);
      }).immediate(),
    );
  }

  /** Claimed rows with their events, earliest due first; a row whose event is gone is cancelled. */
  #jobsFor(s: Statements, rows: DeliveryRow[], now: number): DeliveryJob[] {
    if (rows.length === 0) return [];
    const eventIds = [...new Set(rows.map((row) => row.event_id))];
    const events = new Map(s.eventsByIds.all(JSON.stringify(eventIds)).map((row) => [row.id, eventFromRow(row)]));
    // RETURNING gives no order: restore the claim's, earliest due first.
    rows.sort((a, b) => a.next_attempt_at - b.next_attempt_at || compareText(a.id, b.id));
    const jobs: DeliveryJob[] = [];
    for (const row of rows) {
      const event = events.get(row.event_id);
      if (event === undefined) {
        s.cancelOrphan.run({ id: row.id, now });
        continue;
      }
      jobs.push({ delivery: deliveryFromRow(row), event });
    }
    return jobs;
  }

  /**
   * One transaction for the whole batch. Attempt numbers are the store's count
   * of attempts in the round after this one, so they stay right even if the
   * engine's copy of the delivery was stale.
   */
  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    return this.#run('settle', ({ db, s }) =>
      db.transaction(() => {
        const applied: string[] = [];
        const fenced: string[] = [];
        for (const settlement of settlements) {
          if (this.#settleOne(s, settlement, now)) applied.push(settlement.deliveryId);
          else fenced.push(settlement.deliveryId);
        }
        return { applied, fenced };
      }).immediate(),
    );
  }

  #settleOne(s: Statements, settlement: Settlement, now: number): boolean {
    const fence = { id: settlement.deliveryId, epoch: settlement.epoch, now };
    if (settlement.kind === 'release') {
      return s.settleRelease.get({ ...fence, next: settlement.nextAttemptAt }) !== undefined;
    }
    const { attempt } = settlement;
    let row: SettledRow | undefined;
    switch (settlement.kind) {
      case 'delivered':
        row = s.settleDelivered.get({ ...fence, error: attempt.error });
        break;
      case 'retry':
        row = s.settleRetry.get({ ...fence, error: attempt.error, next: settlement.nextAttemptAt });
        break;
      case 'dead':
        row = s.settleDead.get({ ...fence, error: attempt.error });
        break;
    }
    if (row === undefined) return false;
    const outcome = JSON.stringify(attempt.outcome);
    s.insertAttempt.run({
      deliveryId: settlement.deliveryId,
      number: row.attempts,
      round: row.round,
      startedAt: attempt.startedAt,
      durationMs: attempt.durationMs,
      outcome,
      error: attempt.error,
    });
    if (settlement.kind === 'delivered') {
      s.clearFailing.run(row.endpoint_id);
      return true;
    }
    s.markFailing.run({ id: row.endpoint_id, since: attempt.startedAt });
    if (settlement.kind === 'dead') {
      const inserted = s.insertDeadLetter.run({
        id: settlement.deadLetterId,
        deliveryId: settlement.deliveryId,
        endpointId: row.endpoint_id,
        tenantId: row.tenant_id,
        eventType: row.event_type,
        reason: settlement.reason,
        lastOutcome: outcome,
        round: row.round,
        now,
        eventId: row.event_id,
      });
      if (inserted.changes === 0) {
        throw new StoreError(`sqlite: cannot dead-letter delivery '${settlement.deliveryId}': its event '${row.event_id}' is missing`);
      }
    }
    return true;
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', ({ s }) => {
      const row = s.getDelivery.get(id);
      return row === undefined ? undefined : deliveryFromRow(row);
    }, 'read');
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#run('listDeliveries', () => {
      const where: string[] = [];
      const params: Params = { limit: clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT) };
      const add = (sql: string, key: string, value: string | number | undefined): void => {
        if (value === undefined) return;
        where.push(sql);
        params[key] = value;
      };
      add('endpoint_id = @endpointId', 'endpointId', filter.endpointId);
      add('tenant_id = @tenantId', 'tenantId', filter.tenantId);
      add('event_id = @eventId', 'eventId', filter.eventId);
      add('status = @status', 'status', filter.status);
      add('created_at >= @since', 'since', filter.since);
      add('created_at < @until', 'until', filter.until);
      add('event_type = @eventType', 'eventType', filter.eventType);
      if (filter.after !== undefined) {
        where.push('(created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))');
        params.afterCreatedAt = filter.after.createdAt;
        params.afterId = filter.after.id;
      }
      const sql = `SELECT * FROM deliveries ${whereClause(where)} ORDER BY created_at DESC, id DESC LIMIT @limit`;
      return this.#dynamicStatement<DeliveryRow>(sql).all(params).map(deliveryFromRow);
    }, 'read');
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', ({ s }) => s.listAttempts.all(deliveryId).map(attemptFromRow), 'read');
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', ({ s }) => {
      const counts = Object.fromEntries(Object.values(Status).map((status) => [status, 0])) as Record<DeliveryStatus, number>;
      for (const { status, n } of s.countDeliveries.all()) {
        if (status in counts) counts[status as DeliveryStatus] = n;
      }
      return counts;
    }, 'read');
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', ({ s }) => s.nextDueAt.get(), 'read');
  }

  // Dead letters

  /** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', ({ s }) => {
      const row = s.getDeadLetter.get(id);
      return row === undefined ? undefined : this.#deadLetterFromRow(s, row);
    }, 'read');
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.#run('listDeadLetters', ({ s }) => {
      const { where, params } = deadLetterWhere(filter);
      params['limit'] = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
      const sql = `SELECT * FROM dead_letters ${whereClause(where)} ORDER BY created_at DESC, rowid DESC LIMIT @limit`;
      return this.#dynamicStatement<DeadLetterRow>(sql).all(params).map((row) => this.#deadLetterFromRow(s, row));
    }, 'read');
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are
   * ignored), `CHUNK` per transaction so a huge replay never holds the write
   * lock for long. Dead letters whose endpoint has been deleted are skipped.
   */
  async replayDeadLetters(
    selection: { readonly ids: readonly string[] } | DeadLetterFilter,
    now: number,
  ): Promise<string[]> {
    // One transaction per chunk, each its own operation: another process gets the lock in
    // between, and a chunk that finds the lock held waits without blocking the event loop.
    const replayChunk = ({ db, s }: OpenState, rows: readonly DeadLetterRow[]): string[] =>
      db.transaction(() => {
        const ids: string[] = [];
        for (const row of rows) {
          if (s.replayDelivery.run({ id: row.delivery_id, now }).changes === 0) continue;
          s.markReplayed.run({ id: row.id, now });
          ids.push(row.id);
        }
        return ids;
      }).immediate();
    const replayed: string[] = [];
    if ('ids' in selection) {
      for (let i = 0; i < selection.ids.length; i += CHUNK) {
        const ids = JSON.stringify(selection.ids.slice(i, i + CHUNK));
        replayed.push(...(await this.#run('replayDeadLetters', (state) => replayChunk(state, state.s.unreplayedByIds.all(ids)))));
      }
      return replayed;
    }
    // Keyset pagination: skipped rows stay unreplayed, so "the next unreplayed ones" would loop forever.
    const { where, params } = deadLetterWhere({ ...selection, includeReplayed: false });
    where.push('(created_at, id) > (@afterCreatedAt, @afterId)');
    const pageSql = `SELECT * FROM dead_letters ${whereClause(where)} ORDER BY created_at, id LIMIT ${CHUNK}`;
    let after: { createdAt: number; id: string } = { createdAt: Number.MIN_SAFE_INTEGER, id: '' };
    for (;;) {
      const rows = await this.#run('replayDeadLetters', (state) => {
        const page = this.#dynamicStatement<DeadLetterRow>(pageSql).all({ ...params, afterCreatedAt: after.createdAt, afterId: after.id });
        if (page.length > 0) replayed.push(...replayChunk(state, page));
        return page;
      });
      const last = rows.at(-1);
      if (rows.length < CHUNK || last === undefined) return replayed;
      after = { createdAt: last.created_at, id: last.id };
    }
  }

  // Retention

  async purge(before: number): Promise<PurgeResult> {
    // One statement or transaction of at most CHUNK rows per operation, as in replay.
    const deleteAll = async (operation: (s: Statements) => BetterSqlite3.Statement<unknown[], unknown>): Promise<number> => {
      let total = 0;
      for (;;) {
        const changes = await this.#run('purge', ({ s }) => operation(s).run({ before, limit: CHUNK }).changes);
        total += changes;
        if (changes < CHUNK) return total;
      }
    };
    const attempts = await deleteAll((s) => s.purgeAttempts);
    const deadLetters = await deleteAll((s) => s.purgeDeadLetters);
    let events = 0;
    for (;;) {
      const changes = await this.#run('purge', ({ db, s }) =>
        db.transaction((): number => {
          const ids = JSON.stringify(s.purgeableEvents.all({ before, limit: CHUNK }));
          s.purgeEventDeliveries.run(ids);
          return s.purgeEvents.run(ids).changes;
        }).immediate(),
      );
      events += changes;
      if (changes < CHUNK) break;
    }
    return { attempts, deadLetters, events };
  }

  #deadLetterFromRow(s: Statements, row: DeadLetterRow): DeadLetter {
    return {
      id: row.id,
      deliveryId: row.delivery_id,
      eventId: row.event_id,
      endpointId: row.endpoint_id,
      tenantId: row.tenant_id,
      eventType: row.event_type,
      payload: row.payload,
      reason: row.reason,
      lastOutcome: JSON.parse(row.last_outcome) as Outcome,
      attempts: s.listRoundAttempts.all(row.delivery_id, row.round).map(attemptFromRow),
      createdAt: row.created_at,
      replayedAt: row.replayed_at,
    };
  }

  #dynamicStatement<Row>(sql: string): BetterSqlite3.Statement<unknown[], Row> {
    const { db } = this.#ready();
    let statement = this.#dynamic.get(sql);
    if (statement === undefined) {
      statement = db.prepare<unknown[], unknown>(sql);
      this.#dynamic.set(sql, statement);
    }
    return statement as BetterSqlite3.Statement<unknown[], Row>;
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
          return { db: opened, s: prepareStatements(opened), inSavepoint: opened.transaction((run: () => unknown) => run()) };
        },
        'write',
      );
    } catch (error) {
      db?.close();
      throw new StoreError(`sqlite: cannot open ${this.#path}: ${messageOf(error)}`, { cause: error });
    }
  }

  #ready(): OpenState {
    if (this.#closed) throw new ClosedError('SqliteStore');
    if (this.#state === undefined) throw new StoreError('SqliteStore: call init() before using the store');
    return this.#state;
  }

  /**
   * Runs one port operation (at most one transaction: it may run again after finding the
   * lock held), turning driver errors into `StoreError`s that name it. `access` says how it
   * waits for the lock (`LockAccess`).
   */
  async #run<T>(operation: string, fn: (state: OpenState) => T, access: LockAccess = 'write'): Promise<T> {
    this.#ready();
    try {
      if (this.#group !== undefined && access !== 'read') return await this.#group.add(() => fn(this.#ready()), access);
      return await this.#lock.run(
        operation,
        (blocking) => {
          const state = this.#ready();
          this.#setBusyWait(state.db, blocking ? this.#blockingWaitMs : 0);
          this.#waitedForLock = !blocking;
          return fn(state);
        },
        access,
      );
    } catch (error) {
      if (error instanceof HeraldError) throw error;
      if (error instanceof LockWaitTimeout) {
        throw new StoreError(`sqlite: ${error.message} (busyTimeoutMs ${this.#busyTimeoutMs})`, { cause: error });
      }
      throw new StoreError(`sqlite: ${operation} failed: ${messageOf(error)}`, { cause: error });
    }
  }

  /**
   * One group's transaction: each member in a savepoint, so one that throws is undone alone.
   * Busy cannot happen after `BEGIN IMMEDIATE` has the lock; if it did, the whole group is undone
   * and tried again by the lock waiter, like any operation found busy.
   */
  #commitGroup(members: ReadonlyArray<() => unknown>, blocking: boolean): MemberOutcome[] {
    const { db, inSavepoint } = this.#ready();
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

function endpointToRow(endpoint: Endpoint): EndpointRow {
  return {
    id: endpoint.id,
    tenant_id: endpoint.tenantId,
    url: endpoint.url,
    description: endpoint.description,
    event_types: JSON.stringify(endpoint.eventTypes),
    retry: JSON.stringify(endpoint.retry),
    timeout_ms: endpoint.timeoutMs,
    mode: endpoint.mode,
    concurrency: endpoint.concurrency,
    status: endpoint.status,
    disabled_reason: endpoint.disabledReason,
    failing_since: endpoint.failingSince,
    secrets: JSON.stringify(endpoint.secrets),
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}

function endpointFromRow(row: EndpointRow): Endpoint {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    description: row.description,
    eventTypes: JSON.parse(row.event_types) as string[],
    retry: JSON.parse(row.retry) as Endpoint['retry'],
    timeoutMs: row.timeout_ms,
    mode: row.mode as Endpoint['mode'],
    concurrency: row.concurrency,
    status: row.status === EndpointStatus.ENABLED ? EndpointStatus.ENABLED : EndpointStatus.DISABLED,
    disabledReason: row.disabled_reason,
    failingSince: row.failing_since,
    secrets: JSON.parse(row.secrets) as Endpoint['secrets'],
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function deliveryFromRow(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    tenantId: row.tenant_id,
    eventType: row.event_type,
    slot: row.slot,
    status: row.status as DeliveryStatus,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    leaseEpoch: row.lease_epoch,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deliveredAt: row.delivered_at,
  };
}

function attemptFromRow(row: AttemptRow): Attempt {
  return {
    deliveryId: row.delivery_id,
    number: row.number,
    round: row.round,
    startedAt: row.started_at,
    durationMs: row.duration_ms,
    outcome: JSON.parse(row.outcome) as Outcome,
    error: row.error,
  };
}

function leaseFromRow(row: LeaseRow): SlotLease {
  return { slot: row.slot, owner: row.owner, until: row.until, epoch: row.epoch };
}

function deadLetterWhere(filter: DeadLetterFilter): { where: string[]; params: Params } {
  const where: string[] = [];
  const params: Params = {};
  if (filter.endpointId !== undefined) {
    where.push('endpoint_id = @endpointId');
    params['endpointId'] = filter.endpointId;
  }
  if (filter.tenantId !== undefined) {
    where.push('tenant_id = @tenantId');
    params['tenantId'] = filter.tenantId;
  }
  if (filter.since !== undefined) {
    where.push('created_at >= @since');
    params['since'] = filter.since;
  }
  if (filter.until !== undefined) {
    where.push('created_at < @until');
    params['until'] = filter.until;
  }
  if (filter.includeReplayed !== true) where.push('replayed_at IS NULL');
  return { where, params };
}

function whereClause(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
}

function clampLimit(limit: number, max: number): number {
  if (!Number.isFinite(limit)) return max;
  return Math.min(Math.max(0, Math.floor(limit)), max);
}

/** SQLite's BINARY collation, which orders the claim, compares bytes; ids are ASCII, so code units agree. */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sqliteCode(error: unknown): string | undefined {
  return error instanceof Database.SqliteError ? error.code : undefined;
}

/** Locked by another connection, nothing done: safe to try again. */
function isBusy(error: unknown): boolean {
  return sqliteCode(error)?.startsWith('SQLITE_BUSY') === true;
}

function nonNegativeInteger(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new ValidationError(field, `must be a non-negative integer (got ${String(value)})`);
  }
  return value;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
