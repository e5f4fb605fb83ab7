/**
 * Where the key that seals endpoint secrets comes from, in this order:
 *
 * 1. `secrets.key` (`HERALD_SECRET_KEY`);
 * 2. `secrets.keyFile` (`HERALD_SECRET_KEY_FILE`), a file holding it;
 * 3. `<dataDir>/secret-key`, generated on first start (mode 0600) — only when
 *    the caller says the data lives beside `dataDir` (a SQLite store: one
 *    machine, one folder). A PostgreSQL or MongoDB cluster spans hosts, and a
 *    key generated on each would seal what the others cannot open;
 * 4. none: secrets are stored plain, with a warning.
 *
 * `secrets.previousKeys` are added to whichever key is current, to open what
 * was sealed before a key rotation.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../errors.ts';
import { SECRET_KEY_BYTES, SecretBox } from './secret-box.ts';
import { decodeSecretKey, encodeSecretKey, SECRET_KEY_RULE } from './secret-key-text.ts';

/** The name of the generated key file in `dataDir`. */
export const GENERATED_KEY_FILE = 'secret-key';

export const SecretKeyOrigin = {
  /** `secrets.key` / `HERALD_SECRET_KEY`. */
  CONFIG: 'config',
  /** `secrets.keyFile`, or a key file generated earlier in `dataDir`. */
  FILE: 'file',
  /** Generated now into `dataDir/secret-key`. */
  GENERATED: 'generated',
  /** No key: secrets are stored plain. */
  NONE: 'none',
} as const;
export type SecretKeyOrigin = (typeof SecretKeyOrigin)[keyof typeof SecretKeyOrigin];

/** Where the key comes from: the configuration's `secrets` section (lib/config/config.ts reads it). */
export interface SecretKeySettings {
  /** 32 bytes, base64 or hex; `HERALD_SECRET_KEY`. @default null */
  readonly key: string | null;
  /** A file holding the key (base64 or hex); `HERALD_SECRET_KEY_FILE`. Not with `key`. @default null */
  readonly keyFile: string | null;
  /** Keys that still open secrets sealed before a key rotation; `HERALD_SECRET_KEYS_PREVIOUS`, comma-separated. @default [] */
  readonly previousKeys: readonly string[];
}

export interface SecretKeys {
  readonly box: SecretBox;
  readonly origin: SecretKeyOrigin;
  /** The key file read or generated; `null` for a key from the config, or none. */
  readonly path: string | null;
  /** What the operator should hear at start: a key file others can read, secrets stored plain. */
  readonly warnings: readonly string[];
}

/**
 * @param generateIn the folder to keep a generated key in when none is configured (`dataDir` of a
 *   SQLite store), or `null` to store secrets plain instead.
 * @throws ConfigError naming `secrets.keyFile` when the key file cannot be read or does not hold a
 *   key; naming `secrets.previousKeys` when a previous key is the current one.
 */
export function resolveSecretKeys(secrets: SecretKeySettings, generateIn: string | null): SecretKeys {
  const previous = secrets.previousKeys.map((text) => decodeSecretKey(text) as Buffer);
  const boxOf = (current: Buffer): SecretBox => {
    const duplicate = previous.findIndex((key) => key.equals(current));
    if (duplicate >= 0) throw new ConfigError(`secrets.previousKeys[${duplicate}]`, '(hidden)', 'is the current key: list only the keys it replaced');
    return new SecretBox(current, previous);
  };
  if (secrets.key !== null) {
    return { box: boxOf(decodeSecretKey(secrets.key) as Buffer), origin: SecretKeyOrigin.CONFIG, path: null, warnings: [] };
  }
  if (secrets.keyFile !== null) {
    const { key, warnings } = readKeyFile(secrets.keyFile, 'secrets.keyFile');
    return { box: boxOf(key), origin: SecretKeyOrigin.FILE, path: secrets.keyFile, warnings };
  }
  if (generateIn === null) {
    if (previous.length > 0) throw new ConfigError('secrets.previousKeys', '(hidden)', 'need a current key: set secrets.key or secrets.keyFile');
    return {
      box: SecretBox.plain(),
      origin: SecretKeyOrigin.NONE,
      path: null,
      warnings: ['endpoint secrets are stored plain: set HERALD_SECRET_KEY (the same on every node) to seal them at rest'],
    };
  }
  const path = join(generateIn, GENERATED_KEY_FILE);
  const kept = readKeyFileIfAny(path);
  if (kept !== undefined) return { box: boxOf(kept.key), origin: SecretKeyOrigin.FILE, path, warnings: kept.warnings };
  mkdirSync(generateIn, { recursive: true });
  const key = randomBytes(SECRET_KEY_BYTES);
  try {
    // 'wx': when several processes share the data folder and start together, the first one's key wins.
    writeFileSync(path, `${encodeSecretKey(key)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const winner = readKeyFile(path, GENERATED_KEY_FILE);
    return { box: boxOf(winner.key), origin: SecretKeyOrigin.FILE, path, warnings: winner.warnings };
  }
  return { box: boxOf(key), origin: SecretKeyOrigin.GENERATED, path, warnings: [] };
}

function readKeyFileIfAny(path: string): { key: Buffer; warnings: string[] } | undefined {
  try {
    statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  // Never replaced, unlike a broken admin token: the secrets sealed under it would be lost with it.
  return readKeyFile(path, GENERATED_KEY_FILE);
}

function readKeyFile(path: string, setting: string): { key: Buffer; warnings: string[] } {
  let text: string;
  let mode: number;
  try {
    text = readFileSync(path, 'utf8');
    mode = statSync(path).mode;
  } catch (error) {
    throw new ConfigError(setting, path, `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const key = decodeSecretKey(text);
  if (key === undefined) throw new ConfigError(setting, path, `must hold ${SECRET_KEY_RULE}`);
  const warnings =
    (mode & 0o077) === 0
      ? []
      : [`the secret key file ${path} can be read by other users (mode ${(mode & 0o777).toString(8)}): chmod 600 it`];
  return { key, warnings };
}
