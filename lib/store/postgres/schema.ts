/**
 * The PostgreSQL schema, created and migrated at start. Everything lives in
 * one schema of its own (`herald` by default), so Herald's tables sit beside
 * an application's without touching them, and a producer's transaction can
 * write into the outbox on the application's own connection.
 *
 * Migrations are numbered and applied in order, each in the same transaction
 * as the record of the version it brings; the whole run holds a transaction-
 * scoped advisory lock named after the schema, so processes starting together
 * migrate once and the others find it done. A database whose recorded version
 * is newer than this Herald knows is refused (an older Herald must not write
 * into a layout it does not know).
 *
 * Times are epoch milliseconds (`bigint`); payloads are the JSON text as
 * published (`text`: byte for byte, which `jsonb` would not keep); structured
 * values Herald reads whole (filters, secrets, outcomes) are `jsonb`.
 */
import type { Pool, PoolClient } from 'pg';
import { messageOf, StoreError, ValidationError } from '../../errors.ts';

export const DEFAULT_POSTGRES_SCHEMA = 'herald';

/** The channel every Herald schema of a database notifies on; the payload says which schema and writer. */
export const WORK_CHANNEL = 'herald_work';

/** A schema name Herald accepts: an unquoted PostgreSQL identifier, lower case. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** @throws ValidationError naming `field` when `name` is not a plain lower-case identifier. */
export function validSchemaName(name: unknown, field = 'schema'): string {
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name)) {
    throw new ValidationError(
      field,
      `must be a lower-case identifier of letters, digits and _ (not starting with a digit), at most 63 characters (got ${JSON.stringify(name)})`,
    );
  }
  return name;
}

export interface PostgresMigration {
  readonly version: number;
  readonly what: string;
  sql(schema: string): string;
}

