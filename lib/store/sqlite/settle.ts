/**
 * Settling attempts in SQLite: each settlement writes its delivery (fenced
 * by its claim epoch), its attempt, its endpoint's failing-since mark and,
 * for a dead one, its dead letter. A batch writes many rows: the caller runs
 * it in a transaction.
 *
 * Attempt numbers are the store's count of attempts in the round after this
 * one, so they stay right even if the engine's copy of the delivery was stale.
 *
 * A success at a delivery's very first attempt (most of them) is written into
 * the delivery's `first_*` columns by its own update, not as a row of
 * `attempts`: `DeliveryLogStatements.listAttempts` reads it back first.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { StoreError } from '../../errors.ts';
import { countsAgainstHealth } from '../../policy/classify.ts';
import { failureKind } from '../../policy/failure-kind.ts';
import type { SettleResult, Settlement } from '../port.ts';
import type { Statement } from './sql.ts';

/** What a settle statement hands back about the delivery it changed. */
interface SettledRow {
  attempts: number;
  round: number;
  endpoint_id: string;
  event_id: string;
  tenant_id: string;
  event_type: string;
}

// The fence of `../port.ts` (rule 5): in flight at the epoch it was claimed with, and that
// epoch still the slot's. Once anyone has taken the slot since (its claimer too, after a
// release), the old claim's writes are refused even before the new epoch reclaims it.
const FENCE = `id = @id AND status = 'in_flight' AND lease_epoch = @epoch
  AND lease_epoch = (SELECT epoch FROM leases WHERE leases.slot = deliveries.slot)`;
const SETTLED = `RETURNING attempts, round, endpoint_id, event_id, tenant_id, event_type`;

export class SettleStatements {
  readonly #delivered: Statement<SettledRow>;
  readonly #retry: Statement<SettledRow>;
  readonly #dead: Statement<SettledRow>;
  readonly #release: Statement<SettledRow>;
  readonly #insertAttempt: Statement;
  readonly #insertDeadLetter: Statement;
  readonly #clearFailing: Statement;
  readonly #markFailing: Statement;

  constructor(db: BetterSqlite3.Database) {
    // A success at the delivery's very first attempt (no attempt before, first round) is kept in
    // its row; RETURNING then reads attempts = 1 and round = 0, and no attempt row is written.
    const first = `attempts = 0 AND round = 0`;
    this.#delivered = db.prepare<unknown[], SettledRow>(`UPDATE deliveries SET status = 'delivered', attempts = attempts + 1,
        last_error = @error, delivered_at = @now, updated_at = @now, last_failure_kind = NULL, last_failure_at = NULL,
        first_started_at = CASE WHEN ${first} THEN @startedAt ELSE first_started_at END,
        first_duration_ms = CASE WHEN ${first} THEN @durationMs ELSE first_duration_ms END,
        first_outcome = CASE WHEN ${first} THEN @outcome ELSE first_outcome END,
        first_error = CASE WHEN ${first} THEN @error ELSE first_error END
      WHERE ${FENCE} ${SETTLED}`);
    this.#retry = db.prepare<unknown[], SettledRow>(`UPDATE deliveries SET status = 'pending', attempts = attempts + 1,
        next_attempt_at = @next, last_error = @error, updated_at = @now, last_failure_kind = @kind, last_failure_at = @now
      WHERE ${FENCE} ${SETTLED}`);
    this.#dead = db.prepare<unknown[], SettledRow>(`UPDATE deliveries SET status = 'dead', attempts = attempts + 1,
        last_error = @error, updated_at = @now, last_failure_kind = @kind, last_failure_at = @now WHERE ${FENCE} ${SETTLED}`);
    this.#release = db.prepare<unknown[], SettledRow>(`UPDATE deliveries SET status = 'pending', next_attempt_at = @next,
        updated_at = @now WHERE ${FENCE} ${SETTLED}`);
    this.#insertAttempt = db.prepare(`INSERT INTO attempts (delivery_id, number, round, started_at, duration_ms, outcome, error)
      VALUES (@deliveryId, @number, @round, @startedAt, @durationMs, @outcome, @error)`);
    this.#insertDeadLetter = db.prepare(`INSERT INTO dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type,
        payload, reason, last_outcome, round, created_at, replayed_at, triage_state, triage_at, failure_kind)
      SELECT @id, @deliveryId, e.id, @endpointId, @tenantId, @eventType, e.payload, @reason, @lastOutcome, @round, @now, NULL, 'new', @now, @kind
      FROM events e WHERE e.id = @eventId`);
    this.#clearFailing = db.prepare(`UPDATE endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL`);
    this.#markFailing = db.prepare(`UPDATE endpoints SET failing_since = @since WHERE id = @id AND failing_since IS NULL`);
  }

  settle(settlements: readonly Settlement[], now: number): SettleResult {
    const applied: string[] = [];
    const fenced: string[] = [];
    for (const settlement of settlements) {
      if (this.#settleOne(settlement, now)) applied.push(settlement.deliveryId);
      else fenced.push(settlement.deliveryId);
    }
    return { applied, fenced };
  }

  #settleOne(settlement: Settlement, now: number): boolean {
    const fence = { id: settlement.deliveryId, epoch: settlement.epoch, now };
    if (settlement.kind === 'release') {
      return this.#release.get({ ...fence, next: settlement.nextAttemptAt }) !== undefined;
    }
    const { attempt } = settlement;
    const kind = failureKind(attempt.outcome);
    const outcome = JSON.stringify(attempt.outcome);
    let row: SettledRow | undefined;
    switch (settlement.kind) {
      case 'delivered':
        row = this.#delivered.get({ ...fence, error: attempt.error, startedAt: attempt.startedAt, durationMs: attempt.durationMs, outcome });
        break;
      case 'retry':
        row = this.#retry.get({ ...fence, error: attempt.error, next: settlement.nextAttemptAt, kind });
        break;
      case 'dead':
        row = this.#dead.get({ ...fence, error: attempt.error, kind });
        break;
    }
    if (row === undefined) return false;
    const inline = settlement.kind === 'delivered' && row.attempts === 1 && row.round === 0;
    if (!inline) this.#insertAttempt.run({
      deliveryId: settlement.deliveryId,
      number: row.attempts,
      round: row.round,
      startedAt: attempt.startedAt,
      durationMs: attempt.durationMs,
      outcome,
      error: attempt.error,
    });
    if (settlement.kind === 'delivered') {
      this.#clearFailing.run(row.endpoint_id);
      return true;
    }
    // A proxy's failure never reached the endpoint: it leaves its failing-since alone.
    if (countsAgainstHealth(attempt.outcome)) this.#markFailing.run({ id: row.endpoint_id, since: attempt.startedAt });
    if (settlement.kind === 'dead') {
      const inserted = this.#insertDeadLetter.run({
        id: settlement.deadLetterId,
        deliveryId: settlement.deliveryId,
        endpointId: row.endpoint_id,
        tenantId: row.tenant_id,
        eventType: row.event_type,
        reason: settlement.reason,
        lastOutcome: outcome,
        kind,
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
}
