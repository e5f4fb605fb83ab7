/**
 * `herald endpoints add|update|list|show|events|filter-test|enable|disable|rotate-secret`: endpoints
 * over the admin API. Secrets are printed only when the API returns one
 * (on `add` and `rotate-secret`), never listed; an ed25519 key's public key
 * (`--scheme ed25519`) is public and `show` prints it too. `events` lists an endpoint's
 * deliveries after a sequence number (`webhook-sequence`), to explain a gap;
 * `filter-test` says whether an event would reach the endpoint, and if not which condition failed.
 */
import { readFileSync } from 'node:fs';
import type { SequencePage } from '../endpoints/sequence-page.ts';
import { durationText } from '../clock.ts';
import { AdminClient } from './admin-client.ts';
import { credentialLines, credentialSettings, CREDENTIAL_OPTIONS, type CredentialView } from './endpoint-auth-options.ts';
import { connectionOf, parseCommand, parseInteger, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { ENDPOINTS_USAGE } from './usage.ts';
import { keyValues, table, time } from './table.ts';

interface EndpointView extends CredentialView {
  readonly id: string;
  readonly tenantId: string;
  readonly url: string;
  readonly description: string;
  readonly eventTypes: readonly string[];
  /** A preset, a schedule or a formula, each with an optional `jitter` (lib/model.ts, `RetrySpec`). */
  readonly retry: { readonly preset?: string; readonly schedule?: readonly string[]; readonly jitter?: string } & Record<string, unknown>;
  readonly timeoutMs: number;
  readonly mode: string;
  /** Absent from an older node: `none`. */
  readonly ordering?: string;
  readonly concurrency: number;
  /** `null` (or absent, from an older node): no rate limit. */
  readonly rateLimit?: { readonly perSecond: number; readonly burst: number } | null;
  /** `null` (or absent, from an older node): no payload filter. */
  readonly filter?: Record<string, unknown> | null;
  /** `null` (or absent, from an older node): no client certificate. Never its key. */
  readonly clientTls?: { readonly subject: string; readonly issuer: string; readonly fingerprint: string; readonly notAfter: number } | null;
  readonly status: string;
  readonly disabledReason: string | null;
  readonly failingSince: number | null;
  readonly secretCount: number;
  readonly previousSecretExpiresAt: number | null;
  /** Absent from an older node. */
  readonly signingKeys?: ReadonlyArray<{ readonly scheme: string; readonly publicKey: string | null; readonly expiresAt: number | null }>;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** A new `whsec_` secret, or the `whpk_` public key of a new ed25519 key. */
  readonly secret?: string;
}

export async function runEndpoints(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    tenant: { type: 'string' },
    'event-types': { type: 'string' },
    retry: { type: 'string' },
    'timeout-ms': { type: 'string' },
    concurrency: { type: 'string' },
    'rate-limit': { type: 'string' },
    filter: { type: 'string' },
    'filter-file': { type: 'string' },
    payload: { type: 'string' },
    type: { type: 'string' },
    mode: { type: 'string' },
    ordering: { type: 'string' },
    scheme: { type: 'string' },
    description: { type: 'string' },
    id: { type: 'string' },
    after: { type: 'string' },
    limit: { type: 'string' },
    ...CREDENTIAL_OPTIONS,
    'client-cert': { type: 'string' },
    'client-key': { type: 'string' },
    'no-client-cert': { type: 'boolean' },
  });
  if (values.help === true) {
    io.stdout.write(`${ENDPOINTS_USAGE}\n`);
    return 0;
  }
  const [action, target, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const needsId = (): string => {
    if (target === undefined) throw new UsageError(`endpoints ${action}: the endpoint id is required`);
    return target;
  };
  const connection = connectionOf(values, io.env);
  const client = new AdminClient(connection);
  try {
    switch (action) {
      case 'add': {
        // The endpoint's URL is positional: --url names the admin API, as for every command.
        if (values.tenant === undefined || target === undefined) throw new UsageError('endpoints add: the endpoint URL and --tenant are required');
        const body: Record<string, unknown> = { tenantId: values.tenant, url: target, ...settingsOf(values, io.env), ...credentialSettings(values) };
        if (values.id !== undefined) body.id = values.id;
        if (values.scheme !== undefined) body.signatureScheme = values.scheme;
        const created = await client.post<EndpointView>('/v1/endpoints', body);
        if (values.json === true) writeJson(io, created);
        else io.stdout.write(`${show(created)}\n${givenKeyText(created.secret ?? '')}\n`);
        return 0;
      }
      case 'update': {
        if (values.scheme !== undefined) throw new UsageError('endpoints update: --scheme is for add and rotate-secret (a rotation changes the scheme)');
        const body = { ...settingsOf(values, io.env), ...credentialSettings(values) };
        if (Object.keys(body).length === 0) throw new UsageError('endpoints update: give at least one setting to change (e.g. --ordering fifo)');
        const updated = await client.patch<EndpointView>(`/v1/endpoints/${encodeURIComponent(needsId())}`, body);
        if (values.json === true) writeJson(io, updated);
        else io.stdout.write(show(updated));
        return 0;
      }
      case 'list': {
        if (target !== undefined) throw new UsageError(`unexpected argument '${target}'`);
        const { data } = await client.get<{ data: EndpointView[] }>('/v1/endpoints', { tenantId: values.tenant });
        if (values.json === true) writeJson(io, data);
        else if (data.length === 0) io.stdout.write('No endpoints.\n');
        else {
          io.stdout.write(
            table(
              ['ID', 'TENANT', 'STATUS', 'URL', 'EVENT TYPES', 'FAILING SINCE'],
              data.map((e) => [e.id, e.tenantId, statusText(e), e.url, e.eventTypes, time(e.failingSince)]),
            ),
          );
        }
        return 0;
      }
      case 'show': {
        const endpoint = await client.get<EndpointView>(`/v1/endpoints/${encodeURIComponent(needsId())}`);
        if (values.json === true) writeJson(io, endpoint);
        else io.stdout.write(show(endpoint));
        return 0;
      }
      case 'events': {
        const query = {
          after: values.after === undefined ? undefined : String(parseInteger('after', values.after, 0, Number.MAX_SAFE_INTEGER)),
          limit: values.limit === undefined ? undefined : String(parseInteger('limit', values.limit, 1, 1_000)),
        };
        const page = await client.get<SequencePage>(`/v1/endpoints/${encodeURIComponent(needsId())}/events`, query);
        if (values.json === true) writeJson(io, page);
        else if (page.data.length === 0) io.stdout.write(`Nothing numbered after ${values.after ?? 0}.\n`);
        else {
          io.stdout.write(
            table(
              ['SEQ', 'EVENT', 'TYPE', 'STATUS', 'CREATED', 'DELIVERED', 'DELIVERY'],
              page.data.map((d) => [d.sequence, d.eventId, d.eventType, d.status, time(d.createdAt), time(d.deliveredAt), d.deliveryId]),
            ),
          );
          if (page.nextAfter !== null) io.stdout.write(`More: --after ${page.nextAfter}\n`);
        }
        return 0;
      }
      case 'filter-test': {
        if (values.payload === undefined) throw new UsageError('endpoints filter-test: --payload <json> is required');
        const body: Record<string, unknown> = { payload: jsonOption('payload', values.payload) };
        if (values.type !== undefined) body.type = values.type;
        const filter = filterOf(values);
        if (filter !== undefined) body.filter = filter;
        const answer = await client.post<{ matches: boolean; failed: string | null }>(`/v1/endpoints/${encodeURIComponent(needsId())}/filter-test`, body);
        if (values.json === true) writeJson(io, answer);
        else io.stdout.write(answer.matches ? 'Matches: the endpoint would get this event.\n' : `Does not match: ${answer.failed ?? ''} failed.\n`);
        return 0;
      }
      case 'enable':
      case 'disable': {
        const endpoint = await client.post<EndpointView>(`/v1/endpoints/${encodeURIComponent(needsId())}/${action}`);
        if (values.json === true) writeJson(io, endpoint);
        else io.stdout.write(`Endpoint ${endpoint.id} ${endpoint.status}.\n`);
        return 0;
      }
      case 'rotate-secret': {
        const scheme = values.scheme === undefined ? undefined : { signatureScheme: values.scheme };
        const rotated = await client.post<EndpointView>(`/v1/endpoints/${encodeURIComponent(needsId())}/rotate-secret`, scheme);
        if (values.json === true) writeJson(io, rotated);
        else {
          io.stdout.write(
            `${rotated.id}: ${givenKeyText(rotated.secret ?? '')}\n` +
              `The previous key keeps signing until ${time(rotated.previousSecretExpiresAt)} UTC.\n`,
          );
        }
        return 0;
      }
      case undefined:
        throw new UsageError('endpoints: an action is required (add, update, list, show, events, filter-test, enable, disable, rotate-secret)');
      default:
        throw new UsageError(`endpoints: unknown action '${action}'`);
    }
  } finally {
    await client.close();
  }
}

