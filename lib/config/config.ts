/**
 * Herald's configuration: the shape, the rules, and the layering
 * `config/default.json` < `--config` file < `HERALD_*` environment < flags.
 *
 * Every key, its default and its meaning are listed in docs/CONFIGURATION.md
 * ("Configuration"). A value that breaks its rule stops the start with a
 * `ConfigError` naming the key, the value and the rule.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { durationText } from '../clock.ts';
import { isTenantWeight, TENANT_WEIGHT_RULE } from '../engine/in-flight-limiter.ts';
import { parseProxyUrl } from '../delivery/egress-proxy.ts';
import { ConfigError } from '../errors.ts';
import { RETRY_PRESETS } from '../policy/retry-schedule.ts';
import type { SecretKeySettings } from '../signing/secret-key-source.ts';
import { decodeSecretKey, SECRET_KEY_RULE } from '../signing/secret-key-text.ts';
import { isPostgresSetting, redactUri, STORE_RULE } from '../store/store-setting.ts';
import { MAX_SLOT_COUNT } from '../store/slot-count.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** `auto`: human-readable lines on a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export type RetryPresetName = keyof typeof RETRY_PRESETS;

export interface HeraldConfig {
  /**
   * `sqlite:<path>`, a `postgres://` URI (with an optional `schema` parameter), a `mongodb://` /
   * `mongodb+srv://` URI (a replica set), or `mongodb-memory-server`.
   */
  readonly store: string;
  /** Where the admin token is kept when generated. */
  readonly dataDir: string;
  readonly port: number;
  readonly host: string;
  /** Bearer token of the admin API; `null` generates one and keeps it in `dataDir/admin-token`. */
  readonly adminToken: string | null;
  /** CIDRs the sender may reach despite the SSRF guard. */
  readonly allowNetworks: readonly string[];
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;
  /** The admin API on the status port. */
  readonly api: {
    /**
     * Bytes a request body may have (a list of up to 1 000 events included);
     * a larger one is refused with 413. Each payload in it still has its own
     * `delivery.maxPayloadBytes`. @default 16777216 (16 MiB)
     */
    readonly maxRequestBytes: number;
  };
  readonly delivery: {
    /** Default per-endpoint request timeout (1–30 s). */
    readonly timeoutMs: number;
    readonly maxPayloadBytes: number;
    readonly responseBodyMaxBytes: number;
    /** Requests in flight on this node at once, shared by weighted round-robin between tenants, then round-robin between a tenant's endpoints. */
    readonly maxInFlight: number;
    /**
     * Each tenant's weight in the share of `maxInFlight`: grants in a row per turn, an integer from
     * 1 to 1000, by tenant id. A tenant not listed has weight 1. @default {}
     */
    readonly tenantWeights: Readonly<Record<string, number>>;
    /** Default per-endpoint concurrency (the most, for an endpoint with adaptive concurrency). */
    readonly concurrencyPerEndpoint: number;
    /**
     * An endpoint created without `adaptiveConcurrency` gets it, with its defaults: its requests in
     * flight follow its answers (AIMD) up to its concurrency. `false`: it is fixed at its concurrency
     * unless created or edited otherwise. @default false
     */
    readonly adaptiveConcurrency: boolean;
    readonly connectionsPerOrigin: number;
    /** Default retry preset for new endpoints. */
    readonly retry: RetryPresetName;
    /** A `410 Gone` disables its endpoint at once (Standard Webhooks); `false`: it only dead-letters the delivery. @default true */
    readonly disableOnGone: boolean;
    /**
     * An HTTP proxy every delivery leaves through in a CONNECT tunnel, `http://[user:password@]host:port`
     * (docs/DELIVERY.md, "Egress proxy"); `null`: straight to the endpoints. @default null
     */
    readonly proxy: string | null;
    /** A PEM file of CA certificates trusted besides the built-in roots, for endpoints with a private CA; `null`: none. @default null */
    readonly caFile: string | null;
  };
  readonly breaker: {
    readonly errorThresholdPercentage: number;
    readonly volumeThreshold: number;
    readonly windowMs: number;
    readonly cooldownMs: number;
  };
  readonly health: {
    readonly disableAfterMs: number;
    readonly failingThreshold: number;
    readonly failingWindowMs: number;
  };
  readonly signing: {
    readonly rotationOverlapMs: number;
    readonly threads: number;
  };
  /**
   * The key endpoint secrets are sealed with at rest (AES-256-GCM, lib/signing/secret-box.ts).
   * With neither `key` nor `keyFile`, a SQLite store's Herald generates `dataDir/secret-key`;
   * a PostgreSQL or MongoDB store's keeps secrets plain (every node needs the same key).
   */
  readonly secrets: SecretKeySettings;
  readonly engine: {
    /** The SQLite store on a thread of its own, committing writes in groups (system clock only). */
    readonly storeThread: boolean;
    readonly slotCount: number;
    readonly sweepIntervalMs: number;
    readonly pollIntervalMs: number;
    /** How often each node reads the endpoint change log, so its actors follow a change made through any node. @default 250 */
    readonly endpointSyncIntervalMs: number;
    readonly claimBatchSize: number;
    readonly claimPerEndpoint: number;
    readonly actorIdleMs: number;
    readonly tickMs: number;
    readonly leaseMs: number;
    readonly renewIntervalMs: number;
  };
  readonly retention: {
    readonly keepMs: number;
    readonly purgeIntervalMs: number;
    /**
     * How long the delivery charts' per-endpoint minutes are kept (deleted by the same purge, every
     * `purgeIntervalMs`); at least a day, the longest chart's window. @default 172800000 (48 h)
     */
    readonly deliveryMinutesKeepMs: number;
  };
  /** The review of the dead-letter queue (`lib/dead-letters/review-watch.ts`). */
  readonly deadLetters: {
    /** A dead letter nobody has acknowledged, discarded or replayed for longer emits `deadletters.unreviewed`. @default 86400000 (24 h) */
    readonly reviewWithinMs: number;
    /** How often the oldest unreviewed dead letter is looked at. @default 60000 */
    readonly checkIntervalMs: number;
  };
  /** OpenTelemetry traces (docs/OBSERVABILITY.md, "Traces"): spans only when the application registered an SDK. */
  readonly tracing: {
    /**
     * `false`: no spans, no trace context stored with the events published through Herald, no
     * `traceparent` sent, even with an SDK registered. @default true
     */
    readonly enabled: boolean;
  };
  /** The operator webhook: operational events POSTed, signed, to one URL (off while `webhookUrl` is null). */
  readonly operator: {
    readonly webhookUrl: string | null;
    /** `whsec_` secret signing them; required with `webhookUrl`. */
    readonly secret: string | null;
    readonly maxAttempts: number;
    readonly backoffMs: number;
    readonly timeoutMs: number;
  };
}

