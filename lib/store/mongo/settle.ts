/**
 * Settling attempts in MongoDB: each delivery written only while its claim
 * is current, with its attempt, its endpoint's failing-since mark and its
 * dead letter, a batch in one transaction of a few round trips.
 */
import type { AnyBulkWriteOperation } from 'mongodb';
import { StoreError } from '../../errors.ts';
import { countsAgainstHealth } from '../../policy/classify.ts';
import { failureKind } from '../../policy/failure-kind.ts';
import type { SettleResult, Settlement } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { attemptToDoc } from './documents.ts';
import { newObjectId } from './driver.ts';
import {
  applyUpdate,
  CLEAR_FAILING_UPDATE,
  clearFailingFilter,
  isCurrentClaim,
  markFailingFilter,
  markFailingUpdate,
  settleFilter,
  settleUpdate,
} from './queries.ts';
import type { AttemptDoc, DeadLetterDoc, DeliveryDoc, EndpointDoc, LeaseDoc } from './schema.ts';

/**
 * One transaction for the whole batch, in a fixed number of round trips
 * whatever its size (at most seven): the deliveries and their slots' leases
 * are read (snapshot), each settlement is fenced on them
 * ({@link isCurrentClaim}) and its outcome worked out in memory, then one
 * ordered bulk write applies the conditional updates, one `insertMany` the
 * attempts, one bulk write the endpoints' failing-since marks (in settlement
 * order), one read the events of the dead ones and one `insertMany` their
 * dead letters. A concurrent change to a document read aborts and retries
 * the transaction (a write conflict), so what was worked out is what the
 * writes find; should an update match nothing all the same, the transaction
 * is abandoned rather than half applied. Attempt numbers are the store's count
 * of attempts in the round after this one, so they stay right even if the
 * engine's copy was stale.
 */
export async function settle(db: StoreDb, settlements: readonly Settlement[], now: number): Promise<SettleResult> {
  return db.transaction(async (session) => {
    const ids = [...new Set(settlements.map((s) => s.deliveryId))];
    const docs = new Map((await db.deliveries.find({ _id: { $in: ids } }, { session }).toArray()).map((d) => [d._id, d]));
    const slots = [...new Set([...docs.values()].map((d) => d.slot))];
    const leases = new Map((await db.leases.find({ _id: { $in: slots } }, { session }).toArray()).map((l) => [l._id, l]));
    const plan = planSettle(settlements, docs, leases, now);
    if (plan.updates.length === 0) return { applied: plan.applied, fenced: plan.fenced };

    const written = await db.deliveries.bulkWrite(plan.updates, { session, ordered: true });
    if (written.matchedCount !== plan.updates.length) {
      throw new StoreError(`mongodb: settle: ${plan.updates.length - written.matchedCount} deliveries changed under the transaction`);
    }
    if (plan.attempts.length > 0) await db.attempts.insertMany(plan.attempts, { session });
    if (plan.endpointMarks.length > 0) await db.endpoints.bulkWrite(plan.endpointMarks, { session, ordered: true });
    if (plan.dead.length > 0) {
      const eventIds = [...new Set(plan.dead.map((d) => d.delivery.eventId))];
      const events = new Map(
        (await db.events.find({ _id: { $in: eventIds } }, { session, projection: { _id: 1, payload: 1 } }).toArray()).map((e) => [e._id, e]),
      );
      const letters: DeadLetterDoc[] = plan.dead.map(({ settlement, delivery }) => {
        const event = events.get(delivery.eventId);
        if (event === undefined) {
          throw new StoreError(`mongodb: cannot dead-letter delivery '${delivery._id}': its event '${delivery.eventId}' is missing`);
        }
        return {
          _id: settlement.deadLetterId,
          deliveryId: delivery._id,
          eventId: delivery.eventId,
          endpointId: delivery.endpointId,
          tenantId: delivery.tenantId,
          eventType: delivery.eventType,
          payload: event.payload,
          reason: settlement.reason,
          lastOutcome: settlement.attempt.outcome,
          failureKind: failureKind(settlement.attempt.outcome),
          round: delivery.round,
          createdAt: now,
          replayedAt: null,
          triage: { state: 'new', note: null, by: null, at: now },
          ord: newObjectId(),
          at: new Date(now),
        };
      });
      await db.deadLetters.insertMany(letters, { session });
    }
    return { applied: plan.applied, fenced: plan.fenced };
  });
}

/** What a settle batch writes, worked out from the documents read in its transaction. */
export interface SettlePlan {
  readonly applied: string[];
  readonly fenced: string[];
  /** The conditional delivery updates, in settlement order. */
  readonly updates: AnyBulkWriteOperation<DeliveryDoc>[];
  readonly attempts: AttemptDoc[];
  /** Failing-since cleared or set, in settlement order (a later settlement sees an earlier one's mark). */
  readonly endpointMarks: AnyBulkWriteOperation<EndpointDoc>[];
  /** The dead ones, each with its delivery as the update leaves it. */
  readonly dead: { readonly settlement: Extract<Settlement, { kind: 'dead' }>; readonly delivery: DeliveryDoc }[];
}

/**
 * Pure: fences each settlement on the deliveries and leases read, in order (a
 * second settlement of the same delivery sees the first one's result, and is
 * fenced), and lists the writes.
 */
export function planSettle(
  settlements: readonly Settlement[],
  read: ReadonlyMap<string, DeliveryDoc>,
  leases: ReadonlyMap<number, LeaseDoc>,
  now: number,
): SettlePlan {
  const docs = new Map(read);
  const plan: SettlePlan = { applied: [], fenced: [], updates: [], attempts: [], endpointMarks: [], dead: [] };
  for (const settlement of settlements) {
    const id = settlement.deliveryId;
    const doc = docs.get(id);
    if (doc === undefined || !isCurrentClaim(doc, leases.get(doc.slot), settlement.epoch)) {
      plan.fenced.push(id);
      continue;
    }
    const update = settleUpdate(settlement, now);
    const updated = applyUpdate(doc, update);
    docs.set(id, updated);
    plan.applied.push(id);
    plan.updates.push({ updateOne: { filter: settleFilter(settlement), update } });
    if (settlement.kind === 'release') continue;
    plan.attempts.push(attemptToDoc(id, settlement.attempt, updated.attempts, updated.round));
    if (settlement.kind === 'delivered') {
      plan.endpointMarks.push({ updateOne: { filter: clearFailingFilter(updated.endpointId), update: CLEAR_FAILING_UPDATE } });
    } else if (countsAgainstHealth(settlement.attempt.outcome)) {
      // A proxy's failure never reached the endpoint: it leaves its failing-since alone.
      plan.endpointMarks.push({ updateOne: { filter: markFailingFilter(updated.endpointId), update: markFailingUpdate(settlement.attempt.startedAt) } });
    }
    if (settlement.kind === 'dead') plan.dead.push({ settlement, delivery: updated });
  }
  return plan;
}
