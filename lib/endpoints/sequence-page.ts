/**
 * A page of an endpoint's deliveries after sequence number N: what a consumer that noticed a gap
 * (it saw N, then something above N + 1) reads to learn what it has not received yet and why —
 * still retrying, dead-lettered, or waiting while the endpoint is disabled. Pure: the request is
 * checked here, the rows come from `Store.listDeliveriesAfterSequence`.
 */
import { ValidationError } from '../errors.ts';
import type { Delivery, DeliveryStatus } from '../model.ts';

/** One numbered delivery, as the listing shows it. */
export interface SequencedDelivery {
  readonly sequence: number;
  readonly eventId: string;
  readonly eventType: string;
  readonly deliveryId: string;
  readonly status: DeliveryStatus;
  /** When fan-out created it (epoch ms). */
  readonly createdAt: number;
  /** When an attempt succeeded (epoch ms); `null` while it has not. */
  readonly deliveredAt: number | null;
}

export interface SequencePage {
  /** Numbered after `after`, in sequence order. */
  readonly data: readonly SequencedDelivery[];
  /** The `after` of the next page; `null` when this page holds the last numbered delivery. */
  readonly nextAfter: number | null;
}

export interface SequencePageRequest {
  /** List the deliveries numbered above this (0: from the first). */
  readonly after: number;
  readonly limit: number;
}

export const SEQUENCE_PAGE_LIMITS = Object.freeze({
  /** Deliveries per page when the request names no `limit`. */
  defaultLimit: 100,
  /** The most a page holds (and a store reads at once). */
  maxLimit: 1_000,
} as const);

/**
 * The page asked for by the query's `after` (default 0) and `limit` (default 100, 1 to 1000).
 * @throws ValidationError naming `after` or `limit` and the rule, with the value given.
 */
export function sequencePageRequest(after: string | null, limit: string | null): SequencePageRequest {
  return {
    after: after === null || after === '' ? 0 : wholeNumber('after', after, 0, Number.MAX_SAFE_INTEGER),
    limit: limit === null || limit === '' ? SEQUENCE_PAGE_LIMITS.defaultLimit : wholeNumber('limit', limit, 1, SEQUENCE_PAGE_LIMITS.maxLimit),
  };
}

/** How many rows to read for a page of `limit`: one more tells whether a next page exists (within the store's cap). */
export function rowsToRead(limit: number): number {
  return Math.min(limit + 1, SEQUENCE_PAGE_LIMITS.maxLimit);
}

/** The page from the rows read for it (`rowsToRead(limit)` of them at most). */
export function sequencePageOf(rows: readonly Delivery[], limit: number): SequencePage {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  // At the cap one more could not be read: a full page may have a next one (then it comes back empty).
  const more = rows.length > limit || (rows.length === SEQUENCE_PAGE_LIMITS.maxLimit && limit === SEQUENCE_PAGE_LIMITS.maxLimit);
  return {
    data: page.map((d) => ({
      // Listed by sequence, so every row has one.
      sequence: d.sequence ?? 0,
      eventId: d.eventId,
      eventType: d.eventType,
      deliveryId: d.id,
      status: d.status,
      createdAt: d.createdAt,
      deliveredAt: d.deliveredAt,
    })),
    nextAfter: more && last?.sequence != null ? last.sequence : null,
  };
}

function wholeNumber(field: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^\d{1,16}$/.test(text) || value < min || value > max) {
    throw new ValidationError(field, `must be a whole number from ${min} to ${max} (got ${JSON.stringify(text)})`);
  }
  return value;
}
