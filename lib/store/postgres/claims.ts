/**
 * Claiming deliveries in PostgreSQL: due work in the owner's live slots,
 * marked in flight at the slot's epoch and returned with its events, in one
 * statement per claim.
 *
 * Due work is pending and due, or in flight under an epoch older than the
 * slot's (claimed by a process that crashed or lost the slot). Rows another
 * transaction holds locked (the slot's previous owner settling them) are
 * skipped, not waited for (`FOR UPDATE SKIP LOCKED`), and each row's state
 * is checked again once locked, so a row is never claimed twice.
 *
 * `claimDue` finds candidates one of two ways, the same rows either way:
 * - by scan: every due row, in one pass over `deliveries_pending_due`.
 *   Cheapest while little is due; its cost grows with the backlog.
 * - by endpoint: walk the distinct endpoints with pending rows in each owned
 *   slot (a loose index scan over `deliveries_pending_claim`) and take only
 *   the first `perEndpoint` due rows of each. Its cost grows with the number
 *   of busy endpoints, not with the backlog.
 * It picks the second once more than CLAIM_SCAN_MAX rows are due.
 */
import { slotOf } from '../../ids.ts';
import type { DeliveryJob, TraceContext } from '../../model.ts';
import type { ClaimRequest, EndpointClaimRequest } from '../port.ts';
import { deliveryFromRow, traceContextFromColumn, type DeliveryRow, type JsonColumn } from '../sql-rows.ts';
import { deliveryColumns } from './rows.ts';
import { named, type Sql, type Statement } from './sql.ts';

const CLAIM_SCAN_MAX = 1_000;

/** A claimed row with its event's columns (`event_*` null when the event is gone). */
interface ClaimedRow extends DeliveryRow {
  event_tenant_id: string | null;
  event_type_name: string | null;
  event_payload: string | null;
  event_created_at: number | null;
  event_endpoint_id: string | null;
  event_ordering_key: string | null;
  event_trace_context: JsonColumn<TraceContext> | null;
  /** It was in flight under an older epoch: taken over (`DeliveryJob.resumed`). */
  resumed: boolean;
}

