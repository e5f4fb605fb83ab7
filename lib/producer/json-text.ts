/**
 * JSON text kept exactly as the producer wrote it.
 *
 * `JSON.parse` then `JSON.stringify` is not the identity: `12345678901234567890`
 * comes back as `12345678901234567000`, `1.0` as `1`, `1e2` as `100`, `-0` as
 * `0`, `"\u00e9"` as `"é"`. A payload published over HTTP must reach the
 * consumer, and be signed, byte for byte as sent, so the events body is read
 * twice: `JSON.parse` for the event fields, and the small strict scanner below
 * (RFC 8259, the grammar `JSON.parse` accepts, except that a raw lone UTF-16
 * surrogate in a string is refused: it has no UTF-8 form) for the source span
 * of each event's `payload` value, which becomes a {@link JsonText}.
 *
 * Node 20 has no `JSON.parse` source access (the TC39 proposal), hence the
 * scanner. It is iterative, so a deeply nested document cannot overflow the
 * stack, and pure: text in, spans out.
 */
import { ValidationError } from '../errors.ts';

/** Makes a JsonText from a span the scanner has already checked (the constructor stays private). */
let fromScannedSpan: (text: string, depth: number) => JsonText;

/**
 * One JSON value as text, used verbatim: `validateEventInput` stores and signs
 * `text` instead of re-serialising a parsed value.
 */
export class JsonText {
  /** The JSON text, exactly as given (no outer whitespace). */
  readonly text: string;
  /** Levels of nesting of arrays and objects: 0 for a scalar, 1 for `{}` or `[1, 2]`, 2 for `{"a": []}`. */
  readonly depth: number;

  private constructor(text: string, depth: number) {
    this.text = text;
    this.depth = depth;
  }

  static {
    fromScannedSpan = (text, depth) => new JsonText(text, depth);
  }

  /**
   * Checks that `text` is exactly one JSON value (surrounding whitespace is
   * allowed and dropped; inner whitespace is kept).
   *
   * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` and where the text stops being JSON.
   */
  static parse(text: string, field = 'payload'): JsonText {
    return withField(field, () => {
      const start = skipWhitespace(text, 0);
      const { end, depth } = scanValue(text, start);
      expectEnd(text, end);
      return new JsonText(text.slice(start, end), depth);
    });
  }

  /** The parsed value (`JSON.parse` of the text). */
  value(): unknown {
    return JSON.parse(this.text) as unknown;
  }

  toJSON(): unknown {
    return this.value();
  }
}

/** Where a value sits in a text: `text.slice(start, end)`. */
export interface JsonSpan {
  readonly start: number;
  readonly end: number;
  /** Levels of nesting inside the value, as {@link JsonText.depth}. */
  readonly depth: number;
}

/**
 * The span of each event's `payload` value in the body of `POST /v1/events`:
 * one entry when the body is an object, one per item when it is an array
 * (`undefined` for an item that is not an object or has no `payload`), none
 * for any other value. Only members of the event objects themselves count, not
 * a `payload` key nested deeper. With duplicate keys the last one wins, as in
 * `JSON.parse`; keys are compared after unescaping (`"pay\u006coad"` is `payload`).
 *
 * @throws ValidationError naming `body` when the text is not valid JSON.
 */
export function payloadSpans(text: string): Array<JsonSpan | undefined> {
  return withField('body', () => {
    const spans: Array<JsonSpan | undefined> = [];
    let pos = skipWhitespace(text, 0);
    if (text[pos] === '[') {
      pos = skipWhitespace(text, pos + 1);
      if (text[pos] === ']') {
        pos += 1;
      } else {
        for (;;) {
          const item = scanItem(text, pos);
          spans.push(item.payload);
          pos = skipWhitespace(text, item.end);
          if (text[pos] === ',') {
            pos = skipWhitespace(text, pos + 1);
            continue;
          }
          expectChar(text, pos, ']');
          pos += 1;
          break;
        }
      }
    } else {
      const item = scanItem(text, pos);
      if (text[pos] === '{') spans.push(item.payload);
      pos = item.end;
    }
    expectEnd(text, pos);
    return spans;
  });
}

/**
 * Parses the body of `POST /v1/events` (one event object or a list of them)
 * with each event's `payload` replaced by its {@link JsonText}, so it is
 * stored and sent as the producer wrote it.
 *
 * @throws ValidationError naming `body` when the text is not valid JSON.
 */
export function parseEventsBody(text: string): unknown {
  const spans = payloadSpans(text);
  const body = JSON.parse(text) as unknown;
  const events: unknown[] = Array.isArray(body) ? body : [body];
  events.forEach((event, i) => {
    const span = spans[i];
    if (span === undefined || event === null || typeof event !== 'object' || Array.isArray(event)) return;
    (event as Record<string, unknown>)['payload'] = fromScannedSpan(text.slice(span.start, span.end), span.depth);
  });
  return body;
}

/** The text stops being JSON at `offset`. Internal: turned into a ValidationError naming the field. */
class JsonSyntaxError extends Error {
  readonly offset: number;

  constructor(text: string, offset: number, expected: string) {
    const found = offset >= text.length ? 'the end' : JSON.stringify(text.slice(offset, offset + 12));
    super(`must be valid JSON: expected ${expected} at offset ${offset}, found ${found}`);
    this.offset = offset;
  }
}

function withField<T>(field: string, scan: () => T): T {
  try {
    return scan();
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw new ValidationError(field, error.message, { cause: error });
    throw error;
  }
}

