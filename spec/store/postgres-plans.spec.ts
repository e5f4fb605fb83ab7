/**
 * The plans of the PostgreSQL store's hot statements, on a table with a long
 * history and a backlog: each reads the deliveries, events and attempts
 * through an index, never by scanning the table, so its cost follows the rows
 * it takes, not what the tables hold. With HERALD_SPEC_PLANS=1 the plans are
 * printed (one line per node), as docs/POSTGRES.md shows them.
 */
import { expect } from 'chai';
import pg from 'pg';
import { ManualClock } from '../../lib/clock.ts';
import { slotOf } from '../../lib/ids.ts';
import { ClaimQueries } from '../../lib/store/postgres/claims.ts';
import { DeliveryLogQueries } from '../../lib/store/postgres/delivery-log.ts';
import { FanOutQueries } from '../../lib/store/postgres/fan-out.ts';
import { LeaseQueries } from '../../lib/store/postgres/leases.ts';
import { PostgresStore } from '../../lib/store/postgres/postgres-store.ts';
import { RetentionQueries } from '../../lib/store/postgres/retention.ts';
import { SettleQueries } from '../../lib/store/postgres/settle.ts';
import type { Statement } from '../../lib/store/postgres/sql.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';

const SCHEMA = 'herald_plans';
const SLOTS = 8;
const ENDPOINTS = 100;
const HISTORY = 53_000;
const BACKLOG = 5_000;
const UNFANNED = 2_000;
const NOW = 1_800_000_000_000;
/** Tables whose size grows with traffic: never scanned whole by a hot statement. */
const GROWING = new Set(['deliveries', 'events', 'attempts', 'dead_letters']);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

function describePlan(plan: PlanNode, depth = 0): string[] {
  const what = [plan['Node Type'], plan['Relation Name'] && `on ${plan['Relation Name']}`, plan['Index Name'] && `using ${plan['Index Name']}`]
    .filter(Boolean).join(' ');
  return [`${'  '.repeat(depth)}${what}`, ...(plan.Plans ?? []).flatMap((child) => describePlan(child, depth + 1))];
}