/** A partial configuration, as a file, the environment or flags give it. */
export type ConfigOverrides = {
  -readonly [K in keyof HeraldConfig]?: HeraldConfig[K] extends readonly string[]
    ? readonly string[]
    : HeraldConfig[K] extends object | null
      ? HeraldConfig[K] extends null | string
        ? HeraldConfig[K]
        : Partial<HeraldConfig[K]>
      : HeraldConfig[K];
};

const DEFAULT_FILE = fileURLToPath(new URL('../../config/default.json', import.meta.url));

const SECOND = 1_000;
const DAY = 24 * 60 * 60 * SECOND;

type Rule = { readonly min: number; readonly max: number };

/** Room a request body needs beyond its largest payload: the event's other fields. */
const REQUEST_ENVELOPE_BYTES = 64 * 1024;

/** Integer ranges for every numeric key. */
const NUMBER_RULES: Readonly<Record<string, Rule>> = {
  port: { min: 0, max: 65_535 },
  'api.maxRequestBytes': { min: 1_024, max: 256 * 1024 * 1024 },
  'delivery.timeoutMs': { min: SECOND, max: 30 * SECOND },
  'delivery.maxPayloadBytes': { min: 1, max: 16 * 1024 * 1024 },
  'delivery.responseBodyMaxBytes': { min: 0, max: 1024 * 1024 },
  'delivery.maxInFlight': { min: 1, max: 100_000 },
  'delivery.concurrencyPerEndpoint': { min: 1, max: 256 },
  'delivery.connectionsPerOrigin': { min: 1, max: 1_024 },
  'breaker.errorThresholdPercentage': { min: 1, max: 100 },
  'breaker.volumeThreshold': { min: 1, max: 100_000 },
  'breaker.windowMs': { min: SECOND, max: DAY },
  'breaker.cooldownMs': { min: 100, max: DAY },
  'health.disableAfterMs': { min: SECOND, max: 365 * DAY },
  'health.failingThreshold': { min: 1, max: 1_000_000 },
  'health.failingWindowMs': { min: SECOND, max: 30 * DAY },
  'signing.rotationOverlapMs': { min: 0, max: 30 * DAY },
  'signing.threads': { min: 1, max: 64 },
  'engine.slotCount': { min: 1, max: MAX_SLOT_COUNT },
  'engine.sweepIntervalMs': { min: 10, max: 60 * SECOND },
  'engine.pollIntervalMs': { min: 5, max: 60 * SECOND },
  'engine.endpointSyncIntervalMs': { min: 10, max: 60 * SECOND },
  'engine.claimBatchSize': { min: 1, max: 10_000 },
  'engine.claimPerEndpoint': { min: 1, max: 10_000 },
  'engine.actorIdleMs': { min: 100, max: DAY },
  'engine.tickMs': { min: 1, max: 10 * SECOND },
  'engine.leaseMs': { min: 100, max: 10 * 60 * SECOND },
  'engine.renewIntervalMs': { min: 10, max: 5 * 60 * SECOND },
  'retention.keepMs': { min: SECOND, max: 3650 * DAY },
  'retention.purgeIntervalMs': { min: SECOND, max: DAY },
  'retention.deliveryMinutesKeepMs': { min: DAY, max: 3650 * DAY },
  'deadLetters.reviewWithinMs': { min: 60 * SECOND, max: 30 * DAY },
  'deadLetters.checkIntervalMs': { min: SECOND, max: 60 * 60 * SECOND },
  'operator.maxAttempts': { min: 1, max: 20 },
  'operator.backoffMs': { min: 10, max: 10 * 60 * SECOND },
  'operator.timeoutMs': { min: 100, max: 60 * SECOND },
};