/** Every layout, in order: the first creates the tables. */
export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    version: 1,
    what: 'the outbox, endpoints, deliveries, attempts, dead letters, leases and nodes',
    sql: (s) => `
CREATE TABLE ${s}.endpoints (
  id              text COLLATE "C" PRIMARY KEY,
  tenant_id       text COLLATE "C" NOT NULL,
  url             text NOT NULL,
  description     text NOT NULL,
  event_types     jsonb NOT NULL,
  retry           jsonb NOT NULL,
  timeout_ms      integer NOT NULL,
  mode            text NOT NULL,
  concurrency     integer NOT NULL,
  status          text NOT NULL,
  disabled_reason text,
  failing_since   bigint,
  secrets         jsonb NOT NULL,
  created_at      bigint NOT NULL,
  updated_at      bigint NOT NULL
);
CREATE INDEX endpoints_tenant ON ${s}.endpoints (tenant_id);

-- The outbox. seq keeps commit-independent insertion order among events created in the same millisecond.
CREATE TABLE ${s}.events (
  seq           bigserial NOT NULL,
  id            text COLLATE "C" PRIMARY KEY,
  tenant_id     text COLLATE "C" NOT NULL,
  type          text NOT NULL,
  payload       text NOT NULL,
  created_at    bigint NOT NULL,
  endpoint_id   text COLLATE "C",
  fanned_out_at bigint
);
-- Partial: the fan-out reads only the events still waiting, never the whole history.
CREATE INDEX events_unfanned ON ${s}.events (created_at, seq) WHERE fanned_out_at IS NULL;
CREATE INDEX events_created ON ${s}.events (created_at);

CREATE TABLE ${s}.deliveries (
  id              text COLLATE "C" PRIMARY KEY,
  event_id        text COLLATE "C" NOT NULL,
  endpoint_id     text COLLATE "C" NOT NULL,
  tenant_id       text COLLATE "C" NOT NULL,
  event_type      text NOT NULL,
  slot            integer NOT NULL,
  status          text NOT NULL,
  attempts        integer NOT NULL,
  round           integer NOT NULL,
  next_attempt_at bigint NOT NULL,
  lease_epoch     bigint NOT NULL,
  last_error      text,
  created_at      bigint NOT NULL,
  updated_at      bigint NOT NULL,
  delivered_at    bigint
);
-- Partial: only live rows are in the claim indexes, so they stay as small as the work waiting.
CREATE INDEX deliveries_pending_due ON ${s}.deliveries (next_attempt_at, endpoint_id) WHERE status = 'pending';
-- Supplies a claim's order per endpoint (due time, then id), so a claim stops at its limit.
CREATE INDEX deliveries_pending_claim ON ${s}.deliveries (slot, endpoint_id, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX deliveries_in_flight ON ${s}.deliveries (slot, lease_epoch) WHERE status = 'in_flight';
-- The delivery log per endpoint, and cancelling an endpoint's deliveries.
CREATE INDEX deliveries_endpoint ON ${s}.deliveries (endpoint_id, created_at, id);
CREATE INDEX deliveries_event ON ${s}.deliveries (event_id);
CREATE INDEX deliveries_created ON ${s}.deliveries (created_at);

CREATE TABLE ${s}.attempts (
  id          bigserial PRIMARY KEY,
  delivery_id text COLLATE "C" NOT NULL,
  number      integer NOT NULL,
  round       integer NOT NULL,
  started_at  bigint NOT NULL,
  duration_ms integer NOT NULL,
  outcome     jsonb NOT NULL,
  error       text
);
CREATE INDEX attempts_delivery ON ${s}.attempts (delivery_id, id);
CREATE INDEX attempts_started ON ${s}.attempts (started_at);

-- round: the delivery's round that died, so a dead letter lists that round's attempts.
-- seq: insertion order, which breaks ties between dead letters of the same millisecond.
CREATE TABLE ${s}.dead_letters (
  seq          bigserial NOT NULL,
  id           text COLLATE "C" PRIMARY KEY,
  delivery_id  text COLLATE "C" NOT NULL,
  event_id     text COLLATE "C" NOT NULL,
  endpoint_id  text COLLATE "C" NOT NULL,
  tenant_id    text COLLATE "C" NOT NULL,
  event_type   text NOT NULL,
  payload      text NOT NULL,
  reason       text NOT NULL,
  last_outcome jsonb NOT NULL,
  round        integer NOT NULL,
  created_at   bigint NOT NULL,
  replayed_at  bigint
);
CREATE INDEX dead_letters_created ON ${s}.dead_letters (created_at, seq);
CREATE INDEX dead_letters_endpoint ON ${s}.dead_letters (endpoint_id, created_at);
CREATE INDEX dead_letters_event ON ${s}.dead_letters (event_id);

-- One row per live process; seen_at is its last heartbeat.
CREATE TABLE ${s}.nodes (
  id         text COLLATE "C" PRIMARY KEY,
  started_at bigint NOT NULL,
  seen_at    bigint NOT NULL
);

-- owner is NULL once released: anyone takes the slot at once, with the next epoch.
CREATE TABLE ${s}.leases (
  slot  integer PRIMARY KEY,
  owner text COLLATE "C",
  until bigint NOT NULL,
  epoch bigint NOT NULL
);
`,
  },
  {
    version: 2,
    what: 'the work signal: a NOTIFY on herald_work when events are inserted, by any connection',
    // One notification per statement, not per row: a producer's batch of 500 wakes Herald once, and
    // PostgreSQL folds identical notifications of one transaction into one. The payload names the
    // schema (several Heralds may share a database) and the writer's application_name, so a Herald
    // process can ignore its own writes, which it already knows of.
    sql: (s) => `
CREATE FUNCTION ${s}.notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${WORK_CHANNEL}', TG_TABLE_SCHEMA || ' ' || current_setting('application_name'));
  RETURN NULL;
END $$;
CREATE TRIGGER events_notify_work AFTER INSERT ON ${s}.events FOR EACH STATEMENT EXECUTE FUNCTION ${s}.notify_work();
`,
  },
  {
    version: 3,
    what: 'the triage of dead letters (new, acknowledged, replayed, discarded), and an index of the unreviewed ones',
    // Dead letters already replayed start as `replayed`, the others as `new`; `at` is when that state began.
    // triage_at stays nullable (read as created_at): an older process still running inserts without it.
    // Partial: the review check reads only dead letters nobody has looked at, oldest first.
    sql: (s) => `
ALTER TABLE ${s}.dead_letters
  ADD COLUMN triage_state text NOT NULL DEFAULT 'new',
  ADD COLUMN triage_note  text,
  ADD COLUMN triage_by    text,
  ADD COLUMN triage_at    bigint;
UPDATE ${s}.dead_letters SET triage_state = CASE WHEN replayed_at IS NULL THEN 'new' ELSE 'replayed' END,
  triage_at = coalesce(replayed_at, created_at);
CREATE INDEX dead_letters_unreviewed ON ${s}.dead_letters (created_at) WHERE triage_state = 'new';
`,
  },
  {
    version: 4,
    what: "an endpoint's rate limit",
    // {"perSecond", "burst"}; NULL: no limit, as every endpoint had before.
    sql: (s) => `ALTER TABLE ${s}.endpoints ADD COLUMN rate_limit jsonb;`,
  },
  {
    version: 5,
    what: "failure kinds: of a delivery's last failed attempt and of each dead letter, and the indexes that group failures by them",
    // Failures recorded before this version are `unknown` (retrying deliveries, open dead letters) until
    // their next attempt; a row an older process still running writes without a kind is left out of the
    // groups until then too. Partial: the groups walk only the failing rows; INCLUDE keeps them index-only.
    sql: (s) => `
ALTER TABLE ${s}.deliveries ADD COLUMN last_failure_kind text, ADD COLUMN last_failure_at bigint;
ALTER TABLE ${s}.dead_letters ADD COLUMN failure_kind text;
UPDATE ${s}.deliveries SET last_failure_kind = 'unknown', last_failure_at = updated_at WHERE status = 'pending' AND attempts > 0;
UPDATE ${s}.dead_letters SET failure_kind = 'unknown';
CREATE INDEX deliveries_failing ON ${s}.deliveries (endpoint_id, last_failure_kind, last_failure_at) INCLUDE (tenant_id)
  WHERE status = 'pending' AND last_failure_kind IS NOT NULL;
CREATE INDEX dead_letters_failing ON ${s}.dead_letters (endpoint_id, failure_kind, created_at) INCLUDE (tenant_id)
  WHERE triage_state IN ('new', 'acknowledged');
`,
  },
  {
    version: 6,
    what: "tenant tokens: a tenant's access to its own data, the secret kept as a SHA-256",
    sql: (s) => `
CREATE TABLE ${s}.tenant_tokens (
  id          text COLLATE "C" PRIMARY KEY,
  tenant_id   text COLLATE "C" NOT NULL,
  name        text NOT NULL,
  secret_hash text NOT NULL,
  created_at  bigint NOT NULL,
  expires_at  bigint
);
CREATE INDEX tenant_tokens_tenant ON ${s}.tenant_tokens (tenant_id, created_at, id);
`,
  },
  {
    version: 7,
    what: 'delivery minutes: per endpoint and minute, attempts by outcome, first attempts and a latency histogram (the charts)',
    // Written by increments (ON CONFLICT … + EXCLUDED), never read back by the writer: nodes add to the
    // same rows. latency_00 … latency_24: attempts per duration bucket (lib/store/delivery-minutes.ts).
    // The key serves one endpoint's series; (minute) every endpoint's and the retention delete;
    // (tenant_id, minute) a tenant's.
    sql: (s) => `
CREATE TABLE ${s}.delivery_minutes (
  endpoint_id             text COLLATE "C" NOT NULL,
  minute                  bigint NOT NULL,
  tenant_id               text COLLATE "C" NOT NULL,
  attempts                integer NOT NULL DEFAULT 0,
  delivered               integer NOT NULL DEFAULT 0,
  retries_scheduled       integer NOT NULL DEFAULT 0,
  dead_lettered           integer NOT NULL DEFAULT 0,
  first_attempts          integer NOT NULL DEFAULT 0,
  first_attempt_successes integer NOT NULL DEFAULT 0,
  latency_00 integer NOT NULL DEFAULT 0,
  latency_01 integer NOT NULL DEFAULT 0,
  latency_02 integer NOT NULL DEFAULT 0,
  latency_03 integer NOT NULL DEFAULT 0,
  latency_04 integer NOT NULL DEFAULT 0,
  latency_05 integer NOT NULL DEFAULT 0,
  latency_06 integer NOT NULL DEFAULT 0,
  latency_07 integer NOT NULL DEFAULT 0,
  latency_08 integer NOT NULL DEFAULT 0,
  latency_09 integer NOT NULL DEFAULT 0,
  latency_10 integer NOT NULL DEFAULT 0,
  latency_11 integer NOT NULL DEFAULT 0,
  latency_12 integer NOT NULL DEFAULT 0,
  latency_13 integer NOT NULL DEFAULT 0,
  latency_14 integer NOT NULL DEFAULT 0,
  latency_15 integer NOT NULL DEFAULT 0,
  latency_16 integer NOT NULL DEFAULT 0,
  latency_17 integer NOT NULL DEFAULT 0,
  latency_18 integer NOT NULL DEFAULT 0,
  latency_19 integer NOT NULL DEFAULT 0,
  latency_20 integer NOT NULL DEFAULT 0,
  latency_21 integer NOT NULL DEFAULT 0,
  latency_22 integer NOT NULL DEFAULT 0,
  latency_23 integer NOT NULL DEFAULT 0,
  latency_24 integer NOT NULL DEFAULT 0,
  PRIMARY KEY (endpoint_id, minute)
);
CREATE INDEX delivery_minutes_minute ON ${s}.delivery_minutes (minute);
CREATE INDEX delivery_minutes_tenant ON ${s}.delivery_minutes (tenant_id, minute);
`,
  },
  {
    version: 8,
    what: "an endpoint's adaptive concurrency",
    // {"initial", "targetLatencyMs"}; NULL: a fixed concurrency, as every endpoint had before.
    sql: (s) => `ALTER TABLE ${s}.endpoints ADD COLUMN adaptive_concurrency jsonb;`,
  },
  {
    version: 10,
    what: 'an index of the waiting events by tenant, for the fan-out past a busy tenant\'s backlog',
    // Partial like events_unfanned: the fan-out finds the tenants with events waiting by skipping
    // through it (one lookup per tenant), never walking one tenant's backlog.
    sql: (s) => `CREATE INDEX IF NOT EXISTS events_unfanned_tenant ON ${s}.events (tenant_id, created_at, seq) WHERE fanned_out_at IS NULL;`,
  },
  {
    version: 11,
    what: 'sequence numbers per endpoint (webhook-sequence) and ordering keys on events and deliveries',
    // Deliveries written before this version keep a NULL sequence: numbering starts at 1 for every
    // endpoint from here on. The counter lives in its own narrow table rather than on `endpoints`:
    // fan-out updates it on every batch, and rewriting a tuple of a few bytes costs less (and bloats
    // less) than an endpoint's with its jsonb secrets and filters; and its row lock, which serialises
    // nodes fanning out to the same endpoint, is never one an admin's update of the endpoint holds or
    // waits for. A missing row means 0.
    // The unique index makes a number given twice an error, not a silent duplicate, and is the seek
    // of the listing after sequence N (NULLs are distinct, so old rows do not collide).
    sql: (s) => `
ALTER TABLE ${s}.deliveries ADD COLUMN sequence bigint;
ALTER TABLE ${s}.deliveries ADD COLUMN ordering_key text;
ALTER TABLE ${s}.events ADD COLUMN ordering_key text;
CREATE TABLE ${s}.endpoint_sequences (
  endpoint_id   text COLLATE "C" PRIMARY KEY,
  last_sequence bigint NOT NULL
);
CREATE UNIQUE INDEX deliveries_endpoint_sequence ON ${s}.deliveries (endpoint_id, sequence);
`,
  },
  {
    version: 12,
    what: "FIFO endpoints: an endpoint's ordering and the open deliveries of each line",
    // Every endpoint written before this version keeps any order ('none'). The index holds only the
    // open deliveries, each line's in its order, so the head of a line (NULL sequences first, older
    // than numbering, by creation) is one seek. A line is keyed by COALESCE(ordering_key, ''): an
    // ordering key is never empty, and an equality is a seek where IS NOT DISTINCT FROM is not.
    sql: (s) => `
ALTER TABLE ${s}.endpoints ADD COLUMN ordering text NOT NULL DEFAULT 'none';
CREATE INDEX deliveries_open_line ON ${s}.deliveries (endpoint_id, (COALESCE(ordering_key, '')), sequence NULLS FIRST, created_at, id)
  WHERE status IN ('pending', 'in_flight');
`,
  },
  {
    version: 13,
    what: 'paced replay jobs kept in the store (they outlive the node running them), and an index of the live replays per endpoint',
    // owner/lease_until: the node running a job and until when; a job whose lease ended is taken over.
    // deliveries_live_replays: a job's look counts each endpoint's replays still pending or in flight
    // (round > 0) over these rows only, never the endpoint's whole history.
    sql: (s) => `
CREATE TABLE IF NOT EXISTS ${s}.replay_jobs (
  id          text COLLATE "C" PRIMARY KEY,
  filter      jsonb NOT NULL,
  state       text NOT NULL,
  total       bigint NOT NULL,
  replayed    bigint NOT NULL,
  waiting     bigint NOT NULL,
  cursor      text COLLATE "C",
  chunk_size  integer NOT NULL,
  created_at  bigint NOT NULL,
  finished_at bigint,
  error       text,
  owner       text COLLATE "C",
  lease_until bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS replay_jobs_running ON ${s}.replay_jobs (lease_until) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS replay_jobs_created ON ${s}.replay_jobs (created_at, id);
CREATE INDEX IF NOT EXISTS deliveries_live_replays ON ${s}.deliveries (endpoint_id) WHERE round > 0 AND status IN ('pending', 'in_flight');
`,
  },
  {
    version: 14,
    what: "the endpoint change log: every node follows it to bring its actors to the endpoints' current versions",
    // The counter is one row, so a change's number is taken under its row lock (endpoint-changes.ts).
    sql: (s) => `
CREATE TABLE IF NOT EXISTS ${s}.endpoint_changes (
  version     bigint PRIMARY KEY,
  endpoint_id text COLLATE "C" NOT NULL,
  changed_at  bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS ${s}.endpoint_change_counter (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint NOT NULL
);
INSERT INTO ${s}.endpoint_change_counter (only_row, version) VALUES (true, 0) ON CONFLICT DO NOTHING;
`,
  },
  {
    version: 15,
    what: "each node's requests in flight and clock offset, as its heartbeat says (for the status of every live node)",
    // Rows written before this version read 0 for both until their node's next heartbeat.
    sql: (s) => `
ALTER TABLE ${s}.nodes ADD COLUMN IF NOT EXISTS in_flight integer NOT NULL DEFAULT 0;
ALTER TABLE ${s}.nodes ADD COLUMN IF NOT EXISTS clock_offset_ms bigint NOT NULL DEFAULT 0;
`,
  },
  {
    version: 16,
    what: 'the index of events by age holds only those fanned out (what retention reads)',
    // Retention is its only reader, and it takes only fanned-out events: an event now gets its
    // entry when it is fanned out, not also when it is published (one index entry less per event).
    // Built in the migration's transaction: on a large outbox the first start after the upgrade
    // waits for it.
    sql: (s) => `
DROP INDEX IF EXISTS ${s}.events_created;
CREATE INDEX IF NOT EXISTS events_fanned_created ON ${s}.events (created_at) WHERE fanned_out_at IS NOT NULL;
`,
  },
  {
    version: 17,
    what: "a first-attempt success is kept on its delivery's row, not as a row of attempts",
    // Most deliveries succeed at their first attempt: its row of `attempts` (a heap tuple and three
    // index entries) cost the settle more than the delivery's own update. Such an attempt is now
    // written into these columns by the same update; every later attempt (a retry, or a replay's
    // round) is a row of `attempts` as before. Deliveries settled before this version keep their rows.
    sql: (s) => `
ALTER TABLE ${s}.deliveries ADD COLUMN IF NOT EXISTS first_started_at bigint, ADD COLUMN IF NOT EXISTS first_duration_ms integer,
  ADD COLUMN IF NOT EXISTS first_outcome jsonb, ADD COLUMN IF NOT EXISTS first_error text;
`,
  },
  {
    version: 18,
    what: 'the event-type catalog: types, their JSON Schemas by version, and the catalog version producers check',
    // versions: [{version, schema, createdAt}], oldest first. The one-row catalog version goes up with
    // every catalog write; a producer's insert is guarded by the version it checked against.
    sql: (s) => `
CREATE TABLE IF NOT EXISTS ${s}.event_types (
  name             text COLLATE "C" PRIMARY KEY,
  description      text NOT NULL,
  versions         jsonb NOT NULL,
  deprecated_at    bigint,
  deprecation_note text,
  created_at       bigint NOT NULL,
  updated_at       bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS ${s}.event_type_catalog (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint NOT NULL
);
INSERT INTO ${s}.event_type_catalog (only_row, version) VALUES (true, 0) ON CONFLICT DO NOTHING;
`,
  },
  {
    version: 19,
    what: "an endpoint's payload filter",
    // NULL: no filter, as every endpoint had before. json, not jsonb: it keeps the keys in the order
    // given, which is the order the conditions are tried in (and the first failing one is named).
    sql: (s) => `ALTER TABLE ${s}.endpoints ADD COLUMN IF NOT EXISTS payload_filter json;`,
  },
  {
    version: 20,
    what: "an endpoint's custom headers and authentication",
    // [{"name", "value", "secret"}] and {"type", …}, secret parts sealed; NULL: none, as every
    // endpoint had before.
    sql: (s) => `ALTER TABLE ${s}.endpoints ADD COLUMN IF NOT EXISTS headers jsonb, ADD COLUMN IF NOT EXISTS auth jsonb;`,
  },
  {
    version: 21,
    what: "an endpoint's client certificate for mutual TLS (its key sealed); NULL: none",
    sql: (s) => `ALTER TABLE ${s}.endpoints ADD COLUMN IF NOT EXISTS client_tls jsonb;`,
  },
  {
    version: 22,
    what: "each event's producer trace context (W3C traceparent and tracestate), continued by its attempts",
    // NULL: no trace (no OpenTelemetry SDK at the producer), and every event written before. No
    // rewrite: a nullable column without a default is added in the catalog only.
    sql: (s) => `
ALTER TABLE ${s}.events ADD COLUMN IF NOT EXISTS trace_context jsonb;
`,
  },
];