describe('PostgresStore hot statements on a long history (EXPLAIN)', function () {
  this.timeout(60_000);
  let pool: pg.Pool;
  let store: PostgresStore;
  const endpointIds = Array.from({ length: ENDPOINTS }, (_, i) => `ep_${String(i).padStart(3, '0')}`);

  before(async () => {
    const url = await createTestDatabase();
    store = new PostgresStore({ connectionString: url, schema: SCHEMA, clock: new ManualClock(NOW) });
    await store.init({ slotCount: SLOTS });
    pool = new pg.Pool({ connectionString: url, max: 1 });
    const s = SCHEMA;
    await pool.query(`INSERT INTO ${s}.endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency,
        status, disabled_reason, failing_since, secrets, created_at, updated_at)
      SELECT id, 'acme', 'https://hooks.example.com/' || id, '', '[]', '{"preset":"default"}', 10000, 'at-least-once', 4,
        'enabled', NULL, NULL, '[]', 0, 0 FROM unnest($1::text[]) AS id`, [endpointIds]);
    await pool.query(`INSERT INTO ${s}.events (id, tenant_id, type, payload, created_at, endpoint_id, fanned_out_at)
      SELECT 'evt_' || lpad(g::text, 12, '0'), 'acme', 'a.b', '{"n":1}', g, NULL, CASE WHEN g <= $1 THEN g END
      FROM generate_series(1, $2::int) AS g`, [HISTORY + BACKLOG, HISTORY + BACKLOG + UNFANNED]);
    await pool.query(`INSERT INTO ${s}.deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round,
        next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at, sequence)
      SELECT 'dlv_' || lpad(g::text, 12, '0'), 'evt_' || lpad(g::text, 12, '0'), ep.id, 'acme', 'a.b', ep.slot,
        CASE WHEN g <= $1 THEN 'delivered' ELSE 'pending' END, CASE WHEN g <= $1 THEN 1 ELSE 0 END, 0,
        CASE WHEN g <= $1 THEN g ELSE $3::bigint - 1000 END, 1, NULL, g, g, CASE WHEN g <= $1 THEN g END, g
      FROM generate_series(1, $2::int) AS g
      JOIN unnest($4::text[], $5::int[]) WITH ORDINALITY AS ep(id, slot, n) ON ep.n = g % ${ENDPOINTS} + 1`,
      [HISTORY, HISTORY + BACKLOG, NOW, endpointIds, endpointIds.map((id) => slotOf(id, SLOTS))]);
    await pool.query(`INSERT INTO ${s}.attempts (delivery_id, number, round, started_at, duration_ms, outcome, error)
      SELECT 'dlv_' || lpad(g::text, 12, '0'), 1, 0, g, 5, '{"kind":"response","status":200}', NULL FROM generate_series(1, $1::int) AS g`, [HISTORY]);
    await pool.query(`INSERT INTO ${s}.leases (slot, owner, until, epoch) SELECT g, 'node-a', $1, 1 FROM generate_series(0, $2::int) AS g`,
      [NOW + 60_000, SLOTS - 1]);
    await pool.query(`ANALYZE ${s}.endpoints, ${s}.events, ${s}.deliveries, ${s}.attempts, ${s}.leases`);
  });

  after(async () => {
    await pool?.end();
    await store?.close();
  });

  async function plan(statement: Statement, values: readonly unknown[]): Promise<PlanNode> {
    const { rows } = await pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${statement.text}`, values as unknown[]);
    return rows[0]!['QUERY PLAN'][0].Plan;
  }

  const claims = new ClaimQueries(SCHEMA).statements;
  const fanOut = new FanOutQueries(SCHEMA).statements;
  const settle = new SettleQueries(SCHEMA).statements;
  const log = new DeliveryLogQueries(SCHEMA).statements;
  const retention = new RetentionQueries(SCHEMA).statements;
  const due = endpointIds.slice(0, 10);
  const unfannedIds = Array.from({ length: 100 }, (_, i) => `evt_${String(HISTORY + BACKLOG + 1 + i).padStart(12, '0')}`);
  const deliveriesOf = unfannedIds.map((id, i) => ({ id: `dlv_new_${i}`, eventId: id, endpointId: endpointIds[i % ENDPOINTS]! }));
  const settlementIds = Array.from({ length: 100 }, (_, i) => `dlv_${String(HISTORY + 1 + i).padStart(12, '0')}`);
  /** Each hot statement, its parameters, and the indexes its plan must use (beyond scanning nothing whole). */
  const cases: Array<[string, Statement, () => readonly unknown[], (readonly string[])?]> = [
    ['events waiting to fan out', fanOut.unfanned, () => [100], ['events_unfanned']],
    ['count of the waiting events', fanOut.countUnfanned, () => [100_000]],
    ['fan-out of 100 events, claiming', fanOut.recordFanOuts, () => [
      unfannedIds, NOW, 'node-a', deliveriesOf.map((d) => d.id), deliveriesOf.map((d) => d.eventId), deliveriesOf.map((d) => d.endpointId),
      deliveriesOf.map(() => 'acme'), deliveriesOf.map(() => 'a.b'), deliveriesOf.map((d) => slotOf(d.endpointId, SLOTS)),
      deliveriesOf.map(() => NOW), deliveriesOf.map(() => NOW), deliveriesOf.map(() => true), deliveriesOf.map(() => null),
    ]],
    ['an endpoint\'s deliveries after sequence N', log.afterSequence, () => [endpointIds[3], 10, 100], ['deliveries_endpoint_sequence']],
    ['count of the due backlog', claims.countDue, () => [NOW, 1_001]],
    // A FIFO endpoint's head of line is a seek in deliveries_open_line (a subplan, run only for those).
    ['claim by scan', claims.claimByScan, () => ['node-a', NOW, [], null, 10, 100], ['deliveries_open_line']],
    ['claim by endpoint', claims.claimByEndpoint, () => ['node-a', NOW, [], null, 10, 100], ['deliveries_open_line']],
    ['claim for 10 named endpoints', claims.claimForEndpoints, () => [due, due.map((id) => slotOf(id, SLOTS)), due.map(() => 10), 'node-a', NOW],
      ['deliveries_pending_claim', 'deliveries_open_line']],
    ['settle of 100 attempts', settle.settle, () => [
      settlementIds, settlementIds.map((_, i) => (i % 10 === 0 ? 'retry' : 'delivered')), settlementIds.map(() => 1),
      settlementIds.map((_, i) => (i % 10 === 0 ? NOW + 60_000 : null)), settlementIds.map(() => null), settlementIds.map(() => NOW),
      settlementIds.map(() => 5), settlementIds.map(() => '{"kind":"response","status":200}'), settlementIds.map(() => null),
      settlementIds.map(() => null), NOW, settlementIds.map((_, i) => (i % 10 === 0 ? 'http-503' : null)),
    ], ['deliveries_pkey']],
  ];

  for (const [name, statement, values, indexes = []] of cases) {
    it(`${name}: reads the growing tables through indexes only`, async () => {
      const tree = await plan(statement, values());
      if (process.env.HERALD_SPEC_PLANS === '1') console.log(`      ${name}:\n${describePlan(tree, 4).map((line) => `      ${line}`).join('\n')}`);
      const scanned = nodesOf(tree).filter((node) => node['Node Type'] === 'Seq Scan' && GROWING.has(node['Relation Name'] ?? ''));
      expect(scanned.map((node) => node['Relation Name']), `${name} scans a whole table`).to.deep.equal([]);
      const used = new Set(nodesOf(tree).map((node) => node['Index Name']));
      for (const index of indexes) expect(used.has(index), `${name} uses ${index}`).to.equal(true);
    });
  }

  // Retention is the only reader of events by age: their index holds the fanned-out events alone
  // (a published event gets its entry at its fan-out). The fixture has no dead letters, so that table
  // may be scanned.
  it('retention of the events older than the horizon: reads them through events_fanned_created, deletes by key', async () => {
    const tree = await plan(retention.purgeEvents, [200]);
    if (process.env.HERALD_SPEC_PLANS === '1') console.log(describePlan(tree, 4).map((line) => `      ${line}`).join('\n'));
    const scanned = nodesOf(tree).filter((node) => node['Node Type'] === 'Seq Scan' && ['events', 'deliveries'].includes(node['Relation Name'] ?? ''));
    expect(scanned.map((node) => node['Relation Name'])).to.deep.equal([]);
    const used = new Set(nodesOf(tree).map((node) => node['Index Name']));
    expect([...used]).to.include.members(['events_fanned_created', 'deliveries_event', 'events_pkey']);
  });
});

/**
 * The fan-out past a busy tenant's backlog (`unfannedEvents(limit, exceptTenantIds)`), beside 50 000
 * waiting events of one tenant: it finds the tenants with events waiting by skipping through the
 * partial index `events_unfanned_tenant` (one lookup per tenant), so the rows it reads follow the
 * number of tenants waiting and the limit, never the busy tenant's backlog.
 */
describe('PostgresStore fan-out past a busy tenant\'s backlog (EXPLAIN ANALYZE)', function () {
  this.timeout(60_000);
  const SCHEMA_TENANTS = 'herald_plans_tenants';
  const FANNED = 50_000;
  const BUSY_BACKLOG = 50_000;
  const QUIET_TENANTS = 10;
  const QUIET_EACH = 2;
  let pool: pg.Pool;
  let store: PostgresStore;

  before(async () => {
    const url = await createTestDatabase();
    store = new PostgresStore({ connectionString: url, schema: SCHEMA_TENANTS, clock: new ManualClock(NOW) });
    await store.init({ slotCount: SLOTS });
    pool = new pg.Pool({ connectionString: url, max: 1 });
    const s = SCHEMA_TENANTS;
    // History (fanned out) and the backlog of `bulk`, then a few events of each quiet tenant, published after it.
    await pool.query(`INSERT INTO ${s}.events (id, tenant_id, type, payload, created_at, endpoint_id, fanned_out_at)
      SELECT 'evt_' || lpad(g::text, 12, '0'), 'bulk', 'a.b', '{"n":1}', g, NULL, CASE WHEN g <= $1 THEN g END
      FROM generate_series(1, $2::int) AS g`, [FANNED, FANNED + BUSY_BACKLOG]);
    await pool.query(`INSERT INTO ${s}.events (id, tenant_id, type, payload, created_at, endpoint_id, fanned_out_at)
      SELECT 'evt_q' || lpad(t::text, 3, '0') || '_' || n, 'quiet-' || lpad(t::text, 3, '0'), 'a.b', '{"n":1}', $1::bigint + t * 10 + n, NULL, NULL
      FROM generate_series(1, $2::int) AS t, generate_series(1, $3::int) AS n`, [FANNED + BUSY_BACKLOG, QUIET_TENANTS, QUIET_EACH]);
    await pool.query(`ANALYZE ${s}.events`);
  });

  after(async () => {
    await pool?.end();
    await store?.close();
  });

  interface AnalyzedNode extends PlanNode {
    'Actual Rows': number;
    'Actual Loops': number;
    Plans?: AnalyzedNode[];
  }

  it('reads the quiet tenants\' events through events_unfanned_tenant, never scanning the busy tenant\'s backlog', async () => {
    const statement = new FanOutQueries(SCHEMA_TENANTS).statements.unfannedExcept;
    const { rows } = await pool.query<{ 'QUERY PLAN': [{ Plan: AnalyzedNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`, [100, ['bulk']]);
    const tree = rows[0]!['QUERY PLAN'][0].Plan;
    if (process.env.HERALD_SPEC_PLANS === '1') console.log(describePlan(tree, 4).map((line) => `      ${line}`).join('\n'));
    const nodes = nodesOf(tree) as AnalyzedNode[];
    const onEvents = nodes.filter((node) => node['Relation Name'] === 'events');
    expect(onEvents.filter((node) => node['Node Type'] === 'Seq Scan'), 'a scan of the whole outbox').to.deep.equal([]);
    expect(new Set(onEvents.map((node) => node['Index Name']))).to.deep.equal(new Set(['events_unfanned_tenant']));
    // One lookup per waiting tenant to find them (11, and one past the last), at most `limit` rows per tenant
    // after that (100 of bulk's at most, if its exclusion is not pushed down): far from its 50 000.
    const rowsRead = onEvents.reduce((sum, node) => sum + node['Actual Rows'] * node['Actual Loops'], 0);
    expect(rowsRead).to.be.at.most(2 * (QUIET_TENANTS + 2) + 100 + QUIET_TENANTS * QUIET_EACH);
    const returned = (await store.unfannedEvents(100, ['bulk'])).map((event) => event.tenantId);
    expect(returned).to.have.length(QUIET_TENANTS * QUIET_EACH);
    expect(returned.every((tenantId) => tenantId.startsWith('quiet-'))).to.equal(true);
  });
});

