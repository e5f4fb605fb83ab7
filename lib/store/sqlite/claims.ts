/**
 * Claiming deliveries in SQLite: which rows a claim takes (below), marking
 * them in flight at their slot's epoch, and handing them back with their
 * events. A claim writes several rows: the caller runs it in a transaction.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { slotOf } from '../../ids.ts';
import { EndpointOrdering, type DeliveryJob } from '../../model.ts';
import type { ClaimRequest, EndpointClaimRequest } from '../port.ts';
import type { LeaseStatements } from './leases.ts';
import { deliveryFromRow, eventFromRow, type DeliveryRow, type EventRow } from '../sql-rows.ts';
import { DELIVERY_COLUMNS } from './rows.ts';
import type { Statement } from './sql.ts';

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

/*
 * FIFO endpoints: a delivery is taken only when it is the head of its line (endpoint, ordering
 * key), the earliest of the line's open deliveries in `deliveries_open_line`'s order (sequence,
 * NULLs first, then creation). One seek of that index per delivery considered, and only for a
 * FIFO endpoint: the `ordering = 'none'` test comes first and settles it for the others. Only
 * one delivery of a line is its head, so a claim never takes two of one line, and none while
 * the head is in flight (or pending, not yet due: a failing head holds its line).
 */
const isLineHead = (d: string): string => `${d}.id = (SELECT h.id FROM deliveries h
  WHERE h.endpoint_id = ${d}.endpoint_id AND h.ordering_key IS ${d}.ordering_key AND h.status IN ('pending', 'in_flight')
  ORDER BY h.sequence, h.created_at, h.id LIMIT 1)`;

// Correlated EXISTS rather than `IN (SELECT … FROM endpoints)`: given an IN list, the planner
// may drive the claim from every delivery of every enabled endpoint, delivered ones included.
const claimFilters = (endpointId: string, d: string): string => `
  AND ${endpointId} NOT IN (SELECT value FROM json_each(@skip))
  AND (@endpointId IS NULL OR ${endpointId} = @endpointId)
  AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = ${endpointId} AND e.status = 'enabled'
    AND (e.ordering = 'none' OR ${isLineHead(d)}))`;

const ORPHANS = `SELECT d.id, d.endpoint_id, d.next_attempt_at, owned.epoch
  FROM deliveries d JOIN owned ON owned.slot = d.slot
  WHERE d.status = 'in_flight' AND d.lease_epoch < owned.epoch ${claimFilters('d.endpoint_id', 'd')}`;

const CLAIM_BY_SCAN = `candidates AS (
  SELECT d.id, d.endpoint_id, d.next_attempt_at, owned.epoch
  FROM deliveries d JOIN owned ON owned.slot = d.slot
  WHERE d.status = 'pending' AND d.next_attempt_at <= @now ${claimFilters('d.endpoint_id', 'd')}
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
    SELECT id FROM deliveries p
    WHERE status = 'pending' AND slot = busy.slot AND endpoint_id = busy.endpoint_id AND next_attempt_at <= @now
      -- Here too, not only in the filters: a FIFO endpoint's first due rows may all wait behind
      -- their lines' heads, and would hide the heads of other lines behind them.
      AND (NOT EXISTS (SELECT 1 FROM endpoints f WHERE f.id = busy.endpoint_id AND f.ordering = 'fifo') OR ${isLineHead('p')})
    ORDER BY next_attempt_at, id LIMIT @perEndpoint)
  WHERE busy.endpoint_id IS NOT NULL ${claimFilters('busy.endpoint_id', 'd')}
  UNION ALL
  ${ORPHANS}
)`;

// One endpoint's pending due rows, earliest first (ties in insertion order): a seek on
// `deliveries_pending_claim` that stops at the limit, so the cost follows the rows taken, not the
// endpoint's backlog. Positional parameters (cheaper to bind): it runs once per endpoint per refill.
const ENDPOINT_DUE = `SELECT id FROM deliveries
  WHERE status = 'pending' AND slot = ? AND endpoint_id = ? AND next_attempt_at <= ?
  ORDER BY next_attempt_at, rowid LIMIT ?`;
// The same for a FIFO endpoint: only the heads of its lines (see `isLineHead`); it walks past the
// due rows waiting behind their heads, so its cost grows with those.
const FIFO_ENDPOINT_DUE = `SELECT id FROM deliveries d
  WHERE status = 'pending' AND slot = ? AND endpoint_id = ? AND next_attempt_at <= ? AND ${isLineHead('d')}
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
    RETURNING ${DELIVERY_COLUMNS}`;
}

export class ClaimStatements {
  readonly #leases: LeaseStatements;
  readonly #countDue: Statement<number>;
  readonly #byScan: Statement<DeliveryRow>;
  readonly #byEndpoint: Statement<DeliveryRow>;
  readonly #endpointDue: Statement<string>;
  readonly #fifoEndpointDue: Statement<string>;
  readonly #enabledOrdering: Statement<string>;
  readonly #claimById: Statement<DeliveryRow>;
  readonly #eventsByIds: Statement<EventRow>;
  readonly #cancelOrphan: Statement;
  readonly #takenOver: Statement<string>;

