/**
 * MongoDB connection strings: the checks Herald makes before the driver sees
 * one, and redaction for messages and logs. Pure.
 */
import { ValidationError } from '../../errors.ts';

/** The `store` setting that starts an embedded single-node replica set (mongodb-memory-server). */
export const EMBEDDED_MONGODB_SETTING = 'mongodb-memory-server';

/** The database used when the URI names none. */
export const DEFAULT_DB_NAME = 'herald';

export interface MongoUriInfo {
  readonly scheme: 'mongodb' | 'mongodb+srv';
  readonly hosts: readonly string[];
  /** From the path, or {@link DEFAULT_DB_NAME}. */
  readonly dbName: string;
  /** The `replicaSet` parameter, if given. */
  readonly replicaSet: string | undefined;
}

const URI = /^(mongodb(?:\+srv)?):\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/;
/** Characters MongoDB refuses in database names. */
const BAD_DB_NAME = /[/\\. "$*<>:|?\0]/;

/** True when the setting names a MongoDB store (a URI or the embedded server). */
export function isMongoSetting(setting: string): boolean {
  return setting === EMBEDDED_MONGODB_SETTING || /^mongodb(\+srv)?:/.test(setting);
}

/**
 * Checks the shape of a connection string and reads what Herald needs from it.
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `uri`) naming the rule broken.
 */
export function parseMongoUri(uri: string): MongoUriInfo {
  const match = URI.exec(uri);
  if (match === null) {
    throw new ValidationError('uri', `must be mongodb://[user:password@]host[:port][,host…]/[db][?options] or mongodb+srv://… (got ${JSON.stringify(redactMongoUri(uri))})`);
  }
  const scheme = match[1] === 'mongodb+srv' ? 'mongodb+srv' : 'mongodb';
  const hosts = (match[3] ?? '').split(',').filter((h) => h !== '');
  if (hosts.length === 0) throw new ValidationError('uri', 'must name at least one host after mongodb://');
  if (scheme === 'mongodb+srv' && hosts.length !== 1) throw new ValidationError('uri', 'mongodb+srv:// takes exactly one host name');
  let dbName = DEFAULT_DB_NAME;
  const path = match[4] ?? '';
  if (path !== '') {
    let decoded: string;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      throw new ValidationError('uri', `has a badly escaped database name ${JSON.stringify(path)}`);
    }
    if (BAD_DB_NAME.test(decoded) || decoded.length > 63) {
      throw new ValidationError('uri', `database name ${JSON.stringify(decoded)} must be at most 63 characters without / \\ . " $ * < > : | ?`);
    }
    dbName = decoded;
  }
  const params = new URLSearchParams(match[5] ?? '');
  const replicaSet = params.get('replicaSet') ?? undefined;
  return { scheme, hosts, dbName, replicaSet: replicaSet === '' ? undefined : replicaSet };
}

/** Query parameters whose value is a secret. */
const SECRET_PARAMS = /([?&](?:password|tlsCertificateKeyFilePassword|sslPass|authMechanismProperties)=)[^&#]*/gi;

/**
 * Hides the password (and secret-bearing options) of a connection string
 * before it reaches a message or a log: `mongodb://u:***@host/db`. Errs on the
 * side of hiding: everything between the user name and the last `@` goes,
 * even an unescaped `/`, `?` or `@` in the password.
 */
export function redactMongoUri(uri: string): string {
  let out = uri;
  const start = out.indexOf('://');
  if (start >= 0) {
    const rest = out.slice(start + 3);
    const at = rest.lastIndexOf('@');
    const colon = rest.indexOf(':');
    if (at > 0 && colon >= 0 && colon < at) out = `${out.slice(0, start + 3)}${rest.slice(0, colon)}:***${rest.slice(at)}`;
  }
  return out.replace(SECRET_PARAMS, '$1***');
}
