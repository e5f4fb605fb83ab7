/**
 * Settling attempts in PostgreSQL: a batch of settlements is one statement
 * (one round trip, atomic on its own). Each delivery is written only while
 * it is in flight at the epoch it was claimed with and that epoch is still
 * its slot's (the fence of `../port.ts`, rule 5); the others are fenced and
 * reported back. Its attempt, its
 * endpoint's failing-since mark and its dead letter are written by the same
 * statement.
 *
 * Attempt numbers are the store's count of attempts in the round after this
 * one, so they stay right even if the engine's copy of the delivery was stale.
 *
 * A success at a delivery's very first attempt (most of them) is written into
 * the delivery's `first_*` columns by its own update, not as a row of
 * `attempts`: `DeliveryLogQueries.listAttempts` reads it back first.
 */
import { StoreError } from '../../errors.ts';
import { FailureKind, failureKind } from '../../policy/failure-kind.ts';
import type { SettleResult, Settlement } from '../port.ts';
import { named, type Sql, type Statement } from './sql.ts';

/** In the settle's SET list (the row before it): a success at the delivery's first attempt of its first round. */
const FIRST_SUCCESS = `b.kind = 'delivered' AND d.attempts = 0 AND d.round = 0`;

export class SettleQueries {
  readonly #settle: Statement;
  /** The hot statement, for its plan (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'settle', Statement>>;

  constructor(schema: string) {
    const s = schema;
    /*
     * $1–$10 the settlements' fields in batch order, $11 now, $12 their failure kinds. An endpoint's failing-since after
     * the batch is what applying its outcomes in order gives: cleared by a success with no
     * failure after it; otherwise from the first failure after its last success in the batch,
     * or, with none, from the one already recorded, else the batch's first failure.
     */
    this.#settle = named(s, 'settle', `
      WITH batch AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::int[],
                             $8::text[], $9::text[], $10::text[], $12::text[]) WITH ORDINALITY
          AS b(id, kind, epoch, next_at, error, started_at, duration_ms, outcome, dead_letter_id, reason, failure_kind, ord)
      ),
      settled AS (
        UPDATE ${s}.deliveries d SET
          status = CASE b.kind WHEN 'delivered' THEN 'delivered' WHEN 'dead' THEN 'dead' ELSE 'pending' END,
          attempts = d.attempts + CASE WHEN b.kind = 'release' THEN 0 ELSE 1 END,
          next_attempt_at = CASE WHEN b.kind IN ('retry', 'release') THEN b.next_at ELSE d.next_attempt_at END,
          last_error = CASE WHEN b.kind = 'release' THEN d.last_error ELSE b.error END,
          delivered_at = CASE WHEN b.kind = 'delivered' THEN $11 ELSE d.delivered_at END,
          last_failure_kind = CASE b.kind WHEN 'release' THEN d.last_failure_kind ELSE b.failure_kind END,
          last_failure_at = CASE b.kind WHEN 'release' THEN d.last_failure_at WHEN 'delivered' THEN NULL ELSE $11 END,
          updated_at = $11,
          -- A success at the delivery's very first attempt is kept here (inline, below), not in attempts.
          first_started_at = CASE WHEN ${FIRST_SUCCESS} THEN b.started_at ELSE d.first_started_at END,
          first_duration_ms = CASE WHEN ${FIRST_SUCCESS} THEN b.duration_ms ELSE d.first_duration_ms END,
          first_outcome = CASE WHEN ${FIRST_SUCCESS} THEN b.outcome::jsonb ELSE d.first_outcome END,
          first_error = CASE WHEN ${FIRST_SUCCESS} THEN b.error ELSE d.first_error END
        FROM batch b
        -- Found by primary key, so the cost follows the batch. Written "status || ''" so the planner
        -- cannot reach the rows through deliveries_in_flight instead: under load that index holds
        -- every node's rows in flight and, until vacuum, the entries of rows that left it.
        WHERE d.id = b.id AND d.status || '' = 'in_flight' AND d.lease_epoch = b.epoch
          AND d.lease_epoch = (SELECT l.epoch FROM ${s}.leases l WHERE l.slot = d.slot)
        RETURNING d.id, d.attempts, d.round, d.endpoint_id, d.event_id, d.tenant_id, d.event_type,
                  b.kind, b.ord, b.started_at, b.duration_ms, b.outcome, b.error, b.dead_letter_id, b.reason, b.failure_kind,
                  -- RETURNING sees the row as written: one attempt in round 0 is the first there ever was.
                  b.kind = 'delivered' AND d.attempts = 1 AND d.round = 0 AS inline
      ),
      attempted AS (
        INSERT INTO ${s}.attempts (delivery_id, number, round, started_at, duration_ms, outcome, error)
        SELECT id, attempts, round, started_at, duration_ms, outcome::jsonb, error
        FROM settled WHERE kind <> 'release' AND NOT inline ORDER BY ord
      ),
      -- Each outcome beside its endpoint's last success in the batch, then one row per endpoint:
      -- one sort, where a lookup per endpoint into the batch cost batch × endpoints.
      -- A proxy's failure never reached the endpoint: it leaves its failing-since alone.
      outcomes AS (
        SELECT endpoint_id, kind, ord, started_at,
          max(ord) FILTER (WHERE kind = 'delivered') OVER (PARTITION BY endpoint_id) AS ok_ord
        FROM settled WHERE kind <> 'release' AND failure_kind IS DISTINCT FROM '${FailureKind.PROXY}'
      ),
      verdict AS (
        SELECT endpoint_id, max(ok_ord) AS ok_ord,
          (array_agg(started_at ORDER BY ord) FILTER (WHERE kind <> 'delivered' AND ord > COALESCE(ok_ord, 0)))[1] AS failing_from
        FROM outcomes GROUP BY endpoint_id
      ),
      health AS (
        UPDATE ${s}.endpoints e SET failing_since = CASE
            WHEN v.failing_from IS NULL THEN NULL
            WHEN v.ok_ord IS NOT NULL THEN v.failing_from
            ELSE COALESCE(e.failing_since, v.failing_from) END
        FROM verdict v
        WHERE e.id = v.endpoint_id AND e.failing_since IS DISTINCT FROM (CASE
            WHEN v.failing_from IS NULL THEN NULL
            WHEN v.ok_ord IS NOT NULL THEN v.failing_from
            ELSE COALESCE(e.failing_since, v.failing_from) END)
      ),
      dead AS (
        INSERT INTO ${s}.dead_letters (id, delivery_id, event_id, endpoint_id, tenant_id, event_type, payload, reason,
          last_outcome, round, created_at, replayed_at, triage_state, triage_at, failure_kind)
        SELECT st.dead_letter_id, st.id, ev.id, st.endpoint_id, st.tenant_id, st.event_type, ev.payload, st.reason,
          st.outcome::jsonb, st.round, $11, NULL, 'new', $11, st.failure_kind
        FROM settled st JOIN ${s}.events ev ON ev.id = st.event_id
        WHERE st.kind = 'dead' ORDER BY st.ord
        RETURNING delivery_id
      )
      SELECT id, event_id, kind = 'dead' AND id NOT IN (SELECT delivery_id FROM dead) AS event_missing FROM settled`);
    this.statements = { settle: this.#settle };
  }

  /**
   * Writes the batch. A delivery named twice is settled by its first settlement; the others are
   * fenced. Run it in a transaction when the batch dead-letters (`deadLetters`): a dead letter
   * whose event is missing fails the whole batch, and only a transaction can take back the rest.
   * @throws StoreError when a delivery to dead-letter has lost its event.
   */
  async settle(sql: Sql, settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    const firstByDelivery = new Map<string, Settlement>();
    for (const settlement of settlements) {
      if (!firstByDelivery.has(settlement.deliveryId)) firstByDelivery.set(settlement.deliveryId, settlement);
    }
    const batch = [...firstByDelivery.values()];
    if (batch.length === 0) return { applied: [], fenced: settlements.map((s) => s.deliveryId) };
    const rows = await sql.query<{ id: string; event_id: string; event_missing: boolean }>(this.#settle, [
      batch.map((s) => s.deliveryId),
      batch.map((s) => s.kind),
      batch.map((s) => s.epoch),
      batch.map((s) => (s.kind === 'retry' || s.kind === 'release' ? s.nextAttemptAt : null)),
      batch.map((s) => (s.kind === 'release' ? null : s.attempt.error)),
      batch.map((s) => (s.kind === 'release' ? null : s.attempt.startedAt)),
      batch.map((s) => (s.kind === 'release' ? null : s.attempt.durationMs)),
      batch.map((s) => (s.kind === 'release' ? null : JSON.stringify(s.attempt.outcome))),
      batch.map((s) => (s.kind === 'dead' ? s.deadLetterId : null)),
      batch.map((s) => (s.kind === 'dead' ? s.reason : null)),
      now,
      // NULL for a success (and ignored for a release).
      batch.map((s) => (s.kind === 'retry' || s.kind === 'dead' ? failureKind(s.attempt.outcome) : null)),
    ]);
    const lost = rows.find((row) => row.event_missing);
    if (lost !== undefined) {
      throw new StoreError(`postgres: cannot dead-letter delivery '${lost.id}': its event '${lost.event_id}' is missing`);
    }
    const written = new Set(rows.map((row) => row.id));
    const applied: string[] = [];
    const fenced: string[] = [];
    for (const settlement of settlements) {
      if (firstByDelivery.get(settlement.deliveryId) === settlement && written.has(settlement.deliveryId)) applied.push(settlement.deliveryId);
      else fenced.push(settlement.deliveryId);
    }
    return { applied, fenced };
  }
}