export class ClaimQueries {
  readonly #s: string;
  readonly #countDue: Statement;
  readonly #byScan: Statement;
  readonly #byEndpoint: Statement;
  readonly #forEndpoints: Statement;
  /** The hot statements by name, for their plans (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'countDue' | 'claimByScan' | 'claimByEndpoint' | 'claimForEndpoints', Statement>>;

  constructor(schema: string) {
    const s = schema;
    this.#s = s;
    this.#countDue = named(s, 'claim_count_due', `SELECT count(*) AS n FROM
      (SELECT 1 FROM ${s}.deliveries WHERE status = 'pending' AND next_attempt_at <= $1 LIMIT $2) due`);

    /*
     * FIFO endpoints: a delivery is taken only as the head of its line (endpoint, ordering key), the
     * earliest open delivery in `deliveries_open_line`'s order; one seek, and only for a FIFO
     * endpoint (`ordering = 'none'` is tested first). A line's only head: never two of one line in
     * a claim, none while its head is in flight or waits for a retry. Snapshot-safe: a delivery
     * numbered before another committed before it (the endpoint's counter lock orders them), so a
     * snapshot that sees a delivery sees every earlier one of its line.
     */
    const isLineHead = (d: string): string => `${d}.id = (SELECT h.id FROM ${s}.deliveries h
      WHERE h.endpoint_id = ${d}.endpoint_id AND COALESCE(h.ordering_key, '') = COALESCE(${d}.ordering_key, '')
        AND h.status IN ('pending', 'in_flight')
      ORDER BY h.sequence NULLS FIRST, h.created_at, h.id LIMIT 1)`;
    // $1 owner, $2 now, $3 endpoints to skip, $4 the one endpoint (or null), $5 per endpoint, $6 limit
    const filters = (endpointId: string, d: string): string => `
      AND NOT (${endpointId} = ANY($3::text[]))
      AND ($4::text IS NULL OR ${endpointId} = $4::text)
      AND EXISTS (SELECT 1 FROM ${s}.endpoints e WHERE e.id = ${endpointId} AND e.status = 'enabled'
        AND (e.ordering = 'none' OR ${isLineHead(d)}))`;
    // `slot = ANY(owned slots)` as well as the join: the planner cannot know how many slots the
    // owner holds (it guessed 4 of 256), and without it joined every due row of every owner.
    const ownedSlots = `d.slot = ANY(ARRAY(SELECT slot FROM owned))`;
    // Each row's slot epoch by one key lookup: joined to the owned slots, whose count the planner
    // cannot know either, the rows were compared with every owned slot in a nested loop.
    const slotEpoch = `CROSS JOIN LATERAL (SELECT l.epoch FROM ${s}.leases l WHERE l.slot = d.slot AND l.owner = $1 AND l.until > $2) o`;
    const orphans = `SELECT d.id, d.endpoint_id, d.next_attempt_at, o.epoch
      FROM ${s}.deliveries d ${slotEpoch}
      WHERE d.status = 'in_flight' AND ${ownedSlots} AND d.lease_epoch < o.epoch ${filters('d.endpoint_id', 'd')}`;
    const byScan = `candidates AS (
        SELECT d.id, d.endpoint_id, d.next_attempt_at, o.epoch
        FROM ${s}.deliveries d ${slotEpoch}
        WHERE d.status = 'pending' AND ${ownedSlots} AND d.next_attempt_at <= $2 ${filters('d.endpoint_id', 'd')}
        UNION ALL
        ${orphans}
      )`;
    const byEndpoint = `busy (slot, epoch, endpoint_id) AS (
        SELECT o.slot, o.epoch, (SELECT min(endpoint_id) FROM ${s}.deliveries WHERE status = 'pending' AND slot = o.slot)
        FROM owned o
        UNION ALL
        SELECT b.slot, b.epoch, (SELECT min(endpoint_id) FROM ${s}.deliveries
          WHERE status = 'pending' AND slot = b.slot AND endpoint_id > b.endpoint_id)
        FROM busy b WHERE b.endpoint_id IS NOT NULL
      ),
      candidates AS (
        SELECT d.id, d.endpoint_id, d.next_attempt_at, b.epoch
        FROM busy b CROSS JOIN LATERAL (
          SELECT id, endpoint_id, next_attempt_at, ordering_key FROM ${s}.deliveries p
          WHERE status = 'pending' AND slot = b.slot AND endpoint_id = b.endpoint_id AND next_attempt_at <= $2
            -- Here too: a FIFO endpoint's first due rows may all wait behind their lines' heads.
            AND (NOT EXISTS (SELECT 1 FROM ${s}.endpoints f WHERE f.id = b.endpoint_id AND f.ordering = 'fifo') OR ${isLineHead('p')})
          ORDER BY next_attempt_at, id LIMIT $5
        ) d
        WHERE b.endpoint_id IS NOT NULL ${filters('b.endpoint_id', 'd')}
        UNION ALL
        ${orphans}
      )`;
    const claim = (candidates: string): string => `
      WITH RECURSIVE
      owned AS (SELECT slot, epoch FROM ${s}.leases WHERE owner = $1 AND until > $2),
      ${candidates},
      ranked AS (
        SELECT id, next_attempt_at, epoch,
               row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id) AS rank
        FROM candidates
      ),
      picked AS (SELECT id, epoch FROM ranked WHERE rank <= $5 ORDER BY next_attempt_at, id LIMIT $6),
      locked AS (
        SELECT d.id, p.epoch, d.status = 'in_flight' AS resumed FROM ${s}.deliveries d JOIN picked p ON p.id = d.id
        WHERE (d.status = 'pending' AND d.next_attempt_at <= $2) OR (d.status = 'in_flight' AND d.lease_epoch < p.epoch)
        FOR UPDATE OF d SKIP LOCKED
      ),
      ${claimedWithEvents(s, '$2')}`;
    this.#byScan = named(s, 'claim_due_scan', claim(byScan));
    this.#byEndpoint = named(s, 'claim_due_endpoint', claim(byEndpoint));

