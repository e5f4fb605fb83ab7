/**
 * Predicates over the driver's errors. Branch on error classes, server codes
 * and labels, never on message text.
 */
import { MongoBulkWriteError, MongoError, MongoErrorLabel, MongoNetworkError, MongoServerError, MongoServerSelectionError } from 'mongodb';

/** The server error codes Herald cares about (the driver does not export its table). */
export const MongoErrorCode = {
  /** A cursor the server no longer knows; the driver treats it as resumable. */
  CURSOR_NOT_FOUND: 43,
  NAMESPACE_EXISTS: 48,
  /** An index of that name or keys exists with other options (e.g. another TTL). */
  INDEX_OPTIONS_CONFLICT: 85,
  DUPLICATE_KEY: 11000,
  /** MongoDB 4.0: the resume token was not found in the oplog. */
  CHANGE_STREAM_FATAL: 280,
  /** 4.2+: the resume point fell off the oplog (or never was in it). */
  CHANGE_STREAM_HISTORY_LOST: 286,
} as const;

/**
 * Codes after which a `getMore` on a change stream may be retried, for
 * servers older than 4.4 that do not label errors (the driver's own list).
 */
const LEGACY_RESUMABLE_CODES: ReadonlySet<number> = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
  63, // StaleShardVersion
  150, // StaleEpoch
  13388, // StaleConfig
  234, // RetryChangeStream
  133, // FailedToSatisfyReadPreference
  MongoErrorCode.CURSOR_NOT_FOUND,
]);

/** The numeric code of a server error, if it is one. */
export function serverErrorCode(error: unknown): number | undefined {
  if (!(error instanceof MongoError)) return undefined;
  return typeof error.code === 'number' ? error.code : undefined;
}

/**
 * True when a change stream that failed with `error` can be reopened from its
 * last resume token without losing anything: network trouble, an election,
 * a server shutting down. The server labels these `ResumableChangeStreamError`
 * (4.4+); for older servers the driver's list of codes applies.
 *
 * False for everything else, in particular a resume token that fell out of
 * the oplog ({@link isChangeStreamHistoryLost}), an invalid token, or a
 * stream closed by the application.
 */
export function isResumableChangeStreamError(error: unknown): boolean {
  if (!(error instanceof MongoError)) return false;
  if (isChangeStreamHistoryLost(error)) return false;
  if (error instanceof MongoNetworkError || error instanceof MongoServerSelectionError) return true;
  if (error.hasErrorLabel(MongoErrorLabel.ResumableChangeStreamError)) return true;
  const code = serverErrorCode(error);
  if (code === undefined) return false;
  if (code === MongoErrorCode.CURSOR_NOT_FOUND) return true;
  // Servers that label errors say so when a code is resumable; only unlabelled (old) servers use the list.
  return error instanceof MongoServerError && error.errorLabels.length === 0 && LEGACY_RESUMABLE_CODES.has(code);
}

/** True when the resume token points before the oldest oplog entry: resuming from it is impossible. */
export function isChangeStreamHistoryLost(error: unknown): boolean {
  const code = serverErrorCode(error);
  return code === MongoErrorCode.CHANGE_STREAM_HISTORY_LOST || code === MongoErrorCode.CHANGE_STREAM_FATAL;
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
  if (!(error instanceof MongoBulkWriteError)) return isDuplicateKeyError(error);
  if (error.result.getWriteConcernError() !== undefined) return false;
  const writeErrors = error.result.getWriteErrors();
  return writeErrors.length > 0 && writeErrors.every((e) => e.code === MongoErrorCode.DUPLICATE_KEY);
}

/** The message of any thrown value. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
