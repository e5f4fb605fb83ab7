/**
 * Predicates over the driver's errors. Branch on error classes, server codes
 * and labels, never on message text. The classes are the loaded driver's
 * (`driver.ts`): an error of the driver reaches Herald only once it is loaded.
 */
import { mongoDriver } from './driver.ts';

/** The server error codes Herald cares about (the driver does not export its table). */
export const MongoErrorCode = {
  /** A cursor the server no longer knows; the driver treats it as resumable. */
  CURSOR_NOT_FOUND: 43,
  NAMESPACE_EXISTS: 48,
  /** An index of that name or keys exists with other options (e.g. another TTL). */
  INDEX_OPTIONS_CONFLICT: 85,
  /** Dropping an index that is not there (any more). */
  INDEX_NOT_FOUND: 27,
  DUPLICATE_KEY: 11000,
  /** A command the server does not know (`hello` before MongoDB 4.4.2). */
  COMMAND_NOT_FOUND: 59,
  /** The resume point fell off the oplog (or never was in it). */
  CHANGE_STREAM_HISTORY_LOST: 286,
} as const;

/** The numeric code of a server error, if it is one. */
export function serverErrorCode(error: unknown): number | undefined {
  if (!(error instanceof mongoDriver().MongoError)) return undefined;
  return typeof error.code === 'number' ? error.code : undefined;
}

/**
 * True when a change stream that failed with `error` can be reopened from its
 * last resume token without losing anything: network trouble, an election,
 * a server shutting down. Every server Herald supports (4.4+) labels these
 * `ResumableChangeStreamError`; CursorNotFound is resumable too, as the driver
 * treats it (DRIVERS-1308).
 *
 * False for everything else, in particular a resume token that fell out of
 * the oplog ({@link isChangeStreamHistoryLost}), an invalid token, or a
 * stream closed by the application.
 */
export function isResumableChangeStreamError(error: unknown): boolean {
  const { MongoError, MongoErrorLabel, MongoNetworkError, MongoServerSelectionError } = mongoDriver();
  if (!(error instanceof MongoError)) return false;
  if (isChangeStreamHistoryLost(error)) return false;
  if (error instanceof MongoNetworkError || error instanceof MongoServerSelectionError) return true;
  if (error.hasErrorLabel(MongoErrorLabel.ResumableChangeStreamError)) return true;
  const code = serverErrorCode(error);
  return code === MongoErrorCode.CURSOR_NOT_FOUND;
}

/** True when the resume token points before the oldest oplog entry: resuming from it is impossible. */
export function isChangeStreamHistoryLost(error: unknown): boolean {
  const code = serverErrorCode(error);
  return code === MongoErrorCode.CHANGE_STREAM_HISTORY_LOST;
}

/**
 * True when the driver refused the server as too old (or too new) for it: during its handshake
 * (`MongoCompatibilityError`), or, as `client.connect()` reports it, a server selection that timed
 * out after a server it saw was refused so (one such server makes the driver refuse the deployment).
 */
export function isIncompatibleServerError(error: unknown): boolean {
  const { MongoCompatibilityError, MongoServerSelectionError } = mongoDriver();
  if (error instanceof MongoCompatibilityError) return true;
  if (!(error instanceof MongoServerSelectionError)) return false;
  if (error.cause instanceof MongoCompatibilityError) return true;
  const servers = error.reason?.servers;
  if (servers === undefined || servers.size === 0) return false;
  return [...servers.values()].some((server) => server.error instanceof MongoCompatibilityError);
}

/** True for a duplicate `_id` (or other unique key) on insert or upsert. */
export function isDuplicateKeyError(error: unknown): boolean {
  return serverErrorCode(error) === MongoErrorCode.DUPLICATE_KEY;
}

/**
 * For an unordered bulk write whose only failures are duplicate keys (upserts
 * that lost to an existing document): true. Any other failure: false.
 */
export function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof mongoDriver().MongoBulkWriteError)) return isDuplicateKeyError(error);
  if (error.result.getWriteConcernError() !== undefined) return false;
  const writeErrors = error.result.getWriteErrors();
  return writeErrors.length > 0 && writeErrors.every((e) => e.code === MongoErrorCode.DUPLICATE_KEY);
}
