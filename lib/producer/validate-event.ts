/**
 * Checks one event a producer wants to publish, before anything touches the
 * store. Pure: the same input always gives the same result or the same error,
 * which names the field and the rule it broke.
 */
import { PayloadTooLargeError, ValidationError } from '../errors.ts';
import { newEventId } from '../ids.ts';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { JsonText } from './json-text.ts';

/** An event as a producer hands it to `publish()`. */
export interface EventInput {
  readonly tenantId: string;
  /** Dotted type such as `invoice.paid`; endpoints filter on it. */
  readonly type: string;
  /**
   * Any JSON value; serialised once here and sent byte for byte on every
   * attempt. A {@link JsonText} is used verbatim (the admin API passes the
   * payload's text as the request held it).
   */
  readonly payload: unknown;
  /** The producer's idempotency key: publishing the same id again returns the stored event. */
  readonly id?: string;
  /** Deliver to this endpoint only, instead of fanning out by type. */
  readonly endpointId?: string;
  /**
   * Events with the same key are delivered in order to an endpoint that asks for it (FIFO); any
   * text of 1 to 200 characters. Copied onto every delivery of the event.
   */
  readonly orderingKey?: string;
}

/** A validated event, its payload serialised. */
export interface ValidEventInput {
  readonly tenantId: string;
  readonly type: string;
  readonly payloadJson: string;
  readonly id?: string;
  readonly endpointId?: string;
  readonly orderingKey?: string;
}

/** The fields an event may have; any other is refused, so a typo (`tenantID`) is not silently dropped. */
export const EVENT_FIELDS = Object.freeze(['tenantId', 'type', 'payload', 'id', 'endpointId', 'orderingKey'] as const);

/** Levels of nesting of arrays and objects a payload may have (`{"a": [1]}` has 2). */
export const MAX_PAYLOAD_DEPTH = 64;

const TOKEN = /^[A-Za-z0-9_.:-]+$/;
const TOKEN_RULE = 'may contain only letters, digits and _ . : -';

/** Field rules, as a table so the limits are stated once. */
const LIMITS = Object.freeze({
  tenantId: 128,
  type: 256,
  id: 128,
  endpointId: 128,
  orderingKey: 200,
});

/**
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the field and rule:
 *   an unknown field, a missing or malformed one, a payload that is not JSON
 *   or is nested deeper than {@link MAX_PAYLOAD_DEPTH} levels.
 * @throws PayloadTooLargeError (`HERALD_PAYLOAD_TOO_LARGE`) when the serialised
 *   payload exceeds `limits.maxPayloadBytes` UTF-8 bytes.
 */
export function validateEventInput(input: unknown, limits: { readonly maxPayloadBytes: number }): ValidEventInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new ValidationError('event', 'must be an object with tenantId, type and payload');
  }
  const fields = input as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    if (!(EVENT_FIELDS as readonly string[]).includes(key)) {
      throw new ValidationError(key, `is not a known field (allowed: ${EVENT_FIELDS.join(', ')})`);
    }
  }
  const tenantId = token(fields, 'tenantId', LIMITS.tenantId, true);
  const type = token(fields, 'type', LIMITS.type, true);
  const id = token(fields, 'id', LIMITS.id, false);
  const endpointId = optionalString(fields, 'endpointId', LIMITS.endpointId);
  const orderingKey = optionalString(fields, 'orderingKey', LIMITS.orderingKey);

  if (!('payload' in fields)) throw new ValidationError('payload', 'is required');
  const payload = fields['payload'];
  let payloadJson: string;
  if (payload instanceof JsonText) {
    checkDepth(payload.depth);
    payloadJson = payload.text;
  } else {
    payloadJson = serialise(payload);
  }
  const sizeBytes = Buffer.byteLength(payloadJson, 'utf8');
  if (sizeBytes > limits.maxPayloadBytes) throw new PayloadTooLargeError('payload', sizeBytes, limits.maxPayloadBytes);

  return {
    tenantId,
    type,
    payloadJson,
    ...(id === undefined ? {} : { id }),
    ...(endpointId === undefined ? {} : { endpointId }),
    ...(orderingKey === undefined ? {} : { orderingKey }),
  };
}

function token(fields: Record<string, unknown>, field: string, maxLength: number, required: true): string;
function token(fields: Record<string, unknown>, field: string, maxLength: number, required: false): string | undefined;
function token(fields: Record<string, unknown>, field: string, maxLength: number, required: boolean): string | undefined {
  const value = optionalString(fields, field, maxLength);
  if (value === undefined) {
    if (required) throw new ValidationError(field, 'is required');
    return undefined;
  }
  if (!TOKEN.test(value)) throw new ValidationError(field, `${TOKEN_RULE} (got ${JSON.stringify(value)})`);
  return value;
}

