/**
 * The SQLite schema, shared by the store and by producers that publish into
 * the outbox from their own connection. Times are epoch milliseconds
 * (INTEGER); structured values (secrets, filters, outcomes) are JSON text.
 *
 * Every statement of the first layout (version 1) is `IF NOT EXISTS`, so any
 * process may call {@link ensureSchema} at any time; the first one to get
 * there creates the tables and the others find them. Later layouts are
 * numbered migrations ({@link SQLITE_MIGRATIONS}), applied in order in the
 * same `BEGIN IMMEDIATE` transaction as the version they bring, recorded in
 * `meta` under `schema_version`. A file whose recorded version is newer than
 * this Herald knows is refused: an older Herald must not write into a layout
 * it does not know.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { StoreError } from '../../errors.ts';

/** A change of layout after version 1: its statements, run once, in order. */
export interface SqliteMigration {
  readonly version: number;
  readonly what: string;
  readonly sql: string;
}

/** Versions 2 and later, in order. */
export const SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 2,
    what: 'the triage of dead letters (new, acknowledged, replayed, discarded), and an index of the unreviewed ones',
    // Dead letters already replayed start as `replayed`, the others as `new`; `at` is when that state began
    // (NULL, read as created_at, on a row an older process still running inserts without it).
    // Partial: the review check reads only dead letters nobody has looked at, oldest first.
    sql: `
ALTER TABLE dead_letters ADD COLUMN triage_state TEXT NOT NULL DEFAULT 'new';
ALTER TABLE dead_letters ADD COLUMN triage_note TEXT;
ALTER TABLE dead_letters ADD COLUMN triage_by TEXT;
ALTER TABLE dead_letters ADD COLUMN triage_at INTEGER;
UPDATE dead_letters SET triage_state = 'replayed' WHERE replayed_at IS NOT NULL;
UPDATE dead_letters SET triage_at = coalesce(replayed_at, created_at);
CREATE INDEX dead_letters_unreviewed ON dead_letters (created_at) WHERE triage_state = 'new';
`,
  },
  {
    version: 3,
    what: "an endpoint's rate limit",
    // JSON text {"perSecond", "burst"}; NULL: no limit, as every endpoint had before.
    sql: `ALTER TABLE endpoints ADD COLUMN rate_limit TEXT;`,
  },
  {
    version: 4,
    what: 'failure kinds: of a delivery\'s last failed attempt and of each dead letter, and the indexes that group failures by them',
    // Failures recorded before this version have no kind the store can read back cheaply: they are
    // `unknown` (retrying deliveries, open dead letters) until their next attempt. A row an older
    // process still running writes without a kind is left out of the groups until then too.
    // Partial: the groups walk only the failing rows (pending after a failed attempt; open dead letters).
    sql: `
ALTER TABLE deliveries ADD COLUMN last_failure_kind TEXT;
ALTER TABLE deliveries ADD COLUMN last_failure_at INTEGER;
ALTER TABLE dead_letters ADD COLUMN failure_kind TEXT;
UPDATE deliveries SET last_failure_kind = 'unknown', last_failure_at = updated_at WHERE status = 'pending' AND attempts > 0;
UPDATE dead_letters SET failure_kind = 'unknown';
CREATE INDEX deliveries_failing ON deliveries (endpoint_id, last_failure_kind, last_failure_at, tenant_id)
  WHERE status = 'pending' AND last_failure_kind IS NOT NULL;
CREATE INDEX dead_letters_failing ON dead_letters (endpoint_id, failure_kind, created_at, tenant_id)
  WHERE triage_state IN ('new', 'acknowledged');
`,
  },
  {
    version: 5,
    what: 'tenant tokens: a tenant\'s access to its own data, the secret kept as a SHA-256',
    sql: `
CREATE TABLE tenant_tokens (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL,
  name        TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER
);
CREATE INDEX tenant_tokens_tenant ON tenant_tokens (tenant_id, created_at, id);
`,
  },
  {
    version: 6,
    what: 'delivery minutes: per endpoint and minute, attempts by outcome, first attempts and a latency histogram (the charts)',
    // Written by increments (ON CONFLICT … + excluded), never read back by the writer: nodes add to the
    // same rows. latency_00 … latency_24: attempts per duration bucket (lib/store/delivery-minutes.ts).
    // (endpoint_id, minute) serves one endpoint's series; (minute) every endpoint's and the retention
    // delete; (tenant_id, minute) a tenant's.
    sql: `
CREATE TABLE delivery_minutes (
  endpoint_id             TEXT NOT NULL,
  minute                  INTEGER NOT NULL,
  tenant_id               TEXT NOT NULL,
  attempts                INTEGER NOT NULL DEFAULT 0,
  delivered               INTEGER NOT NULL DEFAULT 0,
  retries_scheduled       INTEGER NOT NULL DEFAULT 0,
  dead_lettered           INTEGER NOT NULL DEFAULT 0,
  first_attempts          INTEGER NOT NULL DEFAULT 0,
  first_attempt_successes INTEGER NOT NULL DEFAULT 0,
  latency_00 INTEGER NOT NULL DEFAULT 0,
  latency_01 INTEGER NOT NULL DEFAULT 0,
  latency_02 INTEGER NOT NULL DEFAULT 0,
  latency_03 INTEGER NOT NULL DEFAULT 0,
  latency_04 INTEGER NOT NULL DEFAULT 0,
  latency_05 INTEGER NOT NULL DEFAULT 0,
  latency_06 INTEGER NOT NULL DEFAULT 0,
  latency_07 INTEGER NOT NULL DEFAULT 0,
  latency_08 INTEGER NOT NULL DEFAULT 0,
  latency_09 INTEGER NOT NULL DEFAULT 0,
  latency_10 INTEGER NOT NULL DEFAULT 0,
  latency_11 INTEGER NOT NULL DEFAULT 0,
  latency_12 INTEGER NOT NULL DEFAULT 0,
  latency_13 INTEGER NOT NULL DEFAULT 0,
  latency_14 INTEGER NOT NULL DEFAULT 0,
  latency_15 INTEGER NOT NULL DEFAULT 0,
  latency_16 INTEGER NOT NULL DEFAULT 0,
  latency_17 INTEGER NOT NULL DEFAULT 0,
  latency_18 INTEGER NOT NULL DEFAULT 0,
  latency_19 INTEGER NOT NULL DEFAULT 0,
  latency_20 INTEGER NOT NULL DEFAULT 0,
  latency_21 INTEGER NOT NULL DEFAULT 0,
  latency_22 INTEGER NOT NULL DEFAULT 0,
  latency_23 INTEGER NOT NULL DEFAULT 0,
  latency_24 INTEGER NOT NULL DEFAULT 0,
  UNIQUE (endpoint_id, minute)
);
CREATE INDEX delivery_minutes_minute ON delivery_minutes (minute);
CREATE INDEX delivery_minutes_tenant ON delivery_minutes (tenant_id, minute);
`,
  },
  {
    version: 7,
    what: "an endpoint's adaptive concurrency",
    // JSON text {"initial", "targetLatencyMs"}; NULL: a fixed concurrency, as every endpoint had before.
    sql: `ALTER TABLE endpoints ADD COLUMN adaptive_concurrency TEXT;`,
  },
  {
    version: 9,
    what: 'an index of the waiting events by tenant, for the fan-out past a busy tenant\'s backlog',
    // Partial like events_unfanned: the fan-out finds the tenants with events waiting by skipping
    // through it (one lookup per tenant), never walking one tenant's backlog.
    sql: `CREATE INDEX IF NOT EXISTS events_unfanned_tenant ON events (tenant_id, created_at) WHERE fanned_out_at IS NULL;`,
  },
  {
    version: 10,
    what: "sequence numbers per endpoint (webhook-sequence) and ordering keys on events and deliveries",
    // Deliveries written before this version keep a NULL sequence: numbering starts at 1 for every
    // endpoint from here on. The counter lives in its own narrow table rather than on `endpoints`:
    // fan-out writes it on every batch, and a row of a few bytes costs less to rewrite than an
    // endpoint with its secrets and filters, and it never waits on an admin's update of the endpoint
    // (PostgreSQL does the same, where that would be a row lock). A missing row means 0.
    // The unique index makes a number given twice an error, not a silent duplicate, and is the
    // seek of the listing after sequence N (NULLs are distinct, so old rows do not collide).
    sql: `
ALTER TABLE deliveries ADD COLUMN sequence INTEGER;
ALTER TABLE deliveries ADD COLUMN ordering_key TEXT;
ALTER TABLE events ADD COLUMN ordering_key TEXT;
CREATE TABLE endpoint_sequences (
  endpoint_id   TEXT PRIMARY KEY,
  last_sequence INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX deliveries_endpoint_sequence ON deliveries (endpoint_id, sequence);
`,
  },
  {
    version: 11,
    what: "FIFO endpoints: an endpoint's ordering and the open deliveries of each line",
    // Every endpoint written before this version keeps any order ('none'). The index holds only the
    // open deliveries (pending, in flight), each line's in its order, so the head of a line (the
    // earliest open delivery: NULL sequences first, older than numbering, by creation) is one seek,
    // whatever the line's history; a FIFO claim asks it for each delivery it would take.
    sql: `
ALTER TABLE endpoints ADD COLUMN ordering TEXT NOT NULL DEFAULT 'none';
CREATE INDEX deliveries_open_line ON deliveries (endpoint_id, ordering_key, sequence, created_at, id)
  WHERE status IN ('pending', 'in_flight');
`,
  },
  {
    version: 12,
    what: 'paced replay jobs kept in the store (they outlive the node running them), and an index of the live replays per endpoint',
    // owner/lease_until: the node running a job and until when; a job whose lease ended is taken over.
    // deliveries_live_replays: a job's look counts each endpoint's replays still pending or in flight
    // (round > 0) with one read over these rows only, never the endpoint's whole history.
    sql: `
CREATE TABLE IF NOT EXISTS replay_jobs (
  id          TEXT PRIMARY KEY,
  filter      TEXT NOT NULL,
  state       TEXT NOT NULL,
  total       INTEGER NOT NULL,
  replayed    INTEGER NOT NULL,
  waiting     INTEGER NOT NULL,
  cursor      TEXT,
  chunk_size  INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  finished_at INTEGER,
  error       TEXT,
  owner       TEXT,
  lease_until INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS replay_jobs_running ON replay_jobs (lease_until) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS replay_jobs_created ON replay_jobs (created_at, id);
CREATE INDEX IF NOT EXISTS deliveries_live_replays ON deliveries (endpoint_id) WHERE round > 0 AND status IN ('pending', 'in_flight');
`,
  },
  {
    version: 13,
    what: 'the endpoint change log: every node follows it to bring its actors to the endpoints\' current versions',
    // AUTOINCREMENT: a number is never reused, even once purged, so a reader's cursor stays meaningful.
    sql: `
CREATE TABLE IF NOT EXISTS endpoint_changes (
  version     INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id TEXT NOT NULL,
  changed_at  INTEGER NOT NULL
);
`,
  },
  {
    version: 14,
    what: "each node's requests in flight and clock offset, as its heartbeat says (for the status of every live node)",
    // Rows written before this version read 0 for both until their node's next heartbeat.
    sql: `
ALTER TABLE nodes ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN clock_offset_ms INTEGER NOT NULL DEFAULT 0;
`,
  },
  {
    version: 15,
    what: "a first-attempt success is kept on its delivery's row, not as a row of attempts",
    // Most deliveries succeed at their first attempt: its row of `attempts` (and two index
    // entries) cost the settle as much as the delivery's own update. Such an attempt is now written
    // into these columns by that update; every later attempt (a retry, or a replay's round) is a row
    // of `attempts` as before. Deliveries settled before this version keep their rows.
    sql: `
ALTER TABLE deliveries ADD COLUMN first_started_at INTEGER;
ALTER TABLE deliveries ADD COLUMN first_duration_ms INTEGER;
ALTER TABLE deliveries ADD COLUMN first_outcome TEXT;
ALTER TABLE deliveries ADD COLUMN first_error TEXT;
`,
  },
  {
    version: 16,
    what: 'the event-type catalog: types, their JSON Schemas by version, and the catalog version producers check',
    // versions: JSON [{version, schema, createdAt}], oldest first. The catalog version (a meta row)
    // goes up in the transaction of every catalog write; producers read it on every publish.
    sql: `
CREATE TABLE IF NOT EXISTS event_types (
  name             TEXT PRIMARY KEY,
  description      TEXT NOT NULL,
  versions         TEXT NOT NULL,
  deprecated_at    INTEGER,
  deprecation_note TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('event_types_version', '0');
`,
  },
  {
    version: 17,
    what: "an endpoint's payload filter",
    // JSON text, as given; NULL: no filter (every event its event types take), as every endpoint had before.
    sql: `ALTER TABLE endpoints ADD COLUMN payload_filter TEXT;`,
  },
  {
    version: 18,
    what: "an endpoint's custom headers and authentication",
    // JSON text: [{"name", "value", "secret"}] and {"type", …}, secret parts sealed; NULL: none, as
    // every endpoint had before.
    sql: `
ALTER TABLE endpoints ADD COLUMN headers TEXT;
ALTER TABLE endpoints ADD COLUMN auth TEXT;
`,
  },
  {
    version: 19,
    what: "an endpoint's client certificate for mutual TLS (its key sealed), as JSON; NULL: none",
    sql: `ALTER TABLE endpoints ADD COLUMN client_tls TEXT;`,
  },
  {
    version: 20,
    what: "each event's producer trace context (W3C traceparent and tracestate, JSON), continued by its attempts",
    // NULL: no trace (no OpenTelemetry SDK at the producer), and every event written before.
    sql: `
ALTER TABLE events ADD COLUMN trace_context TEXT;
`,
  },
];