/** One item of the events body: an object whose `payload` member is located, or any other value. */
function scanItem(text: string, pos: number): { end: number; payload?: JsonSpan } {
  if (text[pos] !== '{') return scanValue(text, pos);
  let payload: JsonSpan | undefined;
  pos = skipWhitespace(text, pos + 1);
  if (text[pos] === '}') return { end: pos + 1 };
  for (;;) {
    expectChar(text, pos, '"');
    const keyEnd = scanString(text, pos);
    const key = keyText(text, pos, keyEnd);
    pos = skipWhitespace(text, keyEnd);
    expectChar(text, pos, ':');
    pos = skipWhitespace(text, pos + 1);
    const value = scanValue(text, pos);
    if (key === 'payload') payload = { start: pos, end: value.end, depth: value.depth };
    pos = skipWhitespace(text, value.end);
    if (text[pos] === ',') {
      pos = skipWhitespace(text, pos + 1);
      continue;
    }
    expectChar(text, pos, '}');
    return payload === undefined ? { end: pos + 1 } : { end: pos + 1, payload };
  }
}

/** A member name, unescaped only when it has escapes (the common case is a slice). */
function keyText(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1);
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw;
}

/**
 * Scans the value starting at `pos` (no leading whitespace) and returns the
 * offset just after it and its nesting depth. Iterative: `closers` is the
 * stack of open arrays and objects.
 */
function scanValue(text: string, pos: number): { end: number; depth: number } {
  const closers: Array<']' | '}'> = [];
  let depth = 0;
  for (;;) {
    // A value is expected at pos.
    const c = text[pos];
    let closed = false;
    if (c === '{' || c === '[') {
      closers.push(c === '{' ? '}' : ']');
      depth = Math.max(depth, closers.length);
      pos = skipWhitespace(text, pos + 1);
      if (text[pos] === closers.at(-1)) {
        closers.pop();
        pos += 1;
        closed = true;
      } else if (c === '{') {
        pos = scanMemberName(text, pos);
        continue;
      } else {
        continue;
      }
    }
    if (!closed) pos = scanScalar(text, pos);
    // After a value: close what ends here, or move to the next item.
    for (;;) {
      const closer = closers.at(-1);
      if (closer === undefined) return { end: pos, depth };
      pos = skipWhitespace(text, pos);
      if (text[pos] === closer) {
        closers.pop();
        pos += 1;
        continue;
      }
      expectChar(text, pos, `',' or '${closer}'`, ',');
      pos = skipWhitespace(text, pos + 1);
      if (closer === '}') pos = scanMemberName(text, pos);
      break;
    }
  }
}

/** `"name" :` then whitespace; returns where the member's value starts. */
function scanMemberName(text: string, pos: number): number {
  expectChar(text, pos, '"');
  pos = skipWhitespace(text, scanString(text, pos));
  expectChar(text, pos, ':');
  return skipWhitespace(text, pos + 1);
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/**
 * Characters a string may hold as they are: not `"`, `\`, a control character
 * or a lone surrogate. With the `u` flag a surrogate pair is one code point
 * outside the class, and a single class under `*` runs without a backtracking
 * stack, however long the string.
 */
const PLAIN = /[^"\\\u0000-\u001f\ud800-\udfff]*/uy;
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;

function scanScalar(text: string, pos: number): number {
  const c = text[pos];
  if (c === '"') return scanString(text, pos);
  for (const literal of ['true', 'false', 'null']) {
    if (text.startsWith(literal, pos)) return pos + literal.length;
  }
  NUMBER.lastIndex = pos;
  if (NUMBER.test(text)) return NUMBER.lastIndex;
  throw new JsonSyntaxError(text, pos, 'a value');
}

/** Scans the string starting at `pos` (a `"`); returns the offset after its closing quote. */
function scanString(text: string, pos: number): number {
  pos += 1;
  for (;;) {
    PLAIN.lastIndex = pos;
    PLAIN.test(text);
    pos = PLAIN.lastIndex;
    const code = text.charCodeAt(pos);
    if (code === 0x22) return pos + 1;
    if (code === 0x5c) {
      ESCAPE.lastIndex = pos;
      if (!ESCAPE.test(text)) throw new JsonSyntaxError(text, pos, 'an escape such as \\n or \\u00e9');
      pos = ESCAPE.lastIndex;
    } else if (Number.isNaN(code)) {
      throw new JsonSyntaxError(text, pos, 'the closing \'"\' of a string');
    } else if (code < 0x20) {
      throw new JsonSyntaxError(text, pos, 'an escaped control character (\\n, \\t, \\u0000 …)');
    } else {
      // A lone surrogate cannot be encoded as UTF-8: the consumer would not receive the same text.
      throw new JsonSyntaxError(text, pos, 'a well-formed character (a lone UTF-16 surrogate has no UTF-8 form)');
    }
  }
}

function skipWhitespace(text: string, pos: number): number {
  for (;;) {
    const c = text.charCodeAt(pos);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return pos;
    pos += 1;
  }
}

function expectChar(text: string, pos: number, expected: string, char = expected): void {
  if (text[pos] !== char) throw new JsonSyntaxError(text, pos, expected.length === 1 ? `'${expected}'` : expected);
}

function expectEnd(text: string, pos: number): void {
  const end = skipWhitespace(text, pos);
  if (end !== text.length) throw new JsonSyntaxError(text, end, 'the end of the document');
}
