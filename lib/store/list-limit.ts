/**
 * How many rows a listing of the port returns: the default when none is asked, and a cap so
 * one request cannot read a whole table. Every adapter clamps the same way.
 */
export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1_000;

/** A whole number from 0 to `max`; `max` for a limit that is not a finite number. */
export function clampLimit(limit: number, max: number): number {
  if (!Number.isFinite(limit)) return max;
  return Math.min(Math.max(0, Math.floor(limit)), max);
}