  constructor(db: BetterSqlite3.Database, leases: LeaseStatements) {
    this.#leases = leases;
    this.#countDue = db.prepare<unknown[], number>(`SELECT count(*) FROM
      (SELECT 1 FROM deliveries WHERE status = 'pending' AND next_attempt_at <= @now LIMIT @cap)`).pluck();
    this.#byScan = db.prepare<unknown[], DeliveryRow>(claimSql(CLAIM_BY_SCAN));
    this.#byEndpoint = db.prepare<unknown[], DeliveryRow>(claimSql(CLAIM_BY_ENDPOINT));
    this.#endpointDue = db.prepare<unknown[], string>(ENDPOINT_DUE).pluck();
    this.#fifoEndpointDue = db.prepare<unknown[], string>(FIFO_ENDPOINT_DUE).pluck();
    this.#enabledOrdering = db.prepare<unknown[], string>(`SELECT ordering FROM endpoints WHERE id = ? AND status = 'enabled'`).pluck();
    this.#claimById = db.prepare<unknown[], DeliveryRow>(`UPDATE deliveries SET status = 'in_flight', updated_at = ?, lease_epoch = ?
      WHERE id = ? RETURNING ${DELIVERY_COLUMNS}`);
    this.#eventsByIds = db.prepare<unknown[], EventRow>(`SELECT * FROM events WHERE id IN (SELECT value FROM json_each(?))`);
    // A claimed delivery whose event is gone (deleted by hand) can never be sent.
    // In flight under an older epoch in the owner's slots: what a claim now takes over (`resumed`).
    // RETURNING shows a row as the claim left it, so they are read first (deliveries_in_flight).
    this.#takenOver = db.prepare<unknown[], string>(`SELECT d.id FROM leases l JOIN deliveries d ON d.slot = l.slot
      WHERE l.owner = @owner AND l.until > @now AND d.status = 'in_flight' AND d.lease_epoch < l.epoch`).pluck();
    this.#cancelOrphan = db.prepare(`UPDATE deliveries SET status = 'cancelled', last_error = 'event missing', updated_at = @now
      WHERE id = @id`);
  }

  claimDue(request: ClaimRequest): DeliveryJob[] {
    const { owner, now } = request;
    const backlog = this.#countDue.get({ now, cap: CLAIM_SCAN_MAX + 1 }) ?? 0;
    const statement = backlog > CLAIM_SCAN_MAX ? this.#byEndpoint : this.#byScan;
    const takenOver = new Set(this.#takenOver.all({ owner, now }));
    const rows = statement.all({
      owner,
      now,
      skip: JSON.stringify(request.skipEndpointIds),
      endpointId: request.endpointId ?? null,
      perEndpoint: Math.floor(request.perEndpointLimit),
      limit: Math.floor(request.limit),
    });
    return this.#jobsFor(rows, now, takenOver);
  }

  /** `wanted` holds the endpoints to claim for, each with a limit of at least 1. */
  claimForEndpoints(owner: string, now: number, wanted: EndpointClaimRequest['endpoints'], slotCount: number): DeliveryJob[] {
    const rows: DeliveryRow[] = [];
    for (const { endpointId, limit } of wanted) {
      const slot = slotOf(endpointId, slotCount);
      const epoch = this.#leases.ownedEpoch(slot, owner, now);
      if (epoch === undefined) continue;
      const ordering = this.#enabledOrdering.get(endpointId);
      if (ordering === undefined) continue;
      const due = ordering === EndpointOrdering.FIFO ? this.#fifoEndpointDue : this.#endpointDue;
      for (const id of due.all(slot, endpointId, now, Math.floor(limit))) {
        const row = this.#claimById.get(now, epoch, id);
        if (row !== undefined) rows.push(row);
      }
    }
    return this.#jobsFor(rows, now);
  }

  /** Claimed rows with their events, earliest due first; a row whose event is gone is cancelled. */
  #jobsFor(rows: DeliveryRow[], now: number, takenOver: ReadonlySet<string> = NONE): DeliveryJob[] {
    if (rows.length === 0) return [];
    const eventIds = [...new Set(rows.map((row) => row.event_id))];
    const events = new Map(this.#eventsByIds.all(JSON.stringify(eventIds)).map((row) => [row.id, eventFromRow(row)]));
    // RETURNING gives no order: restore the claim's, earliest due first.
    rows.sort((a, b) => a.next_attempt_at - b.next_attempt_at || compareText(a.id, b.id));
    const jobs: DeliveryJob[] = [];
    for (const row of rows) {
      const event = events.get(row.event_id);
      if (event === undefined) {
        this.#cancelOrphan.run({ id: row.id, now });
        continue;
      }
      jobs.push(takenOver.has(row.id) ? { delivery: deliveryFromRow(row), event, resumed: true } : { delivery: deliveryFromRow(row), event });
    }
    return jobs;
  }
}

const NONE: ReadonlySet<string> = new Set();

/** SQLite's BINARY collation, which orders the claim, compares bytes; ids are ASCII, so code units agree. */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
