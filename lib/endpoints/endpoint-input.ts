/**
 * Validation of endpoint input from the admin API or the library: every error
 * names the field and the rule it broke. Pure: defaults come in, data goes out.
 */
import { durationText } from '../clock.ts';
import { ValidationError } from '../errors.ts';
import {
  ADAPTIVE_CONCURRENCY_DEFAULTS, DeliveryMode, EndpointOrdering, SignatureScheme, type AdaptiveConcurrency, type Endpoint, type EndpointAuth, type EndpointHeader, type PayloadFilter, type RateLimit,
  type RetrySpec,
} from '../model.ts';
import { validateEndpointUrl } from '../delivery/validate-url.ts';
import { resolveRetrySpec } from '../policy/retry-policy.ts';
import { validateAdaptiveConcurrency } from './adaptive-concurrency.ts';
import { validateAuth } from './endpoint-auth-input.ts';
import { checkHeadersBesideAuth, validateHeaders } from './endpoint-headers.ts';
import { validatePayloadFilter } from './payload-filter.ts';
import { validateClientTls, type ClientTlsInput } from './client-tls-input.ts';
import { validateRateLimit } from './rate-limit.ts';

export interface EndpointDefaults {
  readonly timeoutMs: number;
  readonly concurrency: number;
  readonly retry: RetrySpec;
  /** Whether an endpoint created without `adaptiveConcurrency` gets it, with its defaults (`delivery.adaptiveConcurrency`). */
  readonly adaptiveConcurrency: boolean;
}

/** The fields a caller chooses when creating an endpoint; Herald sets the rest. */
export type NewEndpointFields = Pick<
  Endpoint,
  'tenantId' | 'url' | 'description' | 'eventTypes' | 'retry' | 'timeoutMs' | 'mode' | 'ordering' | 'concurrency' | 'rateLimit' | 'adaptiveConcurrency' | 'filter'
  | 'headers' | 'auth'
> & {
  readonly id?: string;
  /** How its first key signs. @default 'hmac-sha256' */
  readonly signatureScheme: SignatureScheme;
  /** Its client certificate, the key in clear: sealed by the admin before it is stored. */
  readonly clientTls?: ClientTlsInput;
};

export type EndpointChanges = Partial<Omit<NewEndpointFields, 'id' | 'tenantId' | 'rateLimit' | 'adaptiveConcurrency' | 'signatureScheme' | 'filter' | 'headers' | 'auth' | 'clientTls'>> & {
  /** A new limit (replacing the old one whole), or `null` to lift it. */
  readonly rateLimit?: RateLimit | null;
  /** Adaptive concurrency (settings replacing the old ones whole), or `null` for a fixed concurrency. */
  readonly adaptiveConcurrency?: AdaptiveConcurrency | null;
  /** A new payload filter (replacing the old one whole), or `null` to remove it. */
  readonly filter?: PayloadFilter | null;
  /** New custom headers (replacing the old ones whole; secret values not yet sealed), or `null` for none. */
  readonly headers?: readonly EndpointHeader[] | null;
  /** New authentication (replacing the old one whole; its secret not yet sealed), or `null` for none. */
  readonly auth?: EndpointAuth | null;
  /** A client certificate (replacing the old one whole), or `null` to remove it. */
  readonly clientTls?: ClientTlsInput | null;
};