/** The version this Herald's code brings a file to; stored in `meta` under `schema_version`. */
export const SCHEMA_VERSION = SQLITE_MIGRATIONS.at(-1)?.version ?? 1;

/** The delivery statuses after which nothing more happens to a delivery (until a replay). */
export const TERMINAL_STATUSES_SQL = `('delivered', 'dead', 'cancelled')`;

const DDL = `
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS endpoints (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL,
  url             TEXT NOT NULL,
  description     TEXT NOT NULL,
  event_types     TEXT NOT NULL,
  retry           TEXT NOT NULL,
  timeout_ms      INTEGER NOT NULL,
  mode            TEXT NOT NULL,
  concurrency     INTEGER NOT NULL,
  status          TEXT NOT NULL,
  disabled_reason TEXT,
  failing_since   INTEGER,
  secrets         TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS endpoints_tenant ON endpoints (tenant_id);

-- The outbox. rowid keeps insertion order among events created in the same millisecond.
CREATE TABLE IF NOT EXISTS events (
  id            TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL,
  type          TEXT NOT NULL,
  payload       TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  endpoint_id   TEXT,
  fanned_out_at INTEGER
);
-- Partial: the fan-out loop reads only the few events still waiting, never the whole history.
CREATE INDEX IF NOT EXISTS events_unfanned ON events (created_at) WHERE fanned_out_at IS NULL;
CREATE INDEX IF NOT EXISTS events_created ON events (created_at);

CREATE TABLE IF NOT EXISTS deliveries (
  id              TEXT PRIMARY KEY,
  event_id        TEXT NOT NULL,
  endpoint_id     TEXT NOT NULL,
  tenant_id       TEXT NOT NULL,
  event_type      TEXT NOT NULL,
  slot            INTEGER NOT NULL,
  status          TEXT NOT NULL,
  attempts        INTEGER NOT NULL,
  round           INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  lease_epoch     INTEGER NOT NULL,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  delivered_at    INTEGER
);
-- Partial: only live rows (pending, in flight) are in the claim indexes, so they stay as
-- small as the work waiting, and a delivery that finishes leaves them instead of moving
-- to another part of them (fewer pages written per claim and settle).
-- Claims and nextDueAt walk pending rows in due order.
CREATE INDEX IF NOT EXISTS deliveries_pending_due ON deliveries (next_attempt_at, endpoint_id) WHERE status = 'pending';
-- Claims under a backlog skip from endpoint to endpoint within an owned slot; refills seek one endpoint.
CREATE INDEX IF NOT EXISTS deliveries_pending_claim ON deliveries (slot, endpoint_id, next_attempt_at) WHERE status = 'pending';
-- Claims find deliveries orphaned by an older epoch of their slot.
CREATE INDEX IF NOT EXISTS deliveries_in_flight ON deliveries (slot, lease_epoch) WHERE status = 'in_flight';
-- Replaced by the partial indexes above (files created before them).
DROP INDEX IF EXISTS deliveries_due;
DROP INDEX IF EXISTS deliveries_claim;
-- The delivery log per endpoint, and cancelling an endpoint's deliveries.
CREATE INDEX IF NOT EXISTS deliveries_endpoint ON deliveries (endpoint_id, created_at);
CREATE INDEX IF NOT EXISTS deliveries_event ON deliveries (event_id);
CREATE INDEX IF NOT EXISTS deliveries_created ON deliveries (created_at);

CREATE TABLE IF NOT EXISTS attempts (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_id TEXT NOT NULL,
  number      INTEGER NOT NULL,
  round       INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  outcome     TEXT NOT NULL,
  error       TEXT
);
CREATE INDEX IF NOT EXISTS attempts_delivery ON attempts (delivery_id, id);
CREATE INDEX IF NOT EXISTS attempts_started ON attempts (started_at);

-- round: the delivery's round that died, so a dead letter lists that round's attempts.
CREATE TABLE IF NOT EXISTS dead_letters (
  id           TEXT PRIMARY KEY,
  delivery_id  TEXT NOT NULL,
  event_id     TEXT NOT NULL,
  endpoint_id  TEXT NOT NULL,
  tenant_id    TEXT NOT NULL,
  event_type   TEXT NOT NULL,
  payload      TEXT NOT NULL,
  reason       TEXT NOT NULL,
  last_outcome TEXT NOT NULL,
  round        INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  replayed_at  INTEGER
);
CREATE INDEX IF NOT EXISTS dead_letters_created ON dead_letters (created_at);
CREATE INDEX IF NOT EXISTS dead_letters_endpoint ON dead_letters (endpoint_id, created_at);
CREATE INDEX IF NOT EXISTS dead_letters_event ON dead_letters (event_id);

-- One row per live process; seen_at is its last heartbeat.
CREATE TABLE IF NOT EXISTS nodes (
  id         TEXT PRIMARY KEY,
  started_at INTEGER NOT NULL,
  seen_at    INTEGER NOT NULL
);

-- owner is NULL once released: anyone takes the slot at once, with the next epoch.
CREATE TABLE IF NOT EXISTS leases (
  slot  INTEGER PRIMARY KEY,
  owner TEXT,
  until INTEGER NOT NULL,
  epoch INTEGER NOT NULL
);
`;

