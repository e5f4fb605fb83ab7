/**
 * The `store` setting's forms, as the configuration checks them before any
 * store is opened: cheap to import (no driver).
 */
import { redactMongoUri } from './mongo/mongo-uri.ts';

export const STORE_RULE =
  'must be sqlite:<path>, a postgres:// (or postgresql://) URI, a mongodb:// (or mongodb+srv://) URI, or mongodb-memory-server';

export { isPostgresSetting } from './postgres/postgres-uri.ts';

/** Hides a password (and secret URI options) in a connection string before it reaches a message or a log. */
export function redactUri(uri: string): string {
  return redactMongoUri(uri);
}
