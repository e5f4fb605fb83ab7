/**
 * The outbox and fan-out in PostgreSQL: events waiting to be fanned out,
 * and the one statement that turns a batch of them into deliveries.
 */
import { NotFoundError } from '../../errors.ts';
import type { Delivery, OutboxEvent } from '../../model.ts';
import type { FanOut, FanOutClaim } from '../port.ts';
import { deliveryFromRow, eventFromRow, traceContextToColumn, type DeliveryRow, type EventRow } from '../sql-rows.ts';
import { DELIVERY_COLUMNS, deliveryColumns } from './rows.ts';
import { named, type Sql, type Statement } from './sql.ts';
import { workNotice } from './work-notice.ts';

/** A row of NULLs in place of a delivery's columns, for the statement's rows that carry no delivery. */
const NO_DELIVERY = DELIVERY_COLUMNS.map(() => 'NULL').join(', ');

export class FanOutQueries {
  readonly #s: string;
  readonly #unfanned: Statement;
  readonly #unfannedExcept: Statement;
  readonly #countUnfanned: Statement;
  readonly #record: Statement;
  readonly #getEvent: Statement;
  /** The hot statements by name, for their plans (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'unfanned' | 'unfannedExcept' | 'countUnfanned' | 'recordFanOuts', Statement>>;

  constructor(schema: string) {
    const s = schema;
    this.#s = s;
    // Both through the partial index of waiting events: cost follows the rows read, not the history.
    this.#unfanned = named(s, 'events_unfanned',
      `SELECT * FROM ${s}.events WHERE fanned_out_at IS NULL ORDER BY created_at, seq LIMIT $1`);
    // The tenants with events waiting, found by skipping through events_unfanned_tenant (one
    // lookup per tenant, never a walk of a tenant's backlog); then the oldest few of each tenant
    // not excepted, the oldest of them all first.
    this.#unfannedExcept = named(s, 'events_unfanned_except',
      `WITH RECURSIVE waiting(tenant_id) AS (
         SELECT (SELECT min(tenant_id) FROM ${s}.events WHERE fanned_out_at IS NULL)
         UNION ALL
         SELECT (SELECT min(e.tenant_id) FROM ${s}.events e WHERE e.fanned_out_at IS NULL AND e.tenant_id > w.tenant_id)
         FROM waiting w WHERE w.tenant_id IS NOT NULL
       )
       SELECT e.* FROM waiting w CROSS JOIN LATERAL (
         SELECT * FROM ${s}.events WHERE fanned_out_at IS NULL AND tenant_id = w.tenant_id ORDER BY created_at, seq LIMIT $1) e
       WHERE w.tenant_id IS NOT NULL AND NOT (w.tenant_id = ANY($2::text[]))
       ORDER BY e.created_at, e.seq LIMIT $1`);
    this.#countUnfanned = named(s, 'events_count_unfanned',
      `SELECT count(*) AS n FROM (SELECT 1 FROM ${s}.events WHERE fanned_out_at IS NULL LIMIT $1) waiting`);
    this.#getEvent = named(s, 'event_get', `SELECT * FROM ${s}.events WHERE id = $1`);
    /*
     * One statement, so one round trip and atomic without a transaction: the batch's events
     * still waiting are marked fanned out and their deliveries inserted, or nothing is written
     * when one of the events is not stored (`found` short of `wanted`). Several processes read
     * the same waiting events: each event is taken by the first statement to lock it. The
     * others skip it (SKIP LOCKED, or it is no longer waiting) and insert none of its
     * deliveries, so a race writes nothing twice; rows are locked in id order, so two batches
     * that overlap cannot deadlock. A delivery named for claiming whose slot the owner holds
     * goes in in flight at the slot's epoch; the others go in pending, and when some did, the
     * other processes are told (they may own those slots). A FIFO endpoint's deliveries always go
     * in pending: whether one is the head of its line depends on deliveries another node may be
     * numbering in this instant, invisible to this statement's snapshot; the claim decides it.
     * Each delivery inserted takes the next number of its endpoint: one upsert per endpoint of the
     * batch adds how many it gets to `endpoint_sequences`, and they are numbered from there in the
     * order given. A delivery whose id exists is left out first, so it takes no number, and no
     * other statement can insert one meanwhile: its event is locked by this one, so the insert needs
     * no ON CONFLICT (a speculative insert costs a second WAL record per row). The
     * counters' row locks, held to the commit, serialise nodes fanning out to the same endpoint;
     * they are taken in endpoint id order (and the events are skipped, never waited for, when
     * locked), so two batches cannot deadlock.
     *   $1 event ids, $2 now, $3 owner (or null), $4–$11 the deliveries' columns, $12 claim flags,
     *   $13 ordering keys
     */
    this.#record = named(s, 'fan_out_record', `
      WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS id),
      found AS (SELECT count(*) AS n FROM ${s}.events e JOIN wanted w ON w.id = e.id),
      complete AS (SELECT (SELECT n FROM found) = (SELECT count(*) FROM wanted) AS ok),
      taken AS (
        SELECT e.id FROM ${s}.events e
        WHERE e.id IN (SELECT id FROM wanted) AND e.fanned_out_at IS NULL AND (SELECT ok FROM complete)
        ORDER BY e.id
        FOR UPDATE SKIP LOCKED
      ),
      marked AS (
        UPDATE ${s}.events e SET fanned_out_at = $2 FROM taken t WHERE e.id = t.id
        RETURNING e.id
      ),
      planned AS (
        SELECT p.*, l.epoch
        FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::bigint[], $12::bool[],
            $13::text[])
          WITH ORDINALITY AS p(id, event_id, endpoint_id, tenant_id, event_type, slot, next_attempt_at, created_at, claim,
            ordering_key, n)
        LEFT JOIN ${s}.leases l ON p.claim AND l.slot = p.slot AND l.owner = $3 AND l.until > $2
          AND NOT EXISTS (SELECT 1 FROM ${s}.endpoints f WHERE f.id = p.endpoint_id AND f.ordering = 'fifo')
        WHERE p.event_id IN (SELECT id FROM marked)
          AND NOT EXISTS (SELECT 1 FROM ${s}.deliveries d WHERE d.id = p.id)
      ),
      counters AS (
        INSERT INTO ${s}.endpoint_sequences (endpoint_id, last_sequence)
        SELECT endpoint_id, count(*) FROM planned GROUP BY endpoint_id ORDER BY endpoint_id
        ON CONFLICT (endpoint_id) DO UPDATE SET last_sequence = ${s}.endpoint_sequences.last_sequence + excluded.last_sequence
        RETURNING endpoint_id, last_sequence
      ),
      -- The counters as one map, looked up per delivery: the planner cannot know how many rows
      -- two CTEs hold (it guesses one), and joined them in a nested loop, batch × batch.
      last_sequences AS (SELECT jsonb_object_agg(endpoint_id, last_sequence) AS m FROM counters),
      numbered AS (
        SELECT p.*, ((SELECT m FROM last_sequences) ->> p.endpoint_id)::bigint - count(*) OVER (PARTITION BY p.endpoint_id)
          + row_number() OVER (PARTITION BY p.endpoint_id ORDER BY p.n) AS sequence
        FROM planned p
      ),
      inserted AS (
        INSERT INTO ${s}.deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot, status, attempts, round,
          next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at, sequence, ordering_key)
        SELECT id, event_id, endpoint_id, tenant_id, event_type, slot,
          CASE WHEN epoch IS NULL THEN 'pending' ELSE 'in_flight' END, 0, 0,
          next_attempt_at, COALESCE(epoch, 0), NULL, created_at, CASE WHEN epoch IS NULL THEN created_at ELSE $2 END, NULL,
          sequence, ordering_key
        FROM numbered
        ORDER BY id
        RETURNING ${deliveryColumns(`${s}.deliveries`)}
      )
      SELECT 'claimed' AS kind, ${deliveryColumns('inserted')} FROM inserted WHERE status = 'in_flight'
      UNION ALL
      SELECT 'missing', ${NO_DELIVERY}
      WHERE NOT (SELECT ok FROM complete)
      UNION ALL
      SELECT 'notified', ${NO_DELIVERY}
      FROM (SELECT ${workNotice(s)} FROM inserted WHERE status = 'pending' LIMIT 1) notice`);
    this.statements = {
      unfanned: this.#unfanned,
      unfannedExcept: this.#unfannedExcept,
      countUnfanned: this.#countUnfanned,
      recordFanOuts: this.#record,
    };
  }

  /** Idempotent: an event whose id is already stored is left as it is. One statement for the batch. */
  async append(sql: Sql, events: readonly OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    await sql.query(
      `INSERT INTO ${this.#s}.events (id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context)
       SELECT id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::jsonb[])
         WITH ORDINALITY AS e(id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context, n)
       ORDER BY n
       ON CONFLICT (id) DO NOTHING`,
      [
        events.map((e) => e.id),
        events.map((e) => e.tenantId),
        events.map((e) => e.type),
        events.map((e) => e.payload),
        events.map((e) => e.createdAt),
        events.map((e) => e.endpointId),
        events.map((e) => e.orderingKey),
        events.map((e) => traceContextToColumn(e.traceContext)),
      ],
    );
  }

  async unfanned(sql: Sql, limit: number, exceptTenantIds: readonly string[] = []): Promise<OutboxEvent[]> {
    const n = Math.max(0, Math.floor(limit));
    if (exceptTenantIds.length === 0) return (await sql.query<EventRow>(this.#unfanned, [n])).map(eventFromRow);
    return (await sql.query<EventRow>(this.#unfannedExcept, [n, exceptTenantIds])).map(eventFromRow);
  }

  async countUnfanned(sql: Sql, cap: number): Promise<number> {
    const [row] = await sql.query<{ n: number }>(this.#countUnfanned, [Math.max(0, Math.floor(cap))]);
    return row?.n ?? 0;
  }

  async record(sql: Sql, fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    const eventIds = fanOuts.map((f) => f.eventId);
    const deliveries = fanOuts.flatMap((f) => f.deliveries);
    const rows = await sql.query<DeliveryRow & { kind: 'claimed' | 'missing' | 'notified' }>(this.#record, [
      eventIds,
      now,
      claim?.owner ?? null,
      deliveries.map((d) => d.id),
      deliveries.map((d) => d.eventId),
      deliveries.map((d) => d.endpointId),
      deliveries.map((d) => d.tenantId),
      deliveries.map((d) => d.eventType),
      deliveries.map((d) => d.slot),
      deliveries.map((d) => d.nextAttemptAt),
      deliveries.map((d) => d.createdAt),
      deliveries.map((d) => claim?.deliveryIds.has(d.id) === true),
      deliveries.map((d) => d.orderingKey),
    ]);
    if (rows.some((row) => row.kind === 'missing')) {
      const stored = new Set((await sql.query<{ id: string }>(
        `SELECT id FROM ${this.#s}.events WHERE id = ANY($1::text[])`, [eventIds])).map((row) => row.id));
      throw new NotFoundError('event', eventIds.find((id) => !stored.has(id)) ?? eventIds[0]!);
    }
    return rows.filter((row) => row.kind === 'claimed').map(deliveryFromRow);
  }

  async getEvent(sql: Sql, id: string): Promise<OutboxEvent | undefined> {
    const [row] = await sql.query<EventRow>(this.#getEvent, [id]);
    return row === undefined ? undefined : eventFromRow(row);
  }
}
