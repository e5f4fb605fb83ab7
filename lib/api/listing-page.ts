/**
 * A page of a listing (the delivery log, dead letters), newest first: the
 * store is asked for one row more than the page holds, which tells whether a
 * next page exists, and the page's last row becomes its `nextCursor`
 * (`delivery-cursor.ts`).
 */
import { encodeCursor } from './delivery-cursor.ts';

/** Rows per page when the request gives no `limit`. */
export const DEFAULT_PAGE = 100;

/** How many rows to ask the store for a page of `limit`: one more tells whether there is a next page (the store caps a query at 1000). */
export function lookAhead(limit: number): number {
  return Math.min(limit + 1, 1_000);
}

/** A page of a listing (newest first) read with {@link lookAhead}: its rows and the cursor to the next page, `null` on the last one. */
export function pageOf<Row extends { readonly createdAt: number; readonly id: string }>(rows: readonly Row[], limit: number): { data: Row[]; nextCursor: string | null } {
  const data = rows.slice(0, limit);
  const last = data.at(-1);
  const more = rows.length > limit || (limit === 1_000 && rows.length === limit);
  return { data, nextCursor: more && last !== undefined ? encodeCursor(last) : null };
}
