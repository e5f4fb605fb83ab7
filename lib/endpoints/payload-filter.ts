/**
 * The grammar of an endpoint's payload `filter`, and its validation. Pure: a JSON value in, the
 * same filter out (a plain copy), or a `ValidationError` naming the place inside the filter
 * (`filter.payload.amount.$gte`, `filter.$or[1].type`) and the rule it broke.
 *
 *   filter    = { key: condition, … }         at least one key; every condition must hold
 *   key       = "type" | "payload" | "payload.<segment>(.<segment>)*"  (a segment: an object key,
 *               or an array index written as a number, `payload.items.0.sku`)
 *             | "$or" | "$and"                 with a non-empty list of filters
 *   condition = operators | literal            a literal (anything but an object with `$` keys) means `$eq`
 *   operators = { "$eq" | "$ne": any JSON, "$gt" | "$gte" | "$lt" | "$lte": number or string,
 *                 "$in" | "$nin": non-empty list of any JSON, "$exists": boolean }  (each must hold)
 *
 * Conditions on `type` compare strings only. What each operator means, missing paths included, is
 * lib/endpoints/payload-filter-match.ts's; the limits are below.
 */
import { ValidationError } from '../errors.ts';
import type { JsonValue, PayloadFilter } from '../model.ts';

/** The filter as compact JSON text, in UTF-8 bytes, at most. */
export const FILTER_MAX_BYTES = 16 * 1024;
/** Conditions at most: each operator on a path (a literal is one `$eq`), and each `$or`/`$and`. */
export const FILTER_MAX_CONDITIONS = 100;
/** Nesting of JSON objects and arrays at most, the filter itself being the first level. */
export const FILTER_MAX_DEPTH = 16;
/** Characters of a path at most. */
export const FILTER_MAX_PATH_LENGTH = 256;

/** The operators a condition on a path may use. */
export const FIELD_OPERATORS = ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists'] as const;
export type FieldOperator = (typeof FIELD_OPERATORS)[number];
/** The operators that join filters, beside paths. */
export const LOGICAL_OPERATORS = ['$or', '$and'] as const;

const ORDERED: readonly string[] = ['$gt', '$gte', '$lt', '$lte'];
const LISTS: readonly string[] = ['$in', '$nin'];

/**
 * Checks a filter and answers a plain copy of it.
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` or the place inside it.
 */
export function validatePayloadFilter(value: unknown, field = 'filter'): PayloadFilter {
  const budget = { conditions: 0 };
  checkFilter(value, field, 1, budget);
  const text = JSON.stringify(value);
  const bytes = Buffer.byteLength(text);
  if (bytes > FILTER_MAX_BYTES) throw new ValidationError(field, `must be at most ${FILTER_MAX_BYTES} bytes as JSON (got ${bytes})`);
  return JSON.parse(text) as PayloadFilter;
}

/** Whether an object is a condition's operators (some key starts with `$`) rather than a literal. */
export function isOperatorObject(value: unknown): value is Record<string, JsonValue> {
  return isObject(value) && Object.keys(value).some((key) => key.startsWith('$'));
}

/** `type` or `payload`, then the segments after `payload`; undefined when `key` is no path. */
export function pathOf(key: string): { readonly root: 'type' | 'payload'; readonly segments: readonly string[] } | undefined {
  if (key === 'type') return { root: 'type', segments: [] };
  if (key === 'payload') return { root: 'payload', segments: [] };
  if (!key.startsWith('payload.')) return undefined;
  return { root: 'payload', segments: key.slice('payload.'.length).split('.') };
}

function checkFilter(value: unknown, at: string, depth: number, budget: { conditions: number }): void {
  if (!isObject(value)) throw new ValidationError(at, `must be an object of conditions keyed by path, e.g. {"payload.amount": {"$gte": 100}} (got ${shown(value)})`);
  deeper(at, depth);
  const keys = Object.keys(value);
  if (keys.length === 0) throw new ValidationError(at, 'must hold at least one condition (null removes the filter)');
  for (const key of keys) {
    const place = `${at}.${key}`;
    const condition = value[key];
    if (key.startsWith('$')) {
      if (!(LOGICAL_OPERATORS as readonly string[]).includes(key)) {
        throw new ValidationError(place, `is not an operator allowed beside paths (allowed: ${LOGICAL_OPERATORS.join(', ')}; the others go under a path)`);
      }
      count(place, budget);
      if (!Array.isArray(condition) || condition.length === 0) throw new ValidationError(place, `must be a non-empty list of filters (got ${shown(condition)})`);
      deeper(place, depth + 1);
      condition.forEach((inner, i) => checkFilter(inner, `${place}[${i}]`, depth + 2, budget));
      continue;
    }
    checkPath(key, place);
    checkCondition(key === 'type', condition, place, depth + 1, budget);
  }
}

