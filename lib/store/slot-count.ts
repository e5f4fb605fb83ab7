/**
 * The slot count every store's `init()` is asked for. The first start on the data fixes it:
 * endpoints hash into it forever after, so a later start asking for another count gets the
 * stored one (each store keeps the first in one atomic insert-if-absent, then reads it back).
 */
import { ValidationError } from '../errors.ts';

/** The most slots a store's data may be split into. */
export const MAX_SLOT_COUNT = 65_536;

/**
 * Answers `slotCount` when it is a count a store may fix.
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `slotCount`) for anything but an integer from 1 to `MAX_SLOT_COUNT`.
 */
export function checkSlotCount(slotCount: number): number {
  if (!Number.isInteger(slotCount) || slotCount < 1 || slotCount > MAX_SLOT_COUNT) {
    throw new ValidationError('slotCount', `must be an integer from 1 to ${MAX_SLOT_COUNT} (got ${String(slotCount)})`);
  }
  return slotCount;
}