export const TIMEOUT_MIN_MS = 1_000;
export const TIMEOUT_MAX_MS = 30_000;
const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
const EVENT_FILTER_PATTERN = /^(\*|[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*(\.\*)?)$/;
const EDITABLE = ['url', 'description', 'eventTypes', 'retry', 'timeoutMs', 'mode', 'ordering', 'concurrency', 'rateLimit', 'adaptiveConcurrency', 'filter', 'headers', 'auth', 'clientTls'] as const;
const CREATABLE = ['id', 'tenantId', 'signatureScheme', ...EDITABLE] as const;

export function validateNewEndpoint(input: unknown, defaults: EndpointDefaults): NewEndpointFields {
  const body = requireObject(input);
  rejectUnknown(body, CREATABLE);
  const changes = validateChanges(body);
  checkHeadersBesideAuth(changes.headers ?? undefined, changes.auth != null);
  const id = body.id === undefined ? undefined : identifier(body.id, 'id');
  return {
    ...(id === undefined ? {} : { id }),
    tenantId: identifier(body.tenantId, 'tenantId'),
    signatureScheme: body.signatureScheme === undefined ? SignatureScheme.HMAC_SHA256 : signatureScheme(body.signatureScheme, 'signatureScheme'),
    url: changes.url ?? validateEndpointUrl(body.url, 'url'),
    description: changes.description ?? '',
    eventTypes: changes.eventTypes ?? [],
    retry: changes.retry ?? defaults.retry,
    timeoutMs: changes.timeoutMs ?? defaults.timeoutMs,
    mode: changes.mode ?? DeliveryMode.AT_LEAST_ONCE,
    ordering: changes.ordering ?? EndpointOrdering.NONE,
    concurrency: changes.concurrency ?? defaults.concurrency,
    // Absent or null: no limit.
    ...(changes.rateLimit == null ? {} : { rateLimit: changes.rateLimit }),
    // Absent: as the node's default says; null: fixed.
    ...adaptiveOf(changes.adaptiveConcurrency, defaults.adaptiveConcurrency),
    // Absent or null: every event its event types take.
    ...(changes.filter == null ? {} : { filter: changes.filter }),
    // Absent, null or empty: none.
    ...(changes.headers == null ? {} : { headers: changes.headers }),
    ...(changes.auth == null ? {} : { auth: changes.auth }),
    ...(changes.clientTls == null ? {} : { clientTls: changes.clientTls }),
  };
}

export function validateEndpointChanges(input: unknown): EndpointChanges {
  const body = requireObject(input);
  rejectUnknown(body, EDITABLE);
  return validateChanges(body);
}

/** The same id rule as tenants and events: 1–128 of A–Z a–z 0–9 _ . : - */
export function identifier(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') throw new ValidationError(field, 'is required and must be a non-empty string');
  if (!ID_PATTERN.test(value)) throw new ValidationError(field, `must be 1-128 characters of A-Z a-z 0-9 _ . : - (got ${JSON.stringify(value.slice(0, 140))})`);
  return value;
}

/** A signature scheme: `hmac-sha256` or `ed25519`. */
export function signatureScheme(value: unknown, field: string): SignatureScheme {
  const schemes = Object.values(SignatureScheme) as string[];
  if (typeof value !== 'string' || !schemes.includes(value)) {
    throw new ValidationError(field, `must be one of ${schemes.join(', ')} (got ${JSON.stringify(value)})`);
  }
  return value as SignatureScheme;
}

function validateChanges(body: Record<string, unknown>): EndpointChanges {
  const out: { -readonly [K in keyof EndpointChanges]: EndpointChanges[K] } = {};
  if (body.url !== undefined) out.url = validateEndpointUrl(body.url, 'url');
  if (body.description !== undefined) {
    if (typeof body.description !== 'string' || body.description.length > 512) {
      throw new ValidationError('description', 'must be a string of at most 512 characters');
    }
    out.description = body.description;
  }
  if (body.eventTypes !== undefined) out.eventTypes = eventTypes(body.eventTypes);
  if (body.retry !== undefined) out.retry = resolveRetrySpec(body.retry, 'retry');
  if (body.timeoutMs !== undefined) {
    out.timeoutMs = millisecondsIn(body.timeoutMs, 'timeoutMs', TIMEOUT_MIN_MS, TIMEOUT_MAX_MS);
  }
  if (body.mode !== undefined) {
    const modes = Object.values(DeliveryMode) as string[];
    if (typeof body.mode !== 'string' || !modes.includes(body.mode)) {
      throw new ValidationError('mode', `must be one of ${modes.join(', ')} (got ${JSON.stringify(body.mode)})`);
    }
    out.mode = body.mode as DeliveryMode;
  }
  if (body.ordering !== undefined) {
    const orderings = Object.values(EndpointOrdering) as string[];
    if (typeof body.ordering !== 'string' || !orderings.includes(body.ordering)) {
      throw new ValidationError('ordering', `must be one of ${orderings.join(', ')} (got ${JSON.stringify(body.ordering)})`);
    }
    out.ordering = body.ordering as EndpointOrdering;
  }
  if (body.concurrency !== undefined) out.concurrency = integerIn(body.concurrency, 'concurrency', 1, 256);
  if (body.rateLimit !== undefined) out.rateLimit = body.rateLimit === null ? null : validateRateLimit(body.rateLimit, 'rateLimit');
  if (body.adaptiveConcurrency !== undefined) {
    out.adaptiveConcurrency = body.adaptiveConcurrency === null ? null : validateAdaptiveConcurrency(body.adaptiveConcurrency, 'adaptiveConcurrency');
  }
  if (body.filter !== undefined) out.filter = body.filter === null ? null : validatePayloadFilter(body.filter, 'filter');
  if (body.headers !== undefined) {
    const headers = body.headers === null ? [] : validateHeaders(body.headers, 'headers');
    out.headers = headers.length === 0 ? null : headers;
  }
  if (body.auth !== undefined) out.auth = body.auth === null ? null : validateAuth(body.auth, 'auth');
  if (body.clientTls !== undefined) out.clientTls = body.clientTls === null ? null : validateClientTls(body.clientTls, 'clientTls');
  return out;
}

function adaptiveOf(given: AdaptiveConcurrency | null | undefined, byDefault: boolean): { adaptiveConcurrency?: AdaptiveConcurrency } {
  if (given === null || (given === undefined && !byDefault)) return {};
  return { adaptiveConcurrency: given ?? { ...ADAPTIVE_CONCURRENCY_DEFAULTS } };
}

function eventTypes(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > 100) throw new ValidationError('eventTypes', 'must be a list of at most 100 event types');
  return value.map((item, i) => {
    if (typeof item !== 'string' || item.length > 256 || !EVENT_FILTER_PATTERN.test(item)) {
      throw new ValidationError(`eventTypes[${i}]`, `must be an event type, "prefix.*" or "*" (got ${JSON.stringify(item)})`);
    }
    return item;
  });
}

/** As {@link integerIn}, the ends also in human units: `from 1000 (1 s) to 30000 (30 s)`. */
function millisecondsIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(field, `must be an integer of milliseconds from ${min} (${durationText(min)}) to ${max} (${durationText(max)}) (got ${JSON.stringify(value)})`);
  }
  return value;
}

function integerIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(field, `must be an integer from ${min} to ${max} (got ${JSON.stringify(value)})`);
  }
  return value;
}

function requireObject(input: unknown): Record<string, unknown> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new ValidationError('body', 'must be a JSON object');
  return input as Record<string, unknown>;
}

function rejectUnknown(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw new ValidationError(key, `is not a known field (allowed: ${allowed.join(', ')})`);
  }
}