function checkPath(key: string, place: string): void {
  const path = pathOf(key);
  if (path === undefined) {
    throw new ValidationError(place, `must be a path starting with "payload." or "type", or $or/$and (got ${shown(key)})`);
  }
  if (key.length > FILTER_MAX_PATH_LENGTH) throw new ValidationError(place, `must be a path of at most ${FILTER_MAX_PATH_LENGTH} characters (got ${key.length})`);
  if (path.segments.some((segment) => segment === '')) throw new ValidationError(place, 'must not have an empty segment (two dots, or a dot at the end)');
}

function checkCondition(isType: boolean, condition: unknown, place: string, depth: number, budget: { conditions: number }): void {
  if (!isOperatorObject(condition)) {
    count(place, budget);
    checkOperand(isType, condition, place, depth);
    return;
  }
  deeper(place, depth);
  for (const [operator, operand] of Object.entries(condition)) {
    const at = `${place}.${operator}`;
    if (!(FIELD_OPERATORS as readonly string[]).includes(operator)) {
      const rule = operator.startsWith('$')
        ? (LOGICAL_OPERATORS as readonly string[]).includes(operator)
          ? `is allowed only beside paths, e.g. {"$or": [{"payload.a": 1}, {"payload.b": 2}]}`
          : `is not a known operator (allowed: ${FIELD_OPERATORS.join(', ')})`
        : 'cannot sit beside operators: to compare with an object, write {"$eq": {…}}';
      throw new ValidationError(at, rule);
    }
    count(at, budget);
    if (operator === '$exists') {
      if (typeof operand !== 'boolean') throw new ValidationError(at, `must be true or false (got ${shown(operand)})`);
    } else if (ORDERED.includes(operator)) {
      if (isType ? typeof operand !== 'string' : typeof operand !== 'string' && !isFiniteNumber(operand)) {
        throw new ValidationError(at, `must be ${isType ? 'a string' : 'a number or a string'} (got ${shown(operand)})`);
      }
    } else if (LISTS.includes(operator)) {
      if (!Array.isArray(operand) || operand.length === 0) throw new ValidationError(at, `must be a non-empty list of values (got ${shown(operand)})`);
      deeper(at, depth + 1);
      operand.forEach((item, i) => checkOperand(isType, item, `${at}[${i}]`, depth + 2));
    } else {
      checkOperand(isType, operand, at, depth + 1);
    }
  }
}

/** A value compared with: any JSON (a string only, for `type`), within the depth. */
function checkOperand(isType: boolean, value: unknown, at: string, depth: number): void {
  if (isType) {
    if (typeof value !== 'string') throw new ValidationError(at, `must be a string: an event type is one (got ${shown(value)})`);
    return;
  }
  checkJson(value, at, depth);
}

function checkJson(value: unknown, at: string, depth: number): void {
  if (value === null || typeof value === 'string' || typeof value === 'boolean' || isFiniteNumber(value)) return;
  if (Array.isArray(value)) {
    deeper(at, depth);
    value.forEach((item, i) => checkJson(item, `${at}[${i}]`, depth + 1));
    return;
  }
  if (isObject(value)) {
    deeper(at, depth);
    for (const [key, item] of Object.entries(value)) checkJson(item, `${at}.${key}`, depth + 1);
    return;
  }
  throw new ValidationError(at, `must be a JSON value: a number, string, boolean, null, list or object (got ${typeof value === 'number' ? String(value) : typeof value})`);
}

function deeper(at: string, depth: number): void {
  if (depth > FILTER_MAX_DEPTH) throw new ValidationError(at, `must nest at most ${FILTER_MAX_DEPTH} levels of objects and lists`);
}

function count(at: string, budget: { conditions: number }): void {
  budget.conditions += 1;
  if (budget.conditions > FILTER_MAX_CONDITIONS) throw new ValidationError(at, `is one condition too many: a filter holds at most ${FILTER_MAX_CONDITIONS}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = JSON.stringify(value) ?? typeof value;
  } catch {
    text = typeof value;
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