/** The version this Herald's code brings a database to. */
export const POSTGRES_SCHEMA_VERSION = POSTGRES_MIGRATIONS.at(-1)!.version;

export interface MigrationResult {
  /** The version found before (0: the schema was empty or missing). */
  readonly from: number;
  readonly to: number;
  /** The migrations applied by this call (none when another process got there first). */
  readonly applied: readonly number[];
}

/**
 * Creates the schema if it is missing and applies the migrations it lacks,
 * all in one transaction under an advisory lock named after the schema.
 * Idempotent; safe to call from several processes at once.
 *
 * @throws ValidationError when `schema` is not a plain identifier.
 * @throws StoreError when the database holds a newer version than this code knows,
 *   or the server refuses (no right to create the schema, say), with the server's reason.
 */
export async function migratePostgresSchema(
  pool: Pool,
  schema: string = DEFAULT_POSTGRES_SCHEMA,
  /** The layouts to bring it to (tests stop at an earlier version). */
  migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS,
): Promise<MigrationResult> {
  const s = validSchemaName(schema);
  const target = migrations.at(-1)?.version ?? 0;
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new StoreError(`postgres: cannot connect to migrate schema '${s}': ${messageOf(error)}`, { cause: error });
  }
  try {
    await client.query('BEGIN');
    // Serialises processes starting together; released with the transaction.
    await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`herald:schema:${s}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value text NOT NULL)`);
    const found = await client.query<{ value: string }>(`SELECT value FROM ${s}.meta WHERE key = 'schema_version'`);
    const from = found.rows.length === 0 ? 0 : Number(found.rows[0]!.value);
    if (from > target) {
      throw new StoreError(
        `postgres: schema '${s}' is at version ${from}, newer than this Herald knows (${target}): run a Herald at least as new as the one that migrated it`,
      );
    }
    const applied: number[] = [];
    for (const migration of migrations) {
      if (migration.version <= from) continue;
      await client.query(migration.sql(s));
      applied.push(migration.version);
    }
    await client.query(
      `INSERT INTO ${s}.meta (key, value) VALUES ('schema_version', $1)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      [String(target)],
    );
    await client.query('COMMIT');
    return { from, to: target, applied };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (error instanceof StoreError) throw error;
    throw new StoreError(`postgres: cannot migrate schema '${s}': ${messageOf(error)}`, { cause: error });
  } finally {
    client.release();
  }
}
