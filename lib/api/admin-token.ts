/**
 * The admin API's bearer token: `HERALD_ADMIN_TOKEN` / `adminToken` when set,
 * else the one kept in `<dataDir>/admin-token`, generated on first start with
 * file mode 0600 so only the owner can read it.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface AdminToken {
  readonly token: string;
  /** Where it came from, for the start banner. */
  readonly source: 'config' | 'file' | 'generated';
  readonly path: string | null;
}

const MIN_LENGTH = 16;

export function resolveAdminToken(configured: string | null, dataDir: string): AdminToken {
  if (configured !== null) return { token: configured, source: 'config', path: null };
  const path = join(dataDir, 'admin-token');
  const kept = readKept(path);
  if (kept !== undefined && kept.length >= MIN_LENGTH) return { token: kept, source: 'file', path };
  mkdirSync(dataDir, { recursive: true });
  // An unusable file is replaced, not rewritten: rewriting keeps its old (maybe world-readable) mode.
  if (kept !== undefined) rmSync(path, { force: true });
  const token = randomBytes(24).toString('base64url');
  try {
    // 'wx': when several processes share the data folder and start together, the first one's token wins.
    writeFileSync(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    const winner = (error as NodeJS.ErrnoException).code === 'EEXIST' ? readKept(path) : undefined;
    if (winner !== undefined && winner.length >= MIN_LENGTH) return { token: winner, source: 'file', path };
    throw error;
  }
  return { token, source: 'generated', path };
}

function readKept(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return undefined;
  }
}
