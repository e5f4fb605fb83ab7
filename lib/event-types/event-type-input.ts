/**
 * What the admin may send to create or change an event type (`POST`, `PATCH /v1/event-types`),
 * checked before anything reaches the store. Pure: bad input throws `ValidationError(field, rule)`.
 * Whether a schema compiles is `schema-check.ts`'s to say.
 */
import { ValidationError } from '../errors.ts';
import type { JsonSchemaObject } from '../store/event-type-port.ts';

/** An exact event type as endpoints filter on it, e.g. `lead.stage_changed`: no wildcard. */
export const EVENT_TYPE_NAME = /^[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*$/;

export const EVENT_TYPE_LIMITS = Object.freeze({
  /** Characters of a name, as an event's `type`. */
  name: 256,
  /** Characters of a description. */
  description: 512,
  /** Characters of a deprecation note. */
  deprecationNote: 512,
  /** UTF-8 bytes of a schema, serialised. */
  schemaBytes: 64 * 1024,
});

export interface NewEventTypeInput {
  readonly name: string;
  readonly description: string;
  readonly schema: JsonSchemaObject | null;
  readonly deprecated: boolean;
  readonly deprecationNote: string | null;
}

export interface EventTypeChangeInput {
  readonly description?: string;
  readonly schema?: JsonSchemaObject | null;
  readonly deprecated?: boolean;
  readonly deprecationNote?: string | null;
}

const CREATABLE = ['name', 'description', 'schema', 'deprecated', 'deprecationNote'] as const;
const EDITABLE = ['description', 'schema', 'deprecated', 'deprecationNote'] as const;

/** @throws ValidationError naming the field and the rule. */
export function validateNewEventType(input: unknown): NewEventTypeInput {
  const body = objectOf(input, CREATABLE);
  const change = changeOf(body);
  return {
    name: eventTypeName(body['name']),
    description: change.description ?? '',
    schema: change.schema ?? null,
    deprecated: change.deprecated ?? false,
    deprecationNote: change.deprecationNote ?? null,
  };
}

/** @throws ValidationError naming the field and the rule; an empty change is refused. */
export function validateEventTypeChange(input: unknown): EventTypeChangeInput {
  const body = objectOf(input, EDITABLE);
  if (Object.keys(body).length === 0) throw new ValidationError('body', `must change at least one of ${EDITABLE.join(', ')}`);
  return changeOf(body);
}

/** @throws ValidationError (`name`) unless it is an exact event type of at most 256 characters. */
export function eventTypeName(value: unknown, field = 'name'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > EVENT_TYPE_LIMITS.name || !EVENT_TYPE_NAME.test(value)) {
    throw new ValidationError(
      field,
      `must be an exact event type of at most ${EVENT_TYPE_LIMITS.name} characters: dot-separated words of letters, digits and _ : - (no wildcard), e.g. "lead.stage_changed" (got ${JSON.stringify(value)})`,
    );
  }
  return value;
}

function changeOf(body: Readonly<Record<string, unknown>>): EventTypeChangeInput {
  const out: { -readonly [K in keyof EventTypeChangeInput]: EventTypeChangeInput[K] } = {};
  if (body['description'] !== undefined) out.description = text(body['description'], 'description', EVENT_TYPE_LIMITS.description);
  if (body['schema'] !== undefined) out.schema = body['schema'] === null ? null : schemaOf(body['schema']);
  if (body['deprecated'] !== undefined) {
    if (typeof body['deprecated'] !== 'boolean') throw new ValidationError('deprecated', `must be true or false (got ${JSON.stringify(body['deprecated'])})`);
    out.deprecated = body['deprecated'];
  }
  if (body['deprecationNote'] !== undefined) {
    if (out.deprecated !== true) throw new ValidationError('deprecationNote', 'is given only with "deprecated": true');
    out.deprecationNote = body['deprecationNote'] === null ? null : text(body['deprecationNote'], 'deprecationNote', EVENT_TYPE_LIMITS.deprecationNote);
  }
  return out;
}

function schemaOf(value: unknown): JsonSchemaObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError('schema', `must be a JSON Schema (draft 2020-12) object, or null for none (got ${Array.isArray(value) ? 'an array' : typeof value})`);
  }
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > EVENT_TYPE_LIMITS.schemaBytes) {
    throw new ValidationError('schema', `must be at most ${EVENT_TYPE_LIMITS.schemaBytes} bytes of JSON (got ${bytes})`);
  }
  return value as JsonSchemaObject;
}

function text(value: unknown, field: string, maxLength: number): string {
  if (typeof value !== 'string') throw new ValidationError(field, `must be a string (got ${typeof value})`);
  if (value.length > maxLength) throw new ValidationError(field, `must be at most ${maxLength} characters (got ${value.length})`);
  return value;
}

function objectOf(input: unknown, allowed: readonly string[]): Readonly<Record<string, unknown>> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ValidationError('body', 'must be a JSON object');
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) throw new ValidationError(key, `is not a known field (allowed: ${allowed.join(', ')})`);
  }
  return input as Readonly<Record<string, unknown>>;
}