    // $1 endpoint ids, $2 their slots, $3 their limits, $4 owner, $5 now
    this.#forEndpoints = named(s, 'claim_for_endpoints', `
      WITH wanted AS (SELECT * FROM unnest($1::text[], $2::int[], $3::int[]) AS w(endpoint_id, slot, lim)),
      ready AS (
        SELECT w.endpoint_id, w.slot, w.lim, l.epoch, e.ordering = 'fifo' AS fifo FROM wanted w
        JOIN ${s}.leases l ON l.slot = w.slot AND l.owner = $4 AND l.until > $5
        JOIN ${s}.endpoints e ON e.id = w.endpoint_id AND e.status = 'enabled'
      ),
      locked AS (
        SELECT d.id, r.epoch, false AS resumed FROM ready r CROSS JOIN LATERAL (
          SELECT id FROM ${s}.deliveries p
          WHERE status = 'pending' AND slot = r.slot AND endpoint_id = r.endpoint_id AND next_attempt_at <= $5
            AND (NOT r.fifo OR ${isLineHead('p')})
          ORDER BY next_attempt_at, id LIMIT r.lim
          FOR UPDATE SKIP LOCKED
        ) d
      ),
      ${claimedWithEvents(s, '$5')}`);
    this.statements = { countDue: this.#countDue, claimByScan: this.#byScan, claimByEndpoint: this.#byEndpoint, claimForEndpoints: this.#forEndpoints };
  }

  async claimDue(sql: Sql, request: ClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    if (request.limit <= 0 || request.perEndpointLimit <= 0) return [];
    const [due] = await sql.query<{ n: number }>(this.#countDue, [now, CLAIM_SCAN_MAX + 1]);
    const statement = (due?.n ?? 0) > CLAIM_SCAN_MAX ? this.#byEndpoint : this.#byScan;
    const rows = await sql.query<ClaimedRow>(statement, [
      owner,
      now,
      request.skipEndpointIds,
      request.endpointId ?? null,
      Math.floor(request.perEndpointLimit),
      Math.floor(request.limit),
    ]);
    return this.#jobsOf(sql, rows, now);
  }

  async claimForEndpoints(sql: Sql, request: EndpointClaimRequest, slotCount: number): Promise<DeliveryJob[]> {
    const wanted = request.endpoints.filter((want) => want.limit >= 1);
    if (wanted.length === 0) return [];
    const rows = await sql.query<ClaimedRow>(this.#forEndpoints, [
      wanted.map((w) => w.endpointId),
      wanted.map((w) => slotOf(w.endpointId, slotCount)),
      wanted.map((w) => Math.floor(w.limit)),
      request.owner,
      request.now,
    ]);
    return this.#jobsOf(sql, rows, request.now);
  }

  /** Claimed rows with their events, earliest due first; a row whose event is gone (deleted by hand) is cancelled. */
  async #jobsOf(sql: Sql, rows: readonly ClaimedRow[], now: number): Promise<DeliveryJob[]> {
    const jobs: DeliveryJob[] = [];
    const orphans: string[] = [];
    for (const row of rows) {
      if (row.event_payload === null) {
        orphans.push(row.id);
        continue;
      }
      jobs.push({
        ...(row.resumed ? { resumed: true as const } : {}),
        delivery: deliveryFromRow(row),
        event: {
          id: row.event_id,
          tenantId: row.event_tenant_id!,
          type: row.event_type_name!,
          payload: row.event_payload,
          createdAt: row.event_created_at!,
          endpointId: row.event_endpoint_id,
          orderingKey: row.event_ordering_key,
          traceContext: traceContextFromColumn(row.event_trace_context),
        },
      });
    }
    if (orphans.length > 0) {
      await sql.query(`UPDATE ${this.#s}.deliveries SET status = 'cancelled', last_error = 'event missing', updated_at = $2
        WHERE id = ANY($1::text[])`, [orphans, now]);
    }
    return jobs;
  }
}

/** The end of a claim: mark `locked` in flight at its epoch, return the rows with their events, earliest due first. */
function claimedWithEvents(s: string, now: string): string {
  return `claimed AS (
    UPDATE ${s}.deliveries d SET status = 'in_flight', updated_at = ${now}, lease_epoch = locked.epoch
    FROM locked WHERE d.id = locked.id
    RETURNING ${deliveryColumns('d')}, locked.resumed
  )
  SELECT c.*, e.tenant_id AS event_tenant_id, e.type AS event_type_name, e.payload AS event_payload,
         e.created_at AS event_created_at, e.endpoint_id AS event_endpoint_id, e.ordering_key AS event_ordering_key,
         e.trace_context AS event_trace_context
  FROM claimed c LEFT JOIN ${s}.events e ON e.id = c.event_id
  ORDER BY c.next_attempt_at, c.id`;
}