function optionalString(fields: Record<string, unknown>, field: string, maxLength: number): string | undefined {
  const value = fields[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ValidationError(field, `must be a string (got ${typeof value})`);
  if (value.length === 0) throw new ValidationError(field, 'must not be empty');
  if (value.length > maxLength) {
    throw new ValidationError(field, `must be at most ${maxLength} characters (got ${value.length})`);
  }
  return value;
}

/**
 * JSON.stringify silently drops functions and symbols and writes NaN as null;
 * a payload that would not survive a round trip is refused instead, so the
 * consumer receives exactly what the producer meant.
 */
function serialise(payload: unknown): string {
  const rule = 'must be JSON (objects, arrays, strings, finite numbers, booleans, null)';
  let depth: number;
  try {
    depth = nestingDepth(payload);
  } catch (error) {
    if (!(error instanceof NotJson)) throw error;
    throw new ValidationError('payload', `${rule}; it refers to itself`);
  }
  checkDepth(depth);
  let json: string | undefined;
  try {
    json = JSON.stringify(payload, (_key, value: unknown) => {
      if (typeof value === 'function' || typeof value === 'symbol') throw new NotJson();
      if (typeof value === 'number' && !Number.isFinite(value)) throw new NotJson();
      return value;
    });
  } catch (error) {
    // BigInt makes JSON.stringify throw a TypeError (cycles were refused above).
    throw new ValidationError('payload', rule, { cause: error });
  }
  if (json === undefined) throw new ValidationError('payload', rule);
  return json;
}

class NotJson extends Error {}

function checkDepth(depth: number): void {
  if (depth > MAX_PAYLOAD_DEPTH) {
    throw new ValidationError('payload', `must be nested at most ${MAX_PAYLOAD_DEPTH} levels of arrays and objects deep (got ${depth})`);
  }
}

/**
 * Levels of nesting of arrays and objects in a value, as JSON.stringify would
 * write it (an object with `toJSON`, such as a Date, counts as a scalar).
 * Iterative, so a value nested 100 000 levels deep is measured rather than
 * overflowing the stack; each object is measured once, so a value sharing
 * sub-objects costs its distinct objects, not its serialised size. A value
 * that contains itself throws NotJson.
 */
function nestingDepth(root: unknown): number {
  const children = (value: unknown): Iterator<unknown> | undefined => {
    if (value === null || typeof value !== 'object' || typeof (value as { toJSON?: unknown }).toJSON === 'function') return undefined;
    return (Array.isArray(value) ? value : Object.values(value))[Symbol.iterator]();
  };
  const rootChildren = children(root);
  if (rootChildren === undefined) return 0;
  /** Depth of each object measured so far. */
  const measured = new Map<object, number>();
  /** The objects being measured: the path from the root. */
  const stack: Array<{ readonly value: object; readonly children: Iterator<unknown>; deepest: number }> = [
    { value: root as object, children: rootChildren, deepest: 0 },
  ];
  const onPath = new Set<object>([root as object]);
  for (;;) {
    const frame = stack.at(-1) as (typeof stack)[number];
    const next = frame.children.next();
    if (next.done === true) {
      const depth = frame.deepest + 1;
      stack.pop();
      onPath.delete(frame.value);
      measured.set(frame.value, depth);
      const parent = stack.at(-1);
      if (parent === undefined) return depth;
      parent.deepest = Math.max(parent.deepest, depth);
      continue;
    }
    const inner = children(next.value);
    if (inner === undefined) continue;
    const child = next.value as object;
    if (onPath.has(child)) throw new NotJson();
    const known = measured.get(child);
    if (known !== undefined) {
      frame.deepest = Math.max(frame.deepest, known);
      continue;
    }
    onPath.add(child);
    stack.push({ value: child, children: inner, deepest: 0 });
  }
}

/**
 * Validates one event or a list, all before anything is written. In a list an
 * error names the item: `[3].type: …`.
 */
export function validateEventInputs(input: unknown, limits: { readonly maxPayloadBytes: number }): ValidEventInput[] {
  const inputs: readonly unknown[] = Array.isArray(input) ? input : [input];
  return inputs.map((one, i) => {
    try {
      return validateEventInput(one, limits);
    } catch (error) {
      if (inputs.length > 1 && error instanceof ValidationError) {
        throw new ValidationError(`[${i}].${error.field}`, error.rule, { code: error.code, cause: error });
      }
      throw error;
    }
  });
}

/** The outbox event a validated input becomes when it is published at `createdAt`, with the producer's trace context. */
export function outboxEventOf(valid: ValidEventInput, createdAt: number, traceContext: TraceContext | null = null): OutboxEvent {
  return {
    id: valid.id ?? newEventId(createdAt),
    tenantId: valid.tenantId,
    type: valid.type,
    payload: valid.payloadJson,
    createdAt,
    endpointId: valid.endpointId ?? null,
    orderingKey: valid.orderingKey ?? null,
    traceContext,
  };
}
