/**
 * A listing's page cursor (the delivery log's, the dead letters'): an opaque
 * string that encodes the last row of a page, `{createdAt, id}`, as base64url
 * JSON. The next page starts strictly after it in the listing's order (newest
 * first; ties by id in the delivery log, by insertion among dead letters).
 */
import { ValidationError } from '../errors.ts';

export interface DeliveryCursor {
  readonly createdAt: number;
  readonly id: string;
}

export function encodeCursor(cursor: DeliveryCursor): string {
  return Buffer.from(JSON.stringify({ c: cursor.createdAt, i: cursor.id }), 'utf8').toString('base64url');
}

/** @throws ValidationError (`HERALD_INVALID_INPUT`, field `cursor`) when the text is not a cursor this server made. */
export function decodeCursor(text: string): DeliveryCursor {
  let parsed: unknown;
  try {
    parsed = /^[A-Za-z0-9_-]+$/.test(text) ? JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) : undefined;
  } catch {
    parsed = undefined;
  }
  const record = parsed as { c?: unknown; i?: unknown } | undefined;
  if (typeof record !== 'object' || record === null || !Number.isSafeInteger(record.c) || typeof record.i !== 'string' || record.i === '') {
    throw new ValidationError('cursor', 'must be the nextCursor of a previous page');
  }
  return { createdAt: record.c as number, id: record.i };
}
