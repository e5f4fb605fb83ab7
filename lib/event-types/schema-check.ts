/**
 * JSON Schema (draft 2020-12) for event payloads, with Ajv: a schema is compiled once and the
 * compiled check is kept (by the schema's JSON text, so one schema seen by several connections or
 * catalog reloads compiles once); a payload that fails names where and why, as every publish error
 * does: `field` is `payload` followed by the JSON Pointer (RFC 6901) of the first failing value,
 * `rule` Ajv's message and keyword.
 *
 * Ajv runs with `strict: false` (unknown keywords are ignored, as the specification says), every
 * format of `ajv-formats` checked, no remote `$ref` (one that does not resolve inside the schema is
 * refused when the schema is given), and schemas are never registered by their `$id`, so two types
 * may share one.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { ValidationError } from '../errors.ts';
import type { JsonSchemaObject } from '../store/event-type-port.ts';

/** Compiled schemas kept at most; the oldest goes first (a catalog holds far fewer). */
const MAX_COMPILED = 512;

const ajv = new Ajv2020({ strict: false, addUsedSchema: false, allErrors: false, logger: false });
formats.default(ajv);

/** By the schema's JSON text. */
const compiled = new Map<string, ValidateFunction>();

/**
 * The compiled check of `schema`, from the cache when it was compiled before.
 * @throws ValidationError (`field`, default `schema`) with Ajv's reason when the schema does not compile.
 */
export function compiledSchema(schema: JsonSchemaObject, field = 'schema'): ValidateFunction {
  const text = JSON.stringify(schema);
  const known = compiled.get(text);
  if (known !== undefined) return known;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } catch (error) {
    throw new ValidationError(field, `must be a JSON Schema (draft 2020-12) that compiles: ${(error as Error).message}`, { cause: error });
  }
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value as string);
  compiled.set(text, validate);
  return validate;
}

/**
 * Checks one payload (parsed JSON) against a compiled schema.
 * @param prefix put before `payload` in the field: `[3].` for the fourth event of a list, else ''.
 * @throws ValidationError naming `payload/<pointer>` and the rule, e.g. `payload/amount: must be >= 0 (minimum)`.
 */
export function checkPayload(validate: ValidateFunction, payload: unknown, prefix: string): void {
  if (validate(payload)) return;
  const first = validate.errors?.[0];
  if (first === undefined) throw new ValidationError(`${prefix}payload`, 'must match the schema of its event type');
  throw new ValidationError(`${prefix}payload${pointerOf(first)}`, `${first.message ?? 'must match the schema'} (${first.keyword})`);
}

/**
 * The JSON Pointer of the value an error is about. A missing or unexpected property is named
 * itself (`/amount` for a missing `amount`), since that is what the producer has to fix.
 */
export function pointerOf(error: Pick<ErrorObject, 'instancePath' | 'keyword' | 'params'>): string {
  const params = error.params as Record<string, unknown>;
  const property = params['missingProperty'] ?? params['additionalProperty'] ?? params['unevaluatedProperty'];
  return typeof property === 'string' ? `${error.instancePath}/${escapePointer(property)}` : error.instancePath;
}

/** A property name as a JSON Pointer token: `~` as `~0`, `/` as `~1`. */
export function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}