/**
 * What the weighing node pays at each heartbeat (lib/cluster/slot-weigher.ts): the count of open
 * deliveries per slot (`countOpenBySlot`) beside a history of 53 000 delivered ones and a backlog of
 * 50 000 (45 000 pending and due, 5 000 in flight) over 256 slots: two index-only scans of the
 * partial indexes, never the table. With HERALD_SPEC_PLANS=1 it prints the plan and its times.
 */
describe('PostgresStore count of open deliveries per slot on a 50 000-row backlog (EXPLAIN ANALYZE)', function () {
  this.timeout(120_000);
  const SCHEMA_WEIGHTS = 'herald_plans_weights';
  const SLOT_COUNT = 256;
  const DELIVERED = 53_000;
  const PENDING = 45_000;
  const IN_FLIGHT = 5_000;
  let pool: pg.Pool;
  let store: PostgresStore;

  before(async () => {
    const url = await createTestDatabase();
    store = new PostgresStore({ connectionString: url, schema: SCHEMA_WEIGHTS, clock: new ManualClock(NOW) });
    await store.init({ slotCount: SLOT_COUNT });
    pool = new pg.Pool({ connectionString: url, max: 1 });
    const s = SCHEMA_WEIGHTS;
    const total = DELIVERED + PENDING + IN_FLIGHT;
    await pool.query(`INSERT INTO ${s}.deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round,
        next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at, sequence)
      SELECT 'dlv_' || lpad(g::text, 12, '0'), 'evt_' || lpad(g::text, 12, '0'), 'ep_' || (g % 400), 'acme', 'a.b', (g % 400) % $4::int,
        CASE WHEN g <= $1 THEN 'delivered' WHEN g <= $1 + $2 THEN 'pending' ELSE 'in_flight' END, CASE WHEN g <= $1 THEN 1 ELSE 0 END, 0,
        CASE WHEN g <= $1 THEN g ELSE $5::bigint - 1000 END, 1, NULL, g, g, CASE WHEN g <= $1 THEN g END, g
      FROM generate_series(1, $3::int) AS g`, [DELIVERED, PENDING, total, SLOT_COUNT, NOW]);
    await pool.query(`VACUUM ANALYZE ${s}.deliveries`);
  });

  after(async () => {
    await pool?.end();
    await store?.close();
  });

  interface TimedPlan {
    Plan: PlanNode;
    'Execution Time': number;
    'Planning Time': number;
  }

  it('reads the two partial indexes only and counts every open delivery', async () => {
    const statement = new LeaseQueries(SCHEMA_WEIGHTS).statements.countOpenBySlot;
    const times: number[] = [];
    let tree: PlanNode | undefined;
    for (let run = 0; run < 5; run++) {
      const { rows } = await pool.query<{ 'QUERY PLAN': [TimedPlan] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`, [NOW]);
      tree = rows[0]!['QUERY PLAN'][0].Plan;
      times.push(rows[0]!['QUERY PLAN'][0]['Execution Time']);
    }
    if (process.env.HERALD_SPEC_PLANS === '1') {
      console.log(describePlan(tree!, 4).map((line) => `      ${line}`).join('\n'));
      console.log(`      execution times (ms): ${times.map((t) => t.toFixed(1)).join(', ')}`);
    }
    const nodes = nodesOf(tree!);
    expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name'])).to.deep.equal([]);
    const used = new Set(nodes.map((node) => node['Index Name']));
    expect(used.has('deliveries_pending_claim') && used.has('deliveries_in_flight'), [...used].join(', ')).to.equal(true);
    const counts = await store.countOpenBySlot(NOW);
    expect(counts.reduce((sum, c) => sum + c.open, 0)).to.equal(PENDING + IN_FLIGHT);
  });

  it('costs every other node one key lookup to read the stored weights', async () => {
    await store.putSlotWeights({ weights: new Array<number>(SLOT_COUNT).fill(2), by: 'node-a', at: NOW });
    const { rows } = await pool.query<{ 'QUERY PLAN': [TimedPlan] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) SELECT value FROM ${SCHEMA_WEIGHTS}.meta WHERE key = 'slot_weights'`);
    const timed = rows[0]!['QUERY PLAN'][0];
    if (process.env.HERALD_SPEC_PLANS === '1') console.log(`      read: ${describePlan(timed.Plan).join(' / ')}, ${timed['Execution Time'].toFixed(3)} ms`);
    expect(nodesOf(timed.Plan).some((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] !== 'meta')).to.equal(false);
    expect((await store.getSlotWeights())?.weights).to.have.length(SLOT_COUNT);
  });
});
