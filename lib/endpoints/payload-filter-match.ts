/**
 * Payload filters compiled and evaluated: what each operator means (the grammar and its
 * validation: ./payload-filter.ts). A filter is compiled once into a function per filter object
 * (remembered against it, so once per loaded endpoint) and then asked per event, which costs no
 * more than its conditions: no parse of the filter, no allocation.
 *
 * The semantics, close to MongoDB's basic operators, without type coercion:
 *
 * - a path reads the event's `type`, or walks its parsed `payload` one segment at a time: a key of
 *   an object (its own), or an index of a list (a segment written as a whole number, `items.0`);
 *   anything else (a key a list does not have, a scalar in the way) makes the path *missing*. A
 *   list is never searched: `payload.items.sku` is missing, and a literal compares the whole list;
 * - `$eq` (or a literal) holds when the value is deeply equal: same JSON type, numbers and strings
 *   equal, lists of equal items in the same order, objects with the same keys (in any order) and
 *   equal values; `$ne` is its negation; `$in` holds when the value equals one of the list, `$nin`
 *   when it equals none;
 * - `$gt $gte $lt $lte` compare a number with a number, a string with a string (by UTF-16 code
 *   units, as JavaScript does, so ISO-8601 times of one format compare in time order); a value of
 *   any other type (a numeric string against a number, say) does not hold;
 * - a missing path: `$exists: false`, `$ne` and `$nin` hold, every other operator does not (so a
 *   missing path is not `null`: `{"payload.x": null}` needs the key there, with `null`);
 * - keys of one object all hold (and), `$and` all of its filters, `$or` at least one of them;
 * - a payload that is not JSON (which publishing never lets in) is missing as a whole.
 *
 * What a filter answers is `null` when the event matches, otherwise the condition that failed first
 * (in the filter's own order), named as written: `payload.amount.$gte`, `payload.country` for a
 * literal, `$or` when none of its filters holds, `$and[1].payload.x.$lt` inside an `$and`.
 * A part it does not know (a filter stored by a newer Herald) holds: a consumer may get an event
 * too many, never lose one.
 */
import type { JsonValue, PayloadFilter } from '../model.ts';
import { isOperatorObject, pathOf } from './payload-filter.ts';

/** What a path reads when it leads nowhere. */
export const MISSING: unique symbol = Symbol('missing');
type Value = JsonValue | typeof MISSING;

/** What a filter looks at: the event's type and its parsed payload, either possibly missing. */
export interface FilterSubject {
  readonly type: string | typeof MISSING;
  readonly payload: Value;
}

/** `null`: the event matches; otherwise the name of the condition that failed first. */
export type FilterTest = (subject: FilterSubject) => string | null;

const compiled = new WeakMap<PayloadFilter, FilterTest>();

/** The filter compiled, on its first use for this object (an endpoint's, loaded once per read of it). */
export function filterTestOf(filter: PayloadFilter): FilterTest {
  let test = compiled.get(filter);
  if (test === undefined) {
    test = compilePayloadFilter(filter);
    compiled.set(filter, test);
  }
  return test;
}

/** An event's subject: its payload text parsed once (missing when it is not JSON, never a throw). */
export function eventSubject(type: string, payload: string): FilterSubject {
  let parsed: Value = MISSING;
  try {
    parsed = JSON.parse(payload) as JsonValue;
  } catch {
    // Publishing validates payloads: this cannot happen, and fan-out must not stop if it does.
  }
  return { type, payload: parsed };
}

/** Compiles a validated filter (what it does not know holds, see above). */
export function compilePayloadFilter(filter: PayloadFilter): FilterTest {
  return compileLevel(filter, '');
}

type Test = FilterTest;

function compileLevel(filter: { readonly [key: string]: JsonValue }, prefix: string): Test {
  const tests: Test[] = [];
  for (const [key, condition] of Object.entries(filter)) {
    const name = prefix + key;
    if (key === '$and' || key === '$or') {
      const inner = (Array.isArray(condition) ? condition : []).map((f, i) => compileLevel(isRecord(f) ? f : {}, `${name}[${i}].`));
      if (key === '$and') tests.push(allOf(inner));
      else if (inner.length > 0) tests.push((s) => (inner.some((test) => test(s) === null) ? null : name));
      continue;
    }
    const path = pathOf(key);
    if (path === undefined) continue;
    const read = path.root === 'type' ? (s: FilterSubject): Value => s.type : payloadReader(path.segments);
    if (isOperatorObject(condition)) {
      for (const [operator, operand] of Object.entries(condition)) tests.push(fieldTest(read, operator, operand, `${name}.${operator}`));
    } else {
      tests.push(fieldTest(read, '$eq', condition, name));
    }
  }
  return allOf(tests);
}

