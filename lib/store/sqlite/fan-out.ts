/**
 * The outbox and fan-out in SQLite: events waiting to be fanned out, and
 * turning a batch of them into deliveries, the ones named for claiming
 * inserted in flight when the owner holds their slot.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { NotFoundError } from '../../errors.ts';
import type { Delivery, OutboxEvent } from '../../model.ts';
import { DeliveryStatus as Status } from '../../model.ts';
import type { FanOut, FanOutClaim } from '../port.ts';
import type { LeaseStatements } from './leases.ts';
import { deliveryFromRow, eventFromRow, traceContextToColumn, type DeliveryRow, type EventRow } from '../sql-rows.ts';
import type { Statement } from './sql.ts';

export class FanOutStatements {
  readonly #leases: LeaseStatements;
  readonly #insertEvent: Statement;
  readonly #getEvent: Statement<EventRow>;
  readonly #unfanned: Statement<EventRow>;
  readonly #unfannedExcept: Statement<EventRow>;
  readonly #countUnfanned: Statement<number>;
  readonly #markFannedOut: Statement;
  readonly #insertDelivery: Statement<DeliveryRow>;
  readonly #lastSequence: Statement<number>;
  readonly #isFifo: Statement<number>;
  readonly #lineOpen: Statement<number>;
  readonly #saveSequence: Statement;

  constructor(db: BetterSqlite3.Database, leases: LeaseStatements) {
    this.#leases = leases;
    this.#insertEvent = db.prepare(`INSERT INTO events (id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context)
      VALUES (@id, @tenantId, @type, @payload, @createdAt, @endpointId, @orderingKey, @traceContext) ON CONFLICT (id) DO NOTHING`);
    this.#getEvent = db.prepare<unknown[], EventRow>(`SELECT * FROM events WHERE id = ?`);
    this.#unfanned = db.prepare<unknown[], EventRow>(
      `SELECT * FROM events WHERE fanned_out_at IS NULL ORDER BY created_at, rowid LIMIT ?`,
    );
    // The tenants with events waiting, found by skipping through events_unfanned_tenant (one
    // lookup per tenant, never a walk of a tenant's backlog); then the oldest few of each tenant
    // not excepted, the oldest of them all first.
    this.#unfannedExcept = db.prepare<unknown[], EventRow>(
      `WITH RECURSIVE waiting(tenant_id) AS (
         SELECT (SELECT min(tenant_id) FROM events WHERE fanned_out_at IS NULL)
         UNION ALL
         SELECT (SELECT min(tenant_id) FROM events WHERE fanned_out_at IS NULL AND tenant_id > waiting.tenant_id)
         FROM waiting WHERE waiting.tenant_id IS NOT NULL
       )
       SELECT e.* FROM waiting w JOIN events e ON e.rowid IN (
         SELECT rowid FROM events WHERE fanned_out_at IS NULL AND tenant_id = w.tenant_id ORDER BY created_at, rowid LIMIT @limit)
       WHERE w.tenant_id IS NOT NULL AND w.tenant_id NOT IN (SELECT value FROM json_each(@except))
       ORDER BY e.created_at, e.rowid LIMIT @limit`,
    );
    // Through the partial index of waiting events: the count stops at the cap.
    this.#countUnfanned = db.prepare<unknown[], number>(`SELECT count(*) FROM (SELECT 1 FROM events WHERE fanned_out_at IS NULL LIMIT ?)`).pluck();
    this.#markFannedOut = db.prepare(`UPDATE events SET fanned_out_at = COALESCE(fanned_out_at, @now) WHERE id = @id`);
    // Only a conflict on the id is ignored (no change: the id existed): a number already given (the
    // unique (endpoint_id, sequence)) is an error. No RETURNING: the row is what these values make
    // (`insertedRow`), and reading it back cost more than building it.
    this.#insertDelivery = db.prepare(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot,
        status, attempts, round, next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at, sequence, ordering_key)
      VALUES (@id, @eventId, @endpointId, @tenantId, @eventType, @slot,
        @status, 0, 0, @nextAttemptAt, @epoch, NULL, @createdAt, @updatedAt, NULL, @sequence, @orderingKey)
      ON CONFLICT (id) DO NOTHING`);
    this.#isFifo = db.prepare<unknown[], number>(`SELECT 1 FROM endpoints WHERE id = ? AND ordering = 'fifo'`).pluck();
    // Through deliveries_open_line: a new delivery is last in its line, so it is the head only of an empty one.
    this.#lineOpen = db.prepare<unknown[], number>(`SELECT 1 FROM deliveries
      WHERE endpoint_id = ? AND ordering_key IS ? AND status IN ('pending', 'in_flight') LIMIT 1`).pluck();
    this.#lastSequence = db.prepare<unknown[], number>(`SELECT last_sequence FROM endpoint_sequences WHERE endpoint_id = ?`).pluck();
    this.#saveSequence = db.prepare(`INSERT INTO endpoint_sequences (endpoint_id, last_sequence) VALUES (@endpointId, @last)
      ON CONFLICT (endpoint_id) DO UPDATE SET last_sequence = excluded.last_sequence`);
  }

  /** Writes a row per event: run it in a transaction. */
  append(events: readonly OutboxEvent[]): void {
    for (const event of events) {
      this.#insertEvent.run({
        id: event.id,
        tenantId: event.tenantId,
        type: event.type,
        payload: event.payload,
        createdAt: event.createdAt,
        endpointId: event.endpointId,
        orderingKey: event.orderingKey,
        traceContext: traceContextToColumn(event.traceContext),
      });
    }
  }

  unfanned(limit: number, exceptTenantIds: readonly string[] = []): OutboxEvent[] {
    const n = Math.max(0, Math.floor(limit));
    if (exceptTenantIds.length === 0) return this.#unfanned.all(n).map(eventFromRow);
    return this.#unfannedExcept.all({ limit: n, except: JSON.stringify(exceptTenantIds) }).map(eventFromRow);
  }

  countUnfanned(cap: number): number {
    return this.#countUnfanned.get(Math.max(0, Math.floor(cap))) ?? 0;
  }

  /**
   * Marks each event fanned out and inserts its deliveries; answers the ones inserted in flight.
   * Throws `NotFoundError` for an event not stored, so run it in a transaction.
   */
  record(fanOuts: readonly FanOut[], now: number, claim: FanOutClaim | undefined): Delivery[] {
    const claimed: Delivery[] = [];
    // Each endpoint's last number, read once and written back once for the batch. The caller's
    // IMMEDIATE transaction holds the file's write lock, so no other process numbers in between,
    // and a rollback takes the numbers back with the rows.
    const sequences = new Map<string, { last: number; changed: boolean }>();
    const sequenceOf = (endpointId: string): { last: number; changed: boolean } => {
      let counter = sequences.get(endpointId);
      if (counter === undefined) {
        counter = { last: this.#lastSequence.get(endpointId) ?? 0, changed: false };
        sequences.set(endpointId, counter);
      }
      return counter;
    };
    const epochs = new Map<number, number | undefined>();
    const epochOf = (slot: number, owner: string): number | undefined => {
      if (!epochs.has(slot)) epochs.set(slot, this.#leases.ownedEpoch(slot, owner, now));
      return epochs.get(slot);
    };
    const fifo = new Map<string, boolean>();
    // On a FIFO endpoint a delivery goes in flight only as the head of its line (see claims.ts).
    const mayGoInFlight = (d: FanOut['deliveries'][number]): boolean => {
      let isFifo = fifo.get(d.endpointId);
      if (isFifo === undefined) {
        isFifo = this.#isFifo.get(d.endpointId) !== undefined;
        fifo.set(d.endpointId, isFifo);
      }
      return !isFifo || this.#lineOpen.get(d.endpointId, d.orderingKey) === undefined;
    };
    for (const { eventId, deliveries } of fanOuts) {
      if (this.#markFannedOut.run({ id: eventId, now }).changes === 0) throw new NotFoundError('event', eventId);
      for (const d of deliveries) {
        const epoch = claim?.deliveryIds.has(d.id) === true && mayGoInFlight(d) ? epochOf(d.slot, claim.owner) : undefined;
        const counter = sequenceOf(d.endpointId);
        const row = insertedRow(d, epoch, now, counter.last + 1);
        const inserted = this.#insertDelivery.run({
          id: row.id,
          eventId: row.event_id,
          endpointId: row.endpoint_id,
          tenantId: row.tenant_id,
          eventType: row.event_type,
          slot: row.slot,
          status: row.status,
          epoch: row.lease_epoch,
          nextAttemptAt: row.next_attempt_at,
          createdAt: row.created_at,
          updatedAt: row.updated_at,
          sequence: row.sequence,
          orderingKey: row.ordering_key,
        }).changes > 0;
        // Not inserted: the id existed (a re-planned event), and the number stays free for the next one.
        if (inserted) {
          counter.last += 1;
          counter.changed = true;
        }
        if (inserted && epoch !== undefined) claimed.push(deliveryFromRow(row));
      }
    }
    for (const [endpointId, counter] of sequences) {
      if (counter.changed) this.#saveSequence.run({ endpointId, last: counter.last });
    }
    return claimed;
  }

  getEvent(id: string): OutboxEvent | undefined {
    const row = this.#getEvent.get(id);
    return row === undefined ? undefined : eventFromRow(row);
  }
}

/** The row a new delivery is inserted as: in flight at `epoch` when given, else pending. */
function insertedRow(d: FanOut['deliveries'][number], epoch: number | undefined, now: number, sequence: number): DeliveryRow {
  return {
    id: d.id,
    event_id: d.eventId,
    endpoint_id: d.endpointId,
    tenant_id: d.tenantId,
    event_type: d.eventType,
    slot: d.slot,
    status: epoch === undefined ? Status.PENDING : Status.IN_FLIGHT,
    attempts: 0,
    round: 0,
    next_attempt_at: d.nextAttemptAt,
    lease_epoch: epoch ?? 0,
    last_error: null,
    created_at: d.createdAt,
    updated_at: epoch === undefined ? d.createdAt : now,
    delivered_at: null,
    sequence,
    ordering_key: d.orderingKey,
  };
}