/** `must be an integer from 1 to 100`; for a duration (a key in `…Ms`) with each end in human units too: `from 1000 (1 s) to 86400000 (1 d)`. */
function rangeRule(key: string, { min, max }: Rule): string {
  if (!key.endsWith('Ms')) return `must be an integer from ${min} to ${max}`;
  return `must be an integer of milliseconds from ${min} (${durationText(min)}) to ${max} (${durationText(max)})`;
}

/** Keys that are true or false. */
const BOOLEAN_KEYS: readonly string[] = ['engine.storeThread', 'delivery.disableOnGone', 'delivery.adaptiveConcurrency', 'tracing.enabled'];

/** Reads `config/default.json`: every key with its default. */
export function defaultConfig(): HeraldConfig {
  return validateConfig(JSON.parse(readFileSync(DEFAULT_FILE, 'utf8')));
}

/** Reads a JSON config file; a missing file or bad JSON is a ConfigError naming the file. */
export function readConfigFile(path: string): ConfigOverrides {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ConfigError('--config', path, `cannot be read (${(cause as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (!isRecord(parsed)) throw new Error('not an object');
    return parsed as ConfigOverrides;
  } catch {
    throw new ConfigError('--config', path, 'must hold a JSON object');
  }
}

/** The overrides the `HERALD_*` environment variables give. */
export function configFromEnv(env: NodeJS.ProcessEnv): ConfigOverrides {
  const out: ConfigOverrides = {};
  if (env.HERALD_STORE) out.store = env.HERALD_STORE;
  if (env.HERALD_DATA_DIR) out.dataDir = env.HERALD_DATA_DIR;
  if (env.HERALD_PORT !== undefined && env.HERALD_PORT !== '') out.port = numberFrom('HERALD_PORT', env.HERALD_PORT);
  if (env.HERALD_HOST) out.host = env.HERALD_HOST;
  if (env.HERALD_ADMIN_TOKEN) out.adminToken = env.HERALD_ADMIN_TOKEN;
  if (env.HERALD_ALLOW_NETWORKS !== undefined) out.allowNetworks = listFrom(env.HERALD_ALLOW_NETWORKS);
  if (env.HERALD_LOG_LEVEL) out.logLevel = env.HERALD_LOG_LEVEL as LogLevel;
  if (env.HERALD_LOG_FORMAT) out.logFormat = env.HERALD_LOG_FORMAT as LogFormat;
  if (env.HERALD_PROXY) out.delivery = { ...out.delivery, proxy: env.HERALD_PROXY };
  const operator: { webhookUrl?: string; secret?: string } = {};
  if (env.HERALD_OPERATOR_WEBHOOK_URL) operator.webhookUrl = env.HERALD_OPERATOR_WEBHOOK_URL;
  if (env.HERALD_OPERATOR_SECRET) operator.secret = env.HERALD_OPERATOR_SECRET;
  if (Object.keys(operator).length > 0) out.operator = operator;
  const secrets: { key?: string; keyFile?: string; previousKeys?: string[] } = {};
  if (env.HERALD_SECRET_KEY) secrets.key = env.HERALD_SECRET_KEY;
  if (env.HERALD_SECRET_KEY_FILE) secrets.keyFile = env.HERALD_SECRET_KEY_FILE;
  if (env.HERALD_SECRET_KEYS_PREVIOUS !== undefined) secrets.previousKeys = listFrom(env.HERALD_SECRET_KEYS_PREVIOUS);
  if (Object.keys(secrets).length > 0) out.secrets = secrets;
  return out;
}

/** Merges layers left to right (later wins), then validates the result. */
export function resolveConfig(...layers: readonly ConfigOverrides[]): HeraldConfig {
  let merged: Record<string, unknown> = JSON.parse(readFileSync(DEFAULT_FILE, 'utf8'));
  for (const layer of layers) merged = deepMerge(merged, layer as Record<string, unknown>);
  return validateConfig(merged);
}

/** Checks every key against its rule; unknown keys are refused so a typo is not silently ignored. */
export function validateConfig(raw: unknown): HeraldConfig {
  if (!isRecord(raw)) throw new ConfigError('(root)', raw, 'must be an object');
  const reference = JSON.parse(readFileSync(DEFAULT_FILE, 'utf8')) as Record<string, unknown>;
  checkKeys(raw, reference, '');

  const store = raw.store;
  if (typeof store !== 'string' || !(store.startsWith('sqlite:') || store.startsWith('mongodb') || isPostgresSetting(store))) {
    throw new ConfigError('store', store === undefined ? store : redactUri(String(store)), STORE_RULE);
  }
  if (store.startsWith('sqlite:') && store.length === 'sqlite:'.length) {
    throw new ConfigError('store', store, 'must name a file after sqlite:');
  }
  requireString(raw, 'dataDir');
  requireString(raw, 'host');
  if (raw.adminToken !== null && (typeof raw.adminToken !== 'string' || raw.adminToken.length < 16)) {
    throw new ConfigError('adminToken', '(hidden)', 'must be null (generated) or a string of at least 16 characters');
  }
  if (!Array.isArray(raw.allowNetworks) || !raw.allowNetworks.every((x) => typeof x === 'string')) {
    throw new ConfigError('allowNetworks', raw.allowNetworks, 'must be a list of CIDRs such as 127.0.0.0/8');
  }
  if (!LOG_LEVELS.includes(raw.logLevel as LogLevel)) {
    throw new ConfigError('logLevel', raw.logLevel, `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  if (!LOG_FORMATS.includes(raw.logFormat as LogFormat)) {
    throw new ConfigError('logFormat', raw.logFormat, `must be one of ${LOG_FORMATS.join(', ')}`);
  }
  validateOperator(raw.operator as Record<string, unknown>);
  validateSecrets(raw.secrets as Record<string, unknown>);
  const delivery = raw.delivery as Record<string, unknown>;
  if (typeof delivery.retry !== 'string' || !Object.hasOwn(RETRY_PRESETS, delivery.retry)) {
    throw new ConfigError('delivery.retry', delivery.retry, `must be one of ${Object.keys(RETRY_PRESETS).join(', ')}`);
  }
  for (const [key, rule] of Object.entries(NUMBER_RULES)) {
    const value = readPath(raw, key);
    if (typeof value !== 'number' || !Number.isInteger(value) || value < rule.min || value > rule.max) {
      throw new ConfigError(key, value, rangeRule(key, rule));
    }
  }
  const maxRequestBytes = readPath(raw, 'api.maxRequestBytes') as number;
  const maxPayloadBytes = readPath(raw, 'delivery.maxPayloadBytes') as number;
  if (maxRequestBytes < maxPayloadBytes + REQUEST_ENVELOPE_BYTES) {
    throw new ConfigError(
      'api.maxRequestBytes',
      maxRequestBytes,
      `must be at least delivery.maxPayloadBytes + ${REQUEST_ENVELOPE_BYTES} (${maxPayloadBytes + REQUEST_ENVELOPE_BYTES}), so that an event with the largest payload can be published`,
    );
  }
  for (const key of BOOLEAN_KEYS) {
    const value = readPath(raw, key);
    if (typeof value !== 'boolean') throw new ConfigError(key, value, 'must be true or false');
  }
  for (const [tenantId, weight] of Object.entries(delivery.tenantWeights as Record<string, unknown>)) {
    if (!isTenantWeight(weight)) throw new ConfigError(`delivery.tenantWeights.${tenantId}`, weight, TENANT_WEIGHT_RULE);
  }
  if (delivery.proxy !== null) parseProxyUrl(delivery.proxy, 'delivery.proxy');
  if (delivery.caFile !== null && (typeof delivery.caFile !== 'string' || delivery.caFile === '')) {
    throw new ConfigError('delivery.caFile', delivery.caFile, 'must be null or the path of a PEM file of CA certificates');
  }
  const engine = raw.engine as Record<string, number>;
  if ((engine.renewIntervalMs ?? 0) * 2 > (engine.leaseMs ?? 0)) {
    throw new ConfigError('engine.renewIntervalMs', engine.renewIntervalMs, `must be at most half of engine.leaseMs (${durationText((engine.leaseMs ?? 0) / 2)})`);
  }
  return deepFreeze(raw) as unknown as HeraldConfig;
}

function validateOperator(operator: Record<string, unknown>): void {
  const { webhookUrl, secret } = operator;
  if (webhookUrl !== null) {
    let protocol = '';
    try {
      protocol = typeof webhookUrl === 'string' ? new URL(webhookUrl).protocol : '';
    } catch {
      protocol = '';
    }
    if (protocol !== 'http:' && protocol !== 'https:') {
      throw new ConfigError('operator.webhookUrl', webhookUrl, 'must be null (off) or an http(s) URL');
    }
  }
  if (secret !== null && (typeof secret !== 'string' || !/^whsec_[A-Za-z0-9+/]{16,}={0,2}$/.test(secret))) {
    throw new ConfigError('operator.secret', '(hidden)', 'must be null or whsec_ followed by base64 (at least 12 bytes)');
  }
  if (webhookUrl !== null && secret === null) {
    throw new ConfigError('operator.secret', null, 'must be set when operator.webhookUrl is (the operator webhook is signed)');
  }
}

/** Keys are checked here, never shown: a ConfigError prints `(hidden)` in place of the value. */
function validateSecrets(secrets: Record<string, unknown>): void {
  const { key, keyFile, previousKeys } = secrets;
  if (key !== null && (typeof key !== 'string' || decodeSecretKey(key) === undefined)) {
    throw new ConfigError('secrets.key', '(hidden)', `must be null or ${SECRET_KEY_RULE} (HERALD_SECRET_KEY)`);
  }
  if (keyFile !== null && (typeof keyFile !== 'string' || keyFile === '')) {
    throw new ConfigError('secrets.keyFile', keyFile, 'must be null or the path of a file holding the key (HERALD_SECRET_KEY_FILE)');
  }
  if (key !== null && keyFile !== null) {
    throw new ConfigError('secrets.keyFile', keyFile, 'must be null when secrets.key is set: give the key one way');
  }
  if (!Array.isArray(previousKeys)) {
    throw new ConfigError('secrets.previousKeys', '(hidden)', `must be a list of keys, each ${SECRET_KEY_RULE} (HERALD_SECRET_KEYS_PREVIOUS, comma-separated)`);
  }
  for (const [i, previous] of previousKeys.entries()) {
    if (typeof previous !== 'string' || decodeSecretKey(previous) === undefined) {
      throw new ConfigError(`secrets.previousKeys[${i}]`, '(hidden)', `must be ${SECRET_KEY_RULE} (HERALD_SECRET_KEYS_PREVIOUS, comma-separated)`);
    }
  }
}

/** Objects whose keys are not Herald's own. */
const OPEN_KEYS: readonly string[] = ['delivery.tenantWeights'];

function checkKeys(raw: Record<string, unknown>, reference: Record<string, unknown>, prefix: string): void {
  for (const key of Object.keys(raw)) {
    const path = prefix + key;
    if (!Object.hasOwn(reference, key)) throw new ConfigError(path, raw[key], 'is not a known key (see docs/CONFIGURATION.md)');
    const ref = reference[key];
    if (isRecord(ref)) {
      if (!isRecord(raw[key])) throw new ConfigError(path, raw[key], 'must be an object');
      // Its keys are the operator's (tenant ids), checked by their own rule.
      if (OPEN_KEYS.includes(path)) continue;
      checkKeys(raw[key] as Record<string, unknown>, ref, `${path}.`);
    }
  }
}

function requireString(raw: Record<string, unknown>, key: string): void {
  if (typeof raw[key] !== 'string' || raw[key] === '') throw new ConfigError(key, raw[key], 'must be a non-empty string');
}

function numberFrom(key: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim())) throw new ConfigError(key, text, 'must be a whole number');
  return value;
}

function listFrom(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function readPath(raw: Record<string, unknown>, path: string): unknown {
  let value: unknown = raw;
  for (const part of path.split('.')) value = isRecord(value) ? value[part] : undefined;
  return value;
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    out[key] = isRecord(value) && isRecord(base[key]) ? deepMerge(base[key] as Record<string, unknown>, value) : value;
  }
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
