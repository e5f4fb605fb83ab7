/**
 * The admin API's bearer token: `HERALD_ADMIN_TOKEN` / `adminToken` when set,
 * else the one kept in `<dataDir>/admin-token`, generated on first start with
 * file mode 0600 so only the owner can read it.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface AdminToken {
  readonly token: string;
  /** Where it came from, for the start banner. */
  readonly source: 'config' | 'file' | 'generated';
  readonly path: string | null;
}

export function resolveAdminToken(configured: string | null, dataDir: string): AdminToken {
  if (configured !== null) return { token: configured, source: 'config', path: null };
  const path = join(dataDir, 'admin-token');
  try {
    const kept = readFileSync(path, 'utf8').trim();
    if (kept.length >= 16) return { token: kept, source: 'file', path };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dataDir, { recursive: true });
  const token = randomBytes(24).toString('base64url');
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  return { token, source: 'generated', path };
}