/** The settings `add` and `update` share, as the API takes them (it validates them). */
function settingsOf(values: Record<string, string | boolean | readonly string[] | undefined>, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const text = (name: string): string | undefined => (typeof values[name] === 'string' ? values[name] : undefined);
  const body: Record<string, unknown> = {};
  const eventTypes = text('event-types');
  const retry = text('retry');
  const timeoutMs = text('timeout-ms');
  const concurrency = text('concurrency');
  const rateLimit = text('rate-limit');
  if (eventTypes !== undefined) body.eventTypes = list(eventTypes);
  if (retry !== undefined) body.retry = retryOption(retry);
  if (timeoutMs !== undefined) body.timeoutMs = parseInteger('timeout-ms', timeoutMs, 1, 10_000_000);
  if (concurrency !== undefined) body.concurrency = parseInteger('concurrency', concurrency, 1, 10_000);
  if (rateLimit !== undefined) body.rateLimit = rateLimitOption(rateLimit);
  const filter = filterOf(values);
  if (filter !== undefined) body.filter = filter;
  if (text('mode') !== undefined) body.mode = text('mode');
  if (text('ordering') !== undefined) body.ordering = text('ordering');
  if (text('description') !== undefined) body.description = text('description');
  const clientTls = clientTlsOption(text('client-cert'), text('client-key'), env);
  if (clientTls !== undefined) body.clientTls = clientTls;
  if (values['no-client-cert'] === true) {
    if (clientTls !== undefined) throw new UsageError('--no-client-cert: not with --client-cert');
    body.clientTls = null;
  }
  return body;
}