// event_types: a producer publishing inside its own transaction on a file of an older layout migrates it there.
const TABLES = ['meta', 'endpoints', 'events', 'deliveries', 'attempts', 'dead_letters', 'leases', 'nodes', 'event_types'] as const;

/** Connections whose file is known to hold the committed schema: checking costs a transaction, so do it once. */
const ready = new WeakSet<BetterSqlite3.Database>();

/**
 * Creates the tables and indexes if they are missing and records the schema
 * version. Idempotent and cheap after the first call on a connection.
 *
 * Outside a transaction the DDL runs in its own `BEGIN IMMEDIATE` (so two
 * processes starting together do not collide) and the connection is
 * remembered. Inside the caller's transaction (a producer publishing with its
 * business change) it joins that transaction and is not remembered, because a
 * rollback would undo it; there a lookup in `sqlite_schema` keeps repeat calls cheap.
 */
export function ensureSchema(db: BetterSqlite3.Database): void {
  if (ready.has(db)) return;
  if (db.inTransaction) {
    if (!hasTables(db)) createSchema(db);
    return;
  }
  db.transaction(() => createSchema(db)).immediate();
  ready.add(db);
}

function createSchema(db: BetterSqlite3.Database): void {
  db.exec(DDL);
  // A file created now starts at version 1 (the layout above) and is migrated like any other.
  db.prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1')`).run();
  migrate(db, SQLITE_MIGRATIONS);
}

/**
 * Applies the migrations newer than the file's recorded version and records the last one. Runs
 * inside the caller's transaction (every step commits or none does).
 * @throws StoreError when the file was migrated by a newer Herald.
 */
export function migrate(db: BetterSqlite3.Database, migrations: readonly SqliteMigration[]): void {
  const recorded = Number(db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).pluck().get() ?? 1);
  const known = migrations.at(-1)?.version ?? 1;
  if (recorded > known) {
    throw new StoreError(
      `sqlite: the file is at schema version ${recorded}, newer than this Herald knows (${known}): run a Herald at least as new as the one that migrated it`,
    );
  }
  for (const migration of migrations) {
    if (migration.version <= recorded) continue;
    db.exec(migration.sql);
    db.prepare(`UPDATE meta SET value = ? WHERE key = 'schema_version'`).run(String(migration.version));
  }
}

function hasTables(db: BetterSqlite3.Database): boolean {
  const placeholders = TABLES.map(() => '?').join(', ');
  const found = db
    .prepare(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN (${placeholders})`)
    .pluck()
    .get(...TABLES);
  return found === TABLES.length;
}

/** A row of `events`, as both the store and the producer read it. */
