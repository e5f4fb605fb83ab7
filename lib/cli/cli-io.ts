/**
 * What every ops command shares: its streams and environment, the usage and
 * API errors that set the exit code, the connection flags (`--url`,
 * `--token`, `--json`), and reading times such as `7d` or an ISO-8601 date.
 *
 * Exit codes: 0 done, 1 the API refused or could not be reached, 2 bad usage.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseDate, systemClock } from '../clock.ts';

export interface CliIo {
  readonly stdout: NodeJS.WritableStream & { readonly isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { readonly isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
  /** Reads standard input (for `publish --payload -`). */
  readStdin(): Promise<string>;
}

/** Bad usage: exit 2 with the message and the command's usage. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The API answered with an error or could not be reached: exit 1 with the message. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number | null;
  readonly code: string | null;

  constructor(message: string, status: number | null = null, code: string | null = null) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const CONNECTION_HELP = `Connection (every command but start and secrets):
  --url <url>      the status port  (HERALD_URL, default http://127.0.0.1:8088)
  --token <token>  admin token      (HERALD_ADMIN_TOKEN, else <HERALD_DATA_DIR or ./data>/admin-token)
  --json           print JSON for scripts instead of tables`;

const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

type Options = NonNullable<ParseArgsConfig['options']>;

/** What `parseCommand` returns: spelled out, as the emitted declarations cannot name parseArgs' own option types. */
type ParsedCommand<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: typeof CONNECTION_OPTIONS & O; strict: true; allowPositionals: boolean }>
>;

/** Parses `args` with the connection options added; an unknown flag is a UsageError. */
export function parseCommand<O extends Options>(args: readonly string[], options: O, allowPositionals = true): ParsedCommand<O> {
  try {
    return parseArgs({ args: [...args], options: { ...CONNECTION_OPTIONS, ...options }, strict: true, allowPositionals });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export interface Connection {
  readonly url: string;
  readonly token: string;
}

/** The admin API to talk to: flags over environment over the kept token file. */
export function connectionOf(values: { url?: string | undefined; token?: string | undefined }, env: NodeJS.ProcessEnv): Connection {
  const url = (values.url ?? env.HERALD_URL ?? `http://127.0.0.1:${env.HERALD_PORT ?? 8088}`).replace(/\/+$/, '');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url: must be an http(s) URL such as http://127.0.0.1:8088 (got ${JSON.stringify(url)})`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new UsageError(`--url: must be an http(s) URL (got ${JSON.stringify(url)})`);
  }
  let token = values.token ?? env.HERALD_ADMIN_TOKEN;
  if (token === undefined || token === '') {
    const kept = join(env.HERALD_DATA_DIR ?? './data', 'admin-token');
    if (existsSync(kept)) token = readFileSync(kept, 'utf8').trim();
  }
  if (token === undefined || token === '') {
    throw new UsageError('no admin token: pass --token, set HERALD_ADMIN_TOKEN, or run where data/admin-token is');
  }
  return { url, token };
}

const UNIT_MS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/**
 * A point in time from `--since`/`--until`: a duration back from now (`90s`,
 * `30m`, `12h`, `7d`, `2w`), an ISO-8601 date or date-time with an offset
 * (strict: see `parseDate`), or epoch milliseconds.
 */
export function parseTime(flag: string, text: string, now = systemClock.now()): number {
  const relative = /^(\d+)([smhdw])$/.exec(text);
  if (relative !== null) return now - Number(relative[1]) * (UNIT_MS[relative[2] ?? 's'] ?? 0);
  if (/^\d{10,}$/.test(text)) return Number(text);
  const date = /^\d{4}-\d{2}-\d{2}/.test(text) ? parseDate(text) : undefined;
  if (date === undefined) {
    throw new UsageError(
      `--${flag}: must be a duration back from now (30m, 12h, 7d), epoch milliseconds, or an ISO-8601 date (2026-01-31) ` +
        `or date-time with Z or an offset (2026-01-31T09:30:00Z) that exists in the calendar (got ${JSON.stringify(text)})`,
    );
  }
  return date;
}

/** A whole number flag within [min, max]. */
export function parseInteger(flag: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw new UsageError(`--${flag}: must be a whole number from ${min} to ${max} (got ${JSON.stringify(text)})`);
  }
  return value;
}

export function writeJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
