/**
 * Identifiers. Endpoint ids are random; event ids begin with their creation
 * time; a delivery's id is derived from its (event, endpoint) pair so that
 * fan-out run twice creates nothing twice, and begins with the event's time.
 *
 * Why time first: SQLite indexes ids in B-trees. Random ids land on a random
 * page each, so a batch of 100 new events dirtied about 100 pages per index,
 * each written to the WAL at commit; ids that grow with time append to the
 * last few pages, which makes fan-out markedly cheaper.
 */
import { createHash, randomUUID } from 'node:crypto';

/** A new random id such as `ep_3f2a…` (a UUID v4 without dashes); `htk` is a tenant token's. */
export function newId(prefix: 'ep' | 'dl' | 'node' | 'htk'): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`;
}

/** The creation time as 12 hex digits: sorts like the time (epoch ms up to the year 10889). */
function timePrefix(at: number): string {
  return Math.max(0, Math.floor(at)).toString(16).padStart(12, '0');
}

/** A new event id such as `evt_019a3f…`: 12 hex digits of `now` (ms), then 80 random bits; 32 hex digits in all. */
export function newEventId(now: number): string {
  return `evt_${timePrefix(now)}${randomUUID().replaceAll('-', '').slice(0, 20)}`;
}

/**
 * The delivery id of one (event, endpoint) pair: the same inputs always give
 * the same id. `eventCreatedAt` (fixed for an event) only orders it.
 */
export function deliveryIdFor(eventId: string, endpointId: string, eventCreatedAt: number): string {
  const digest = createHash('sha256').update(eventId).update('\0').update(endpointId).digest('base64url');
  return `dlv_${timePrefix(eventCreatedAt)}${digest.slice(0, 20)}`;
}

/** The slot an endpoint hashes into (FNV-1a, 32 bit). */
export function slotOf(endpointId: string, slotCount: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < endpointId.length; i++) {
    hash ^= endpointId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % slotCount;
}
