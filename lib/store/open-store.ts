/**
 * Opens the store a `store` setting names: `sqlite:<path>` today; a
 * `mongodb://` URI once the MongoDB adapter lands.
 */
import type { Clock } from '../clock.ts';
import { ConfigError } from '../errors.ts';
import type { Store } from './port.ts';
import { SqliteStore } from './sqlite/sqlite-store.ts';

export function openStore(setting: string, options: { clock: Clock; pollIntervalMs: number }): Store {
  if (setting.startsWith('sqlite:')) {
    return new SqliteStore({ path: setting.slice('sqlite:'.length), clock: options.clock, pollIntervalMs: options.pollIntervalMs });
  }
  if (setting.startsWith('mongodb://') || setting.startsWith('mongodb+srv://')) {
    throw new ConfigError('store', redactUri(setting), 'the MongoDB store is not available in this version; use sqlite:<path>');
  }
  throw new ConfigError('store', setting, 'must be sqlite:<path> or a mongodb:// URI');
}

/** Hides a password in a connection string before it reaches a message or a log. */
export function redactUri(uri: string): string {
  return uri.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}
