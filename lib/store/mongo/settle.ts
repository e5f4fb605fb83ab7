/**
 * Settling attempts in MongoDB: each delivery written only while its claim
 * is current, with its attempt, its endpoint's failing-since mark and its
 * dead letter, a batch in one transaction.
 */
import { ObjectId } from 'mongodb';
import { StoreError } from '../../errors.ts';
import type { SettleResult, Settlement } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { attemptToDoc } from './documents.ts';
import {
  CLEAR_FAILING_UPDATE,
  clearFailingFilter,
  isCurrentClaim,
  markFailingFilter,
  markFailingUpdate,
  settleFilter,
  settleUpdate,
} from './queries.ts';

/**
 * One transaction for the whole batch. The deliveries and their slots'
 * leases are read first (snapshot), each settlement is fenced on them
 * ({@link isCurrentClaim}), then written with an update conditional on the
 * claim. Attempt numbers are the store's count of attempts in the round
 * after this one, so they stay right even if the engine's copy was stale.
 */
export async function settle(db: StoreDb, settlements: readonly Settlement[], now: number): Promise<SettleResult> {
  return db.transaction(async (session) => {
    const applied: string[] = [];
    const fenced: string[] = [];
    const ids = [...new Set(settlements.map((s) => s.deliveryId))];
    const docs = new Map((await db.deliveries.find({ _id: { $in: ids } }, { session }).toArray()).map((d) => [d._id, d]));
    const slots = [...new Set([...docs.values()].map((d) => d.slot))];
    const leases = new Map((await db.leases.find({ _id: { $in: slots } }, { session }).toArray()).map((l) => [l._id, l]));
    for (const settlement of settlements) {
      const id = settlement.deliveryId;
      const doc = docs.get(id);
      if (!isCurrentClaim(doc, doc === undefined ? undefined : leases.get(doc.slot), settlement.epoch)) {
        fenced.push(id);
        continue;
      }
      const updated = await db.deliveries.findOneAndUpdate(settleFilter(settlement), settleUpdate(settlement, now), {
        session,
        returnDocument: 'after',
      });
      if (updated === null) {
        fenced.push(id);
        continue;
      }
      docs.set(id, updated);
      applied.push(id);
      if (settlement.kind === 'release') continue;
      await db.attempts.insertOne(attemptToDoc(id, settlement.attempt, updated.attempts, updated.round), { session });
      if (settlement.kind === 'delivered') {
        await db.endpoints.updateOne(clearFailingFilter(updated.endpointId), CLEAR_FAILING_UPDATE, { session });
        continue;
      }
      await db.endpoints.updateOne(markFailingFilter(updated.endpointId), markFailingUpdate(settlement.attempt.startedAt), { session });
      if (settlement.kind === 'dead') {
        const event = await db.events.findOne({ _id: updated.eventId }, { session });
        if (event === null) {
          throw new StoreError(`mongodb: cannot dead-letter delivery '${id}': its event '${updated.eventId}' is missing`);
        }
        await db.deadLetters.insertOne(
          {
            _id: settlement.deadLetterId,
            deliveryId: id,
            eventId: updated.eventId,
            endpointId: updated.endpointId,
            tenantId: updated.tenantId,
            eventType: updated.eventType,
            payload: event.payload,
            reason: settlement.reason,
            lastOutcome: settlement.attempt.outcome,
            round: updated.round,
            createdAt: now,
            replayedAt: null,
            ord: new ObjectId(),
            at: new Date(now),
          },
          { session },
        );
      }
    }
    return { applied, fenced };
  });
}
