/**
 * Delivery minutes in MongoDB (`delivery_minutes`, lib/store/delivery-minutes.ts): a batch of
 * increments as one bulk write of `$inc` upserts in one transaction (all or none, as in the SQL
 * stores: the recorder adds a failed batch again, which must then not have landed in part), and a
 * window of minutes summed over an endpoint, a tenant or every endpoint by one aggregation: per
 * minute (the charts) or per endpoint (the stats).
 */
import type { Filter } from 'mongodb';
import {
  byEndpointId,
  COUNT_FIELDS,
  LATENCY_BUCKETS,
  type DeliveryMinute,
  type DeliveryMinuteIncrement,
  type DeliveryMinutesQuery,
  type EndpointDeliveryTotals,
} from '../delivery-minutes.ts';
import type { StoreDb } from './collections.ts';
import type { DeliveryMinuteDoc } from './schema.ts';

/** The histogram's field names inside `latency`: `b00` … `b24`. */
const BUCKET_FIELDS: readonly string[] = Array.from({ length: LATENCY_BUCKETS }, (_, i) => `b${String(i).padStart(2, '0')}`);

export async function addDeliveryMinutes(db: StoreDb, increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
  const updates = increments.map((inc) => {
    const add: Record<string, number> = {};
    for (const field of COUNT_FIELDS) add[field] = inc[field];
    BUCKET_FIELDS.forEach((field, i) => {
      add[`latency.${field}`] = inc.latency[i] ?? 0;
    });
    return {
      updateOne: {
        filter: { _id: `${inc.endpointId}@${inc.minute}` },
        update: { $inc: add, $setOnInsert: { endpointId: inc.endpointId, tenantId: inc.tenantId, minute: inc.minute } },
        upsert: true,
      },
    };
  });
  await db.transaction(async (session) => {
    await db.deliveryMinutes.bulkWrite(updates, { ordered: true, session });
  });
}

/** The documents a query covers: its window, within its scope. */
function matchOf(query: DeliveryMinutesQuery): Filter<DeliveryMinuteDoc> {
  const { scope } = query;
  const match: Filter<DeliveryMinuteDoc> = { minute: { $gte: query.from, $lt: query.to } };
  if (scope.kind === 'tenant') match.tenantId = scope.tenantId;
  if (scope.kind === 'endpoints') match.endpointId = { $in: [...scope.endpointIds] };
  return match;
}

export async function deliveryMinutes(db: StoreDb, query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
  const { scope } = query;
  if (scope.kind === 'endpoints' && scope.endpointIds.length === 0) return [];
  const match = matchOf(query);
  const group: Record<string, unknown> = { _id: '$minute' };
  for (const field of COUNT_FIELDS) group[field] = { $sum: `$${field}` };
  for (const field of BUCKET_FIELDS) group[field] = { $sum: `$latency.${field}` };
  const rows = await db.deliveryMinutes.aggregate<Record<string, number>>([{ $match: match }, { $group: group }, { $sort: { _id: 1 } }]).toArray();
  return rows.map((row) => {
    const counts = Object.fromEntries(COUNT_FIELDS.map((field) => [field, Number(row[field] ?? 0)])) as Record<(typeof COUNT_FIELDS)[number], number>;
    return { minute: Number(row._id), ...counts, latency: BUCKET_FIELDS.map((field) => Number(row[field] ?? 0)) };
  });
}

/** The window summed per endpoint, by endpoint id (sorted here, in code unit order, as the SQL stores do). */
export async function deliveryTotals(db: StoreDb, query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
  const { scope } = query;
  if (scope.kind === 'endpoints' && scope.endpointIds.length === 0) return [];
  const group: Record<string, unknown> = { _id: '$endpointId' };
  for (const field of COUNT_FIELDS) group[field] = { $sum: `$${field}` };
  const rows = await db.deliveryMinutes.aggregate<Record<string, unknown>>([{ $match: matchOf(query) }, { $group: group }]).toArray();
  return rows
    .map((row) => {
      const counts = Object.fromEntries(COUNT_FIELDS.map((field) => [field, Number(row[field] ?? 0)])) as Record<(typeof COUNT_FIELDS)[number], number>;
      return { endpointId: String(row._id), ...counts };
    })
    .sort(byEndpointId);
}
