/**
 * The SQLite file's layout versions: numbered migrations applied once, in
 * order, with the version they bring; a file from a newer Herald refused.
 */
import { expect } from 'chai';
import Database from 'better-sqlite3';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { deadLetterFromRow, type DeadLetterRow } from '../../lib/store/sql-rows.ts';
import { ensureSchema, migrate, SCHEMA_VERSION, SQLITE_MIGRATIONS, type SqliteMigration } from '../../lib/store/sqlite/schema.ts';

const version = (db: Database.Database): string => db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).pluck().get() as string;

describe('SQLite schema versions', () => {
  let db: Database.Database;

  beforeEach(() => {
    db = new Database(':memory:');
  });

  afterEach(() => {
    db.close();
  });

  it('records the version this code brings a new file to', () => {
    ensureSchema(db);
    expect(version(db)).to.equal(String(SCHEMA_VERSION));
  });

  it('applies the migrations the file lacks, in order, once, and records the last', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '1' WHERE key = 'schema_version'`).run();
    const migrations: SqliteMigration[] = [
      { version: 2, what: 'a column', sql: `ALTER TABLE endpoints ADD COLUMN spec_note TEXT` },
      { version: 3, what: 'a table', sql: `CREATE TABLE spec_extra (id TEXT PRIMARY KEY)` },
    ];
    db.transaction(() => migrate(db, migrations)).immediate();
    expect(version(db)).to.equal('3');
    const columns = db.prepare(`SELECT name FROM pragma_table_info('endpoints')`).pluck().all();
    expect(columns).to.include('spec_note');
    // Run again: nothing to do (an ALTER run twice would throw).
    db.transaction(() => migrate(db, migrations)).immediate();
    expect(version(db)).to.equal('3');
  });

  it('version 2 gives dead letters their triage: replayed ones replayed since their replay, the others new since their creation', () => {
    // The dead-letter table and meta as version 1 laid them out.
    db.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta (key, value) VALUES ('schema_version', '1');
      CREATE TABLE dead_letters (id TEXT PRIMARY KEY, delivery_id TEXT NOT NULL, event_id TEXT NOT NULL, endpoint_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, reason TEXT NOT NULL, last_outcome TEXT NOT NULL,
        round INTEGER NOT NULL, created_at INTEGER NOT NULL, replayed_at INTEGER);
      INSERT INTO dead_letters VALUES ('dl_waiting', 'dlv', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{}', 0, 1000, NULL);
      INSERT INTO dead_letters VALUES ('dl_replayed', 'dlv', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{}', 0, 2000, 5000);`);
    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 2))).immediate();
    expect(version(db)).to.equal('2');
    expect(db.prepare(`SELECT id, triage_state, triage_note, triage_by, triage_at FROM dead_letters ORDER BY id`).all()).to.deep.equal([
      { id: 'dl_replayed', triage_state: 'replayed', triage_note: null, triage_by: null, triage_at: 5000 },
      { id: 'dl_waiting', triage_state: 'new', triage_note: null, triage_by: null, triage_at: 1000 },
    ]);
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT min(created_at) FROM dead_letters WHERE triage_state = 'new'`).all() as Array<{ detail: string }>;
    expect(plan.map((step) => step.detail).join(' ')).to.include('dead_letters_unreviewed');

    // A row an older process, still running, inserts the version-1 way reads as new since its creation.
    db.exec(`INSERT INTO dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type, payload, reason, last_outcome, round, created_at, replayed_at)
      VALUES ('dl_late', 'dlv', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{"kind":"timeout","timeoutMs":1}', 0, 7000, NULL)`);
    const late = db.prepare(`SELECT * FROM dead_letters WHERE id = 'dl_late'`).get() as DeadLetterRow;
    expect(deadLetterFromRow(late, []).triage).to.deep.equal({ state: 'new', note: null, by: null, at: 7000 });
  });

  it('version 4 gives failures recorded before it the kind unknown, and groups them over the failing-rows indexes', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '3' WHERE key = 'schema_version'`).run();
    // As version 3 laid the two tables out: without the failure columns and indexes.
    db.exec(`DROP INDEX deliveries_failing; DROP INDEX dead_letters_failing;
      ALTER TABLE deliveries DROP COLUMN last_failure_kind; ALTER TABLE deliveries DROP COLUMN last_failure_at;
      ALTER TABLE dead_letters DROP COLUMN failure_kind;`);
    const delivery = db.prepare(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round,
      next_attempt_at, lease_epoch, created_at, updated_at) VALUES (?, 'evt', 'ep', 'acme', 't', 0, ?, ?, 0, 9000, 0, 1000, ?)`);
    delivery.run('dlv_retrying', 'pending', 2, 4000);
    delivery.run('dlv_fresh', 'pending', 0, 1000);
    delivery.run('dlv_done', 'delivered', 1, 3000);
    db.exec(`INSERT INTO dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type, payload, reason, last_outcome, round,
      created_at, replayed_at, triage_state, triage_at) VALUES ('dl_1', 'dlv_x', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{}', 0, 2000, NULL, 'new', 2000)`);

    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 4))).immediate();
    expect(version(db)).to.equal('4');
    expect(db.prepare(`SELECT id, last_failure_kind, last_failure_at FROM deliveries ORDER BY id`).all()).to.deep.equal([
      { id: 'dlv_done', last_failure_kind: null, last_failure_at: null },
      { id: 'dlv_fresh', last_failure_kind: null, last_failure_at: null },
      { id: 'dlv_retrying', last_failure_kind: 'unknown', last_failure_at: 4000 },
    ]);
    expect(db.prepare(`SELECT failure_kind FROM dead_letters`).pluck().all()).to.deep.equal(['unknown']);
    const plan = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((step) => step.detail).join(' ');
    expect(plan(`SELECT endpoint_id, last_failure_kind, count(*) FROM deliveries WHERE status = 'pending' AND last_failure_kind IS NOT NULL
      GROUP BY endpoint_id, last_failure_kind`)).to.include('COVERING INDEX deliveries_failing');
    expect(plan(`SELECT endpoint_id, failure_kind, count(*) FROM dead_letters WHERE triage_state IN ('new', 'acknowledged') AND failure_kind IS NOT NULL
      GROUP BY endpoint_id, failure_kind`)).to.include('dead_letters_failing');
  });

  it("version 5 adds the tenant tokens, listed per tenant over their index", () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '4' WHERE key = 'schema_version'`).run();
    db.exec(`DROP TABLE tenant_tokens`);
    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 5))).immediate();
    expect(version(db)).to.equal('5');
    db.exec(`INSERT INTO tenant_tokens (id, tenant_id, name, secret_hash, created_at, expires_at) VALUES ('htk_1', 'acme', '', 'ab', 1, NULL)`);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM tenant_tokens WHERE tenant_id = 'acme' ORDER BY created_at, id`).all() as Array<{ detail: string }>)
      .map((step) => step.detail).join(' ');
    expect(plan).to.include('tenant_tokens_tenant').and.not.include('TEMP B-TREE');
  });

  it('version 6 adds delivery_minutes, read by endpoint, by minute and by tenant over its indexes', () => {
    db.transaction(() => {
      db.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema_version', '4')`);
      migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version === 6));
    }).immediate();
    expect(version(db)).to.equal('6');
    const columns = (db.prepare(`SELECT name FROM pragma_table_info('delivery_minutes')`).pluck().all() as string[]);
    expect(columns.slice(0, 9)).to.deep.equal(['endpoint_id', 'minute', 'tenant_id', 'attempts', 'delivered', 'retries_scheduled',
      'dead_lettered', 'first_attempts', 'first_attempt_successes']);
    expect(columns.slice(9)).to.have.length(25);
    const plan = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((step) => step.detail).join(' ');
    expect(plan(`SELECT minute, sum(attempts) FROM delivery_minutes WHERE endpoint_id IN ('a', 'b') AND minute >= 0 AND minute < 9 GROUP BY minute`))
      .to.include('sqlite_autoindex_delivery_minutes_1');
    expect(plan(`SELECT minute, sum(attempts) FROM delivery_minutes WHERE minute >= 0 AND minute < 9 GROUP BY minute`)).to.include('delivery_minutes_minute');
    expect(plan(`SELECT minute, sum(attempts) FROM delivery_minutes WHERE tenant_id = 'acme' AND minute >= 0 AND minute < 9 GROUP BY minute`))
      .to.include('delivery_minutes_tenant');
  });

  it('version 7 leaves the endpoints written before it with a fixed concurrency (NULL)', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '6' WHERE key = 'schema_version'`).run();
    db.exec(`ALTER TABLE endpoints DROP COLUMN adaptive_concurrency`);
    db.exec(`INSERT INTO endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency, status, secrets,
      created_at, updated_at) VALUES ('ep_1', 'acme', 'https://x.example', '', '[]', '{"preset":"default"}', 10000, 'at-least-once', 4,
      'enabled', '[]', 1, 1)`);

    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 7))).immediate();
    expect(version(db)).to.equal('7');
    expect(db.prepare(`SELECT id, adaptive_concurrency FROM endpoints`).all()).to.deep.equal([{ id: 'ep_1', adaptive_concurrency: null }]);
  });

  it('version 10 leaves deliveries written before it unnumbered (NULL) and seeks an endpoint\'s deliveries by sequence', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '9' WHERE key = 'schema_version'`).run();
    db.exec(`DROP INDEX deliveries_open_line; DROP INDEX deliveries_endpoint_sequence; DROP TABLE endpoint_sequences;
      ALTER TABLE deliveries DROP COLUMN sequence; ALTER TABLE deliveries DROP COLUMN ordering_key; ALTER TABLE events DROP COLUMN ordering_key`);
    db.exec(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round, next_attempt_at,
      lease_epoch, created_at, updated_at) VALUES ('dlv_old', 'evt_old', 'ep_1', 'acme', 't', 0, 'delivered', 1, 0, 1, 0, 1, 1)`);

    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 10))).immediate();
    expect(version(db)).to.equal('10');
    expect(db.prepare(`SELECT id, sequence, ordering_key FROM deliveries`).all()).to.deep.equal([{ id: 'dlv_old', sequence: null, ordering_key: null }]);
    expect(db.prepare(`SELECT count(*) FROM endpoint_sequences`).pluck().get()).to.equal(0);
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM deliveries WHERE endpoint_id = 'ep_1' AND sequence > 5 ORDER BY sequence LIMIT 10`).all() as { detail: string }[];
    expect(plan.map((row) => row.detail).join('\n')).to.include('deliveries_endpoint_sequence').and.not.include('TEMP B-TREE');
  });

  it('version 11 gives endpoints written before it any order (none), and seeks the head of a line in deliveries_open_line', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '10' WHERE key = 'schema_version'`).run();
    db.exec(`DROP INDEX deliveries_open_line; ALTER TABLE endpoints DROP COLUMN ordering`);
    db.exec(`INSERT INTO endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency, status,
      disabled_reason, failing_since, secrets, created_at, updated_at) VALUES ('ep_old', 'acme', 'https://x.example', '', '[]', '{}', 1000,
      'at-least-once', 1, 'enabled', NULL, NULL, '[]', 1, 1)`);

    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 11))).immediate();
    expect(version(db)).to.equal('11');
    expect(db.prepare(`SELECT ordering FROM endpoints`).pluck().all()).to.deep.equal(['none']);
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT id FROM deliveries WHERE endpoint_id = 'ep_1' AND ordering_key IS 'k'
      AND status IN ('pending', 'in_flight') ORDER BY sequence, created_at, id LIMIT 1`).all() as { detail: string }[];
    expect(plan.map((row) => row.detail).join('\n')).to.include('deliveries_open_line').and.not.include('TEMP B-TREE');
  });

  it('version 14 gives nodes their requests in flight and clock offset: 0 for a row from before', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '12' WHERE key = 'schema_version'`).run();
    db.exec(`ALTER TABLE nodes DROP COLUMN in_flight; ALTER TABLE nodes DROP COLUMN clock_offset_ms`);
    db.exec(`INSERT INTO nodes (id, started_at, seen_at) VALUES ('node_old', 1, 2)`);

    db.transaction(() => migrate(db, SQLITE_MIGRATIONS.filter((m) => m.version <= 14))).immediate();
    expect(version(db)).to.equal('14');
    expect(db.prepare(`SELECT id, in_flight, clock_offset_ms FROM nodes`).all()).to.deep.equal([{ id: 'node_old', in_flight: 0, clock_offset_ms: 0 }]);
  });

  it('refuses a file migrated by a newer Herald with HERALD_STORE naming both versions, changing nothing', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '99' WHERE key = 'schema_version'`).run();
    let thrown: unknown;
    try {
      db.transaction(() => migrate(db, [{ version: 2, what: 'a column', sql: `ALTER TABLE endpoints ADD COLUMN spec_note TEXT` }])).immediate();
    } catch (error) {
      thrown = error;
    }
    expect(isHeraldError(thrown) && thrown.code).to.equal(ErrorCode.STORE);
    expect((thrown as Error).message).to.include('version 99').and.include('(2)');
    expect(version(db)).to.equal('99');
  });
});
