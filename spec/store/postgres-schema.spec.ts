import { expect } from 'chai';
import pg from 'pg';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { migratePostgresSchema, POSTGRES_MIGRATIONS, POSTGRES_SCHEMA_VERSION } from '../../lib/store/postgres/schema.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';

const TABLES = ['attempts', 'dead_letters', 'deliveries', 'delivery_minutes', 'endpoint_change_counter', 'endpoint_changes', 'endpoint_sequences', 'endpoints', 'event_type_catalog', 'event_types', 'events', 'leases', 'meta', 'nodes', 'replay_jobs', 'tenant_tokens'];

describe('PostgreSQL schema (a real server)', function () {
  // The first test of a run starts the server (initdb and start: a few seconds; bounded at 60 s).
  this.timeout(90_000);
  const pools: pg.Pool[] = [];

  async function freshPool(): Promise<pg.Pool> {
    const pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
    pools.push(pool);
    return pool;
  }

  afterEach(async () => {
    for (const pool of pools.splice(0)) await pool.end();
  });

  async function tablesIn(pool: pg.Pool, schema: string): Promise<string[]> {
    const { rows } = await pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
      [schema],
    );
    return rows.map((row) => row.table_name);
  }

  async function recordedVersion(pool: pg.Pool, schema: string): Promise<string | undefined> {
    const { rows } = await pool.query<{ value: string }>(`SELECT value FROM ${schema}.meta WHERE key = 'schema_version'`);
    return rows[0]?.value;
  }

  context('on an empty database', () => {
    it('creates the schema herald with every table and records the version', async () => {
      const pool = await freshPool();
      const result = await migratePostgresSchema(pool);
      expect(result).to.deep.equal({ from: 0, to: POSTGRES_SCHEMA_VERSION, applied: POSTGRES_MIGRATIONS.map((m) => m.version) });
      expect(await tablesIn(pool, 'herald')).to.deep.equal(TABLES);
      expect(await recordedVersion(pool, 'herald')).to.equal(String(POSTGRES_SCHEMA_VERSION));
      // Nothing outside its own schema.
      expect(await tablesIn(pool, 'public')).to.deep.equal([]);
    });

    it('uses the schema it is given, leaving the default one alone', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'webhooks_outbox');
      expect(await tablesIn(pool, 'webhooks_outbox')).to.deep.equal(TABLES);
      expect(await tablesIn(pool, 'herald')).to.deep.equal([]);
    });
  });

  context('when the schema is already at this version', () => {
    it('applies nothing and keeps the rows', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool);
      await pool.query(`INSERT INTO herald.nodes (id, started_at, seen_at) VALUES ('node_1', 1, 2)`);
      expect(await migratePostgresSchema(pool)).to.deep.equal({ from: POSTGRES_SCHEMA_VERSION, to: POSTGRES_SCHEMA_VERSION, applied: [] });
      expect((await pool.query('SELECT id FROM herald.nodes')).rows).to.deep.equal([{ id: 'node_1' }]);
    });
  });

  context('when a database at version 2 holds dead letters (version 3: their triage)', () => {
    it('starts the replayed ones as replayed since their replay, the others as new since their creation, and indexes the new ones', async () => {
      const pool = await freshPool();
      const upTo = (version: number) => POSTGRES_MIGRATIONS.filter((m) => m.version <= version);
      await migratePostgresSchema(pool, 'herald', upTo(2));
      const insert = `INSERT INTO herald.dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type, payload, reason,
        last_outcome, round, created_at, replayed_at) VALUES ($1, 'dlv', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{}', 0, $2, $3)`;
      await pool.query(insert, ['dl_waiting', 1_000, null]);
      await pool.query(insert, ['dl_replayed', 2_000, 5_000]);

      expect(await migratePostgresSchema(pool, 'herald', upTo(3))).to.deep.equal({ from: 2, to: 3, applied: [3] });
      const { rows } = await pool.query(`SELECT id, triage_state, triage_note, triage_by, triage_at FROM herald.dead_letters ORDER BY id`);
      expect(rows).to.deep.equal([
        { id: 'dl_replayed', triage_state: 'replayed', triage_note: null, triage_by: null, triage_at: '5000' },
        { id: 'dl_waiting', triage_state: 'new', triage_note: null, triage_by: null, triage_at: '1000' },
      ]);
      const index = await pool.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'herald' AND indexname = 'dead_letters_unreviewed'`);
      expect(index.rows[0]?.indexdef).to.include('(created_at)').and.include(`WHERE (triage_state = 'new'::text)`);
    });
  });

  context('when a database at version 4 holds failures (version 5: their kinds)', () => {
    it('gives the retrying deliveries and the dead letters the kind unknown, and indexes the failing rows', async () => {
      const pool = await freshPool();
      const upTo = (version: number) => POSTGRES_MIGRATIONS.filter((m) => m.version <= version);
      await migratePostgresSchema(pool, 'herald', upTo(4));
      const delivery = `INSERT INTO herald.deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round,
        next_attempt_at, lease_epoch, created_at, updated_at) VALUES ($1, 'evt', 'ep', 'acme', 't', 0, $2, $3, 0, 9000, 0, 1000, $4)`;
      await pool.query(delivery, ['dlv_retrying', 'pending', 2, 4_000]);
      await pool.query(delivery, ['dlv_fresh', 'pending', 0, 1_000]);
      await pool.query(`INSERT INTO herald.dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type, payload, reason,
        last_outcome, round, created_at, replayed_at) VALUES ('dl_1', 'dlv', 'evt', 'ep', 'acme', 't', '{}', 'exhausted', '{}', 0, 2000, NULL)`);

      expect(await migratePostgresSchema(pool, 'herald', upTo(5))).to.deep.equal({ from: 4, to: 5, applied: [5] });
      const { rows } = await pool.query(`SELECT id, last_failure_kind, last_failure_at FROM herald.deliveries ORDER BY id`);
      expect(rows).to.deep.equal([
        { id: 'dlv_fresh', last_failure_kind: null, last_failure_at: null },
        { id: 'dlv_retrying', last_failure_kind: 'unknown', last_failure_at: '4000' },
      ]);
      expect((await pool.query(`SELECT failure_kind FROM herald.dead_letters`)).rows).to.deep.equal([{ failure_kind: 'unknown' }]);
      const index = await pool.query(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'herald' AND indexname LIKE '%_failing' ORDER BY indexname`);
      expect(index.rows.map((row) => row.indexname)).to.deep.equal(['dead_letters_failing', 'deliveries_failing']);
      expect(index.rows[1]?.indexdef).to.include('(endpoint_id, last_failure_kind, last_failure_at) INCLUDE (tenant_id)').and.include(`status = 'pending'::text`);
    });
  });

  context('when a database at version 5 is migrated (version 6: tenant tokens)', () => {
    it("creates the tenant tokens' table and the index that lists them per tenant", async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 5));
      expect(await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 6))).to.deep.equal({ from: 5, to: 6, applied: [6] });
      const index = await pool.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'herald' AND indexname = 'tenant_tokens_tenant'`);
      expect(index.rows[0]?.indexdef).to.include('(tenant_id, created_at, id)');
    });
  });

  context('when a database at version 6 is migrated (version 7: delivery minutes)', () => {
    it('creates delivery_minutes with its counts and 25 latency buckets, keyed by (endpoint, minute), and indexes minute and tenant', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 6));
      expect(await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 7))).to.deep.equal({ from: 6, to: 7, applied: [7] });
      const columns = await pool.query(`SELECT column_name FROM information_schema.columns
        WHERE table_schema = 'herald' AND table_name = 'delivery_minutes' ORDER BY ordinal_position`);
      const names = columns.rows.map((row) => row.column_name as string);
      expect(names.slice(0, 9)).to.deep.equal(['endpoint_id', 'minute', 'tenant_id', 'attempts', 'delivered', 'retries_scheduled',
        'dead_lettered', 'first_attempts', 'first_attempt_successes']);
      expect(names.slice(9)).to.have.length(25).and.to.include('latency_00').and.include('latency_24');
      const indexes = await pool.query(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'herald' AND tablename = 'delivery_minutes' ORDER BY indexname`);
      expect(indexes.rows.map((row) => row.indexdef.replace(/^.* USING btree /, ''))).to.deep.equal([
        '(minute)', '(endpoint_id, minute)', '(tenant_id, minute)',
      ]);
    });
  });

  context('when a database from before version 8 holds endpoints (version 8: adaptive concurrency)', () => {
    it('leaves them with a fixed concurrency (NULL)', async () => {
      const pool = await freshPool();
      const before = POSTGRES_MIGRATIONS.filter((m) => m.version < 8);
      await migratePostgresSchema(pool, 'herald', before);
      await pool.query(`INSERT INTO herald.endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency,
        status, secrets, created_at, updated_at) VALUES ('ep_1', 'acme', 'https://x.example', '', '[]', '{"preset":"default"}', 10000,
        'at-least-once', 4, 'enabled', '[]', 1, 1)`);

      const result = await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 8));
      expect(result).to.deep.include({ to: 8 });
      expect(result.applied).to.include(8);
      expect((await pool.query(`SELECT id, adaptive_concurrency FROM herald.endpoints`)).rows).to.deep.equal([{ id: 'ep_1', adaptive_concurrency: null }]);
    });
  });

  context('when a database from before version 11 holds deliveries (version 11: sequence numbers)', () => {
    it('leaves them unnumbered (NULL), adds the counters\' table, and refuses a number given twice to one endpoint', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version < 11));
      const insert = (id: string) => `INSERT INTO herald.deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts,
        round, next_attempt_at, lease_epoch, created_at, updated_at) VALUES ('${id}', 'evt_${id}', 'ep_1', 'acme', 't', 0, 'pending', 0, 0, 1, 0, 1, 1)`;
      await pool.query(insert('dlv_old'));
      await pool.query(insert('dlv_older'));

      const result = await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 11));
      expect(result.applied).to.include(11);
      expect((await pool.query(`SELECT id, sequence, ordering_key FROM herald.deliveries ORDER BY id`)).rows).to.deep.equal([
        { id: 'dlv_old', sequence: null, ordering_key: null },
        { id: 'dlv_older', sequence: null, ordering_key: null },
      ]);
      expect((await pool.query(`SELECT * FROM herald.endpoint_sequences`)).rows).to.deep.equal([]);
      await pool.query(`UPDATE herald.deliveries SET sequence = 1 WHERE id = 'dlv_old'`);
      const duplicate = await pool.query(`UPDATE herald.deliveries SET sequence = 1 WHERE id = 'dlv_older'`).then(() => undefined, (error: { code?: string }) => error);
      expect(duplicate?.code, 'unique_violation').to.equal('23505');
    });
  });

  context('when a database from before version 12 holds endpoints (version 12: FIFO endpoints)', () => {
    it('gives them any order (none) and indexes the open deliveries of each line', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version < 12));
      await pool.query(`INSERT INTO herald.endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency,
        status, disabled_reason, failing_since, secrets, created_at, updated_at)
        VALUES ('ep_old', 'acme', 'https://x.example', '', '[]', '{}', 1000, 'at-least-once', 1, 'enabled', NULL, NULL, '[]', 1, 1)`);
      const result = await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 12));
      expect(result.applied).to.deep.equal([12]);
      expect((await pool.query(`SELECT ordering FROM herald.endpoints`)).rows).to.deep.equal([{ ordering: 'none' }]);
      const { rows } = await pool.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'herald' AND indexname = 'deliveries_open_line'`);
      expect(rows[0]?.indexdef).to.include("COALESCE(ordering_key, ''::text)").and.include("status = ANY (ARRAY['pending'::text, 'in_flight'::text])");
    });
  });

  context('when a database from before version 15 holds nodes (version 15: their figures)', () => {
    it('gives them 0 requests in flight and a 0 clock offset until their next heartbeat', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version < 15));
      await pool.query(`INSERT INTO herald.nodes (id, started_at, seen_at) VALUES ('node_old', 1, 2)`);
      const result = await migratePostgresSchema(pool, 'herald', POSTGRES_MIGRATIONS.filter((m) => m.version <= 15));
      expect(result.applied).to.deep.equal([15]);
      expect((await pool.query(`SELECT id, in_flight, clock_offset_ms FROM herald.nodes`)).rows).to.deep.equal([
        { id: 'node_old', in_flight: 0, clock_offset_ms: '0' },
      ]);
    });
  });

  context('when several processes start at once', () => {
    it('migrates once; the others wait for it and find it done', async () => {
      const first = await freshPool();
      const connectionString = first.options.connectionString!;
      const others = Array.from({ length: 3 }, () => new pg.Pool({ connectionString, max: 2 }));
      pools.push(...others);
      const results = await Promise.all([first, ...others].map((pool) => migratePostgresSchema(pool)));
      expect(results.map((r) => r.applied.length).sort()).to.deep.equal([0, 0, 0, POSTGRES_MIGRATIONS.length]);
      expect(await tablesIn(first, 'herald')).to.deep.equal(TABLES);
    });
  });

  context('when the database was migrated by a newer Herald', () => {
    it('refuses with HERALD_STORE naming both versions, and changes nothing', async () => {
      const pool = await freshPool();
      await migratePostgresSchema(pool);
      await pool.query(`UPDATE herald.meta SET value = $1 WHERE key = 'schema_version'`, [String(POSTGRES_SCHEMA_VERSION + 1)]);
      const error = await migratePostgresSchema(pool).catch((e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.STORE);
      expect((error as Error).message).to.include(`version ${POSTGRES_SCHEMA_VERSION + 1}`).and.include(`(${POSTGRES_SCHEMA_VERSION})`);
      expect(await recordedVersion(pool, 'herald')).to.equal(String(POSTGRES_SCHEMA_VERSION + 1));
    });
  });

  context('when the schema name is not a plain identifier', () => {
    it('refuses it naming the field and the rule, before touching the database', async () => {
      const pool = await freshPool();
      for (const bad of ['', 'Herald', '1st', 'herald; DROP SCHEMA public', 'a'.repeat(64), 'her-ald']) {
        const error = await migratePostgresSchema(pool, bad).catch((e: unknown) => e);
        expect(isHeraldError(error) && error.code, bad).to.equal(ErrorCode.INVALID_INPUT);
        expect((error as Error).message).to.match(/^schema: must be a lower-case identifier/);
      }
      const { rows } = await pool.query(`SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT LIKE 'pg_%' AND schema_name <> 'information_schema' ORDER BY 1`);
      expect(rows).to.deep.equal([{ schema_name: 'public' }]);
    });
  });

  context('when the server refuses', () => {
    it('says so with HERALD_STORE and the server\'s reason', async () => {
      const pool = new pg.Pool({ connectionString: (await createTestDatabase()).replace(/\/[^/]+$/, '/no_such_database'), max: 1 });
      pools.push(pool);
      const error = await migratePostgresSchema(pool).catch((e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.STORE);
      expect((error as Error).message).to.include('no_such_database');
    });
  });
});