/**
 * `--client-cert file.pem --client-key key.pem`: the PEM files read here and sent to the API, which
 * checks them; an encrypted key's passphrase comes from HERALD_CLIENT_KEY_PASSPHRASE (never a flag,
 * which others could read in the process list).
 */
function clientTlsOption(certFile: string | undefined, keyFile: string | undefined, env: NodeJS.ProcessEnv): Record<string, string> | undefined {
  if (certFile === undefined && keyFile === undefined) return undefined;
  if (certFile === undefined || keyFile === undefined) throw new UsageError('--client-cert and --client-key: give both');
  const read = (flag: string, path: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      throw new UsageError(`--${flag}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const passphrase = env.HERALD_CLIENT_KEY_PASSPHRASE;
  return { cert: read('client-cert', certFile), key: read('client-key', keyFile), ...(passphrase ? { passphrase } : {}) };
}

function statusText(e: EndpointView): string {
  return e.status === 'disabled' && e.disabledReason !== null ? `disabled (${e.disabledReason})` : e.status;
}

function show(e: EndpointView): string {
  return keyValues([
    ['id', e.id],
    ['tenant', e.tenantId],
    ['url', e.url],
    ['status', statusText(e)],
    ['description', e.description],
    ['event types', e.eventTypes.length === 0 ? '* (all)' : e.eventTypes],
    ['retry', retryText(e.retry)],
    ['timeout', durationText(e.timeoutMs)],
    ['mode', e.mode],
    ['ordering', e.ordering ?? 'none'],
    ['concurrency', e.concurrency],
    ['rate limit', rateLimitText(e.rateLimit ?? null)],
    ...credentialLines(e),
    ['filter', e.filter == null ? 'none' : JSON.stringify(e.filter)],
    ['client cert', e.clientTls == null ? 'none' : `${e.clientTls.subject.replaceAll('\n', ', ')}, expires ${time(e.clientTls.notAfter)}`],
    ['failing since', time(e.failingSince)],
    ['secrets', e.secretCount],
    ...(e.signingKeys === undefined ? [] : [['signing keys', e.signingKeys.map(signingKeyText).join('; ')] as [string, string]]),
    ['created', time(e.createdAt)],
    ['updated', time(e.updatedAt)],
  ]);
}

/** What the consumer is given: a new `whsec_` (shown once) or an ed25519 key's `whpk_` (public, shown again by `show`). */
function givenKeyText(secret: string): string {
  return secret.startsWith('whpk_')
    ? `Public key (ed25519, give it to the consumer; \`endpoints show\` shows it again): ${secret}`
    : `Secret (shown once, give it to the consumer): ${secret}`;
}

/** `ed25519 whpk_… (current)`, `hmac-sha256 (until <time> UTC)`. */
function signingKeyText(key: NonNullable<EndpointView['signingKeys']>[number]): string {
  const name = key.publicKey === null ? key.scheme : `${key.scheme} ${key.publicKey}`;
  return `${name} (${key.expiresAt === null ? 'current' : `until ${time(key.expiresAt)} UTC`})`;
}

/**
 * `--retry`: a preset name, comma-separated ISO-8601 durations, or a JSON object (a formula, or
 * any retry spec with its `jitter`), passed to the API as it is: the API validates it.
 */
function retryOption(text: string): unknown {
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new UsageError(`--retry: a JSON retry policy must be valid JSON (got ${text})`);
    }
  }
  return ['default', 'aggressive', 'relaxed'].includes(text) ? { preset: text } : { schedule: list(text) };
}

/** A preset by name, a schedule as its durations (jitter added when not the default), a formula as its JSON. */
function retryText(retry: EndpointView['retry']): string {
  const jitter = retry.jitter === undefined ? '' : `, jitter ${retry.jitter}`;
  if (retry.preset !== undefined) return `${retry.preset}${jitter}`;
  if (retry.schedule !== undefined) return `${retry.schedule.join(',')}${jitter}`;
  return JSON.stringify(retry);
}

/**
 * `--filter <json>` or `--filter-file <path>`: the payload filter as JSON (`null` removes it), for
 * the API to validate; undefined when neither is given.
 */
function filterOf(values: Record<string, string | boolean | readonly string[] | undefined>): unknown {
  const text = typeof values.filter === 'string' ? values.filter : undefined;
  const path = typeof values['filter-file'] === 'string' ? values['filter-file'] : undefined;
  if (text !== undefined && path !== undefined) throw new UsageError('--filter and --filter-file: give one of them');
  if (text !== undefined) return jsonOption('filter', text);
  if (path === undefined) return undefined;
  try {
    return jsonOption('filter-file', readFileSync(path, 'utf8'));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--filter-file: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

function jsonOption(name: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new UsageError(`--${name}: must be valid JSON (got ${text.length > 80 ? `${text.slice(0, 77)}...` : text})`);
  }
}

/** Per second, minute or hour. */
const RATE_UNITS: Readonly<Record<string, number>> = { s: 1, min: 60, h: 3_600 };
const RATE_LIMIT = /^(\d+(?:\.\d+)?)\/(s|min|h)(?:,(\d+))?$/;

/**
 * `--rate-limit`: `<n>/s`, `<n>/min` or `<n>/h`, then `,<burst>` if not the default, e.g. `10/s` or
 * `10/s,20`, as `{perSecond, burst?}` for the API, which checks the bounds.
 */
function rateLimitOption(text: string): { perSecond: number; burst?: number } {
  const match = RATE_LIMIT.exec(text.trim());
  if (match === null) {
    throw new UsageError(`--rate-limit: must be <number>/s, /min or /h, then ,<burst> if wanted, e.g. 10/s or 10/s,20 (got ${JSON.stringify(text)})`);
  }
  const perSecond = Number(match[1]) / (RATE_UNITS[match[2] ?? 's'] ?? 1);
  return match[3] === undefined ? { perSecond } : { perSecond, burst: Number(match[3]) };
}

function rateLimitText(limit: { readonly perSecond: number; readonly burst: number } | null): string {
  return limit === null ? 'none' : `${Number(limit.perSecond.toPrecision(4))}/s, burst ${limit.burst}`;
}

function list(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
