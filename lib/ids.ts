/**
 * Identifiers. Event and endpoint ids are random; a delivery's id is derived
 * from its (event, endpoint) pair so that fan-out run twice creates nothing twice.
 */
import { createHash, randomUUID } from 'node:crypto';

/** A new random id such as `evt_3f2a…` (a UUID v4 without dashes). */
export function newId(prefix: 'evt' | 'ep' | 'dl' | 'node'): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`;
}

/** The delivery id of one (event, endpoint) pair: the same inputs always give the same id. */
export function deliveryIdFor(eventId: string, endpointId: string): string {
  const digest = createHash('sha256').update(eventId).update('\0').update(endpointId).digest('base64url');
  return `dlv_${digest.slice(0, 32)}`;
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