function allOf(tests: readonly Test[]): Test {
  if (tests.length === 0) return () => null;
  if (tests.length === 1) return tests[0]!;
  return (s) => {
    for (const test of tests) {
      const failed = test(s);
      if (failed !== null) return failed;
    }
    return null;
  };
}

function fieldTest(read: (s: FilterSubject) => Value, operator: string, operand: JsonValue, name: string): Test {
  const holds = (predicate: (value: Value) => boolean): Test => (s) => (predicate(read(s)) ? null : name);
  switch (operator) {
    case '$eq': {
      const equal = equalTo(operand);
      return holds((v) => v !== MISSING && equal(v));
    }
    case '$ne': {
      const equal = equalTo(operand);
      return holds((v) => v === MISSING || !equal(v));
    }
    case '$in': {
      const among = amongOf(operand);
      return holds((v) => v !== MISSING && among(v));
    }
    case '$nin': {
      const among = amongOf(operand);
      return holds((v) => v === MISSING || !among(v));
    }
    case '$exists':
      return operand === false ? holds((v) => v === MISSING) : holds((v) => v !== MISSING);
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return typeof operand === 'number' || typeof operand === 'string' ? holds(ordered(operator, operand)) : () => null;
    default:
      return () => null;
  }
}

/**
 * `$gt`…`$lte` against a number (numbers only) or a string (strings only). The casts to number are
 * for the compiler: with both sides of one type, JavaScript compares strings by code units.
 */
function ordered(operator: '$gt' | '$gte' | '$lt' | '$lte', operand: number | string): (value: Value) => boolean {
  const kind = typeof operand;
  const bound = operand as number;
  switch (operator) {
    case '$gt':
      return (v) => typeof v === kind && (v as number) > bound;
    case '$gte':
      return (v) => typeof v === kind && (v as number) >= bound;
    case '$lt':
      return (v) => typeof v === kind && (v as number) < bound;
    case '$lte':
      return (v) => typeof v === kind && (v as number) <= bound;
  }
}

function equalTo(operand: JsonValue): (value: JsonValue) => boolean {
  if (operand === null || typeof operand !== 'object') return (v) => v === operand;
  return (v) => deepEqual(v, operand);
}

/** Membership in a list: scalars through a set, lists and objects one by one. */
function amongOf(operand: JsonValue): (value: JsonValue) => boolean {
  const items = Array.isArray(operand) ? (operand as readonly JsonValue[]) : [operand];
  const scalars = new Set<JsonValue>(items.filter((item) => item === null || typeof item !== 'object'));
  const compound = items.filter((item) => item !== null && typeof item === 'object');
  if (compound.length === 0) return (v) => scalars.has(v);
  return (v) => scalars.has(v) || compound.some((item) => deepEqual(v, item));
}

function payloadReader(segments: readonly string[]): (s: FilterSubject) => Value {
  if (segments.length === 0) return (s) => s.payload;
  const indexes = segments.map((segment) => (/^(0|[1-9][0-9]{0,8})$/.test(segment) ? Number(segment) : -1));
  return (s) => {
    let value: Value = s.payload;
    for (let i = 0; i < segments.length; i += 1) {
      if (value === MISSING || value === null || typeof value !== 'object') return MISSING;
      if (Array.isArray(value)) {
        const index = indexes[i]!;
        if (index < 0 || index >= value.length) return MISSING;
        value = (value as readonly JsonValue[])[index]!;
      } else {
        const key = segments[i]!;
        if (!Object.hasOwn(value, key)) return MISSING;
        value = (value as { readonly [key: string]: JsonValue })[key]!;
      }
    }
    return value;
  };
}

/** Equality of JSON values: same type, lists item by item, objects key by key in any order. */
export function deepEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return (a as readonly JsonValue[]).every((item, i) => deepEqual(item, (b as readonly JsonValue[])[i]!));
  }
  const left = a as { readonly [key: string]: JsonValue };
  const right = b as { readonly [key: string]: JsonValue };
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  return keys.every((key) => Object.hasOwn(right, key) && deepEqual(left[key]!, right[key]!));
}

function isRecord(value: JsonValue): value is { readonly [key: string]: JsonValue } {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
