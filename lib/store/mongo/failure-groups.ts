/**
 * Failures grouped by endpoint and failure kind in MongoDB: two aggregations (the retrying
 * deliveries over the partial index `deliveries_failing`, the open dead letters over
 * `dead_letters_failing`), each group's sample read by one indexed `findOne`, and a group replayed.
 */
import {
  failureGroupsLimit,
  mergeFailureGroups,
  withSamples,
  type FailureGroup,
  type FailureGroupCount,
  type FailureGroupFilter,
  type FailureGroupKey,
  type FailureGroupReplay,
  type SampleSource,
} from '../failure-groups.ts';
import type { Outcome } from '../../model.ts';
import { replayFailureGroupInChunks } from '../chunked-replay.ts';
import type { StoreDb } from './collections.ts';
import { replayDeadLetters } from './dead-letters.ts';
import { failureCountPipeline, openFailuresFilter, resumeFailureGroupFilter, retryingFailuresFilter } from './dead-letter-queries.ts';
import { resumeDeliveriesUpdate } from './queries.ts';

interface CountDoc {
  _id: { endpointId: string; kind: string };
  tenantId: string;
  count: number;
  firstSeen: number;
  lastSeen: number;
}

export async function failureGroups(db: StoreDb, filter: FailureGroupFilter): Promise<FailureGroup[]> {
  const [retrying, dead] = await Promise.all([
    db.deliveries.aggregate<CountDoc>(failureCountPipeline(retryingFailuresFilter(filter), 'lastFailureKind', 'lastFailureAt')).toArray(),
    db.deadLetters.aggregate<CountDoc>(failureCountPipeline(openFailuresFilter(filter), 'failureKind', 'createdAt')).toArray(),
  ]);
  const groups = mergeFailureGroups(retrying.map(countFromDoc), dead.map(countFromDoc), failureGroupsLimit(filter));
  return withSamples(groups, (source, key) => latestOutcome(db, source, key));
}

/** The retrying deliveries first (one update), then the open dead letters, a chunk per transaction. */
export async function replayFailureGroup(db: StoreDb, key: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
  return replayFailureGroupInChunks(
    key,
    async () => (await db.deliveries.updateMany(resumeFailureGroupFilter(key, now), resumeDeliveriesUpdate(now))).modifiedCount,
    (filter) => replayDeadLetters(db, filter, now),
  );
}

export function countFromDoc(doc: CountDoc): FailureGroupCount {
  return { endpointId: doc._id.endpointId, kind: doc._id.kind, tenantId: doc.tenantId, count: doc.count, firstSeen: doc.firstSeen, lastSeen: doc.lastSeen };
}

async function latestOutcome(db: StoreDb, source: SampleSource, key: FailureGroupKey): Promise<Outcome | undefined> {
  if (source === 'dead') {
    const doc = await db.deadLetters.findOne(openFailuresFilter(key), { sort: { createdAt: -1 }, projection: { lastOutcome: 1 } });
    return doc?.lastOutcome;
  }
  const delivery = await db.deliveries.findOne(retryingFailuresFilter(key), { sort: { lastFailureAt: -1 }, projection: { _id: 1, round: 1 } });
  if (delivery === null) return undefined;
  const attempt = await db.attempts.findOne({ deliveryId: delivery._id, round: delivery.round }, { sort: { number: -1 }, projection: { outcome: 1 } });
  return attempt?.outcome;
}
