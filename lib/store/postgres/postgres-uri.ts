/**
 * The `store` setting of a PostgreSQL store: a `postgres://` (or
 * `postgresql://`) connection string, as `psql` and node-postgres take it,
 * plus two parameters of Herald's own, taken out before the rest reaches the
 * driver: `schema` (the schema Herald's tables live in, `herald` by default)
 * and `poolSize` (connections per process, 10 by default).
 */
import { ValidationError } from '../../errors.ts';
import { DEFAULT_POSTGRES_SCHEMA, validSchemaName } from './schema.ts';

export interface PostgresSetting {
  /** What the driver gets: the setting without Herald's `schema` parameter. */
  readonly connectionString: string;
  readonly schema: string;
  /** Absent: the store's default. */
  readonly poolSize?: number;
}

const MAX_POOL_SIZE = 1_000;

export function isPostgresSetting(setting: string): boolean {
  return setting.startsWith('postgres://') || setting.startsWith('postgresql://');
}

/** @throws ValidationError naming the rule the setting breaks. */
export function parsePostgresSetting(setting: string): PostgresSetting {
  let url: URL;
  try {
    url = new URL(setting);
  } catch {
    throw new ValidationError('store', 'must be a postgres:// URI such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ValidationError('store', 'must start with postgres:// or postgresql://');
  }
  if (url.hostname === '' && !url.searchParams.has('host')) {
    throw new ValidationError('store', 'must name a host: postgres://user:password@host:5432/database');
  }
  if (url.pathname.length <= 1) {
    throw new ValidationError('store', 'must name a database after the host: postgres://user:password@host:5432/database');
  }
  const schema = validSchemaName(url.searchParams.get('schema') ?? DEFAULT_POSTGRES_SCHEMA, 'store schema parameter');
  url.searchParams.delete('schema');
  const poolSizeText = url.searchParams.get('poolSize');
  url.searchParams.delete('poolSize');
  if (poolSizeText === null) return { connectionString: url.toString(), schema };
  const poolSize = Number(poolSizeText);
  if (!/^\d+$/.test(poolSizeText) || poolSize < 1 || poolSize > MAX_POOL_SIZE) {
    throw new ValidationError('store poolSize parameter', `must be an integer from 1 to ${MAX_POOL_SIZE} (got ${JSON.stringify(poolSizeText)})`);
  }
  return { connectionString: url.toString(), schema, poolSize };
}
