/**
 * Validation of an operator's triage (acknowledge, discard) from the admin
 * API or the library: `{note, by}` for one dead letter, `{ids, note, by}` for
 * many. Every error names the field and the rule it broke. Pure.
 */
import { ValidationError } from '../errors.ts';

export const TRIAGE_LIMITS = Object.freeze({
  /** The note says why: a sentence or a paragraph, not a document. */
  noteMaxChars: 2_000,
  /** Who: a name, an e-mail address, a ticket's assignee. */
  byMaxChars: 200,
  /** Dead letters named in one request, as for a bulk replay by id. */
  maxIds: 1_000,
});

export interface TriageInput {
  readonly note: string;
  readonly by: string;
}

/** `{note, by}`: each a string with something other than spaces, within its length; nothing else. */
export function validateTriageInput(input: unknown): TriageInput {
  const body = requireObject(input);
  rejectUnknown(body, ['note', 'by']);
  return fields(body);
}

/** `{ids, note, by}`: 1 to 1 000 dead-letter ids besides the note and who. */
export function validateBulkTriageInput(input: unknown): TriageInput & { readonly ids: readonly string[] } {
  const body = requireObject(input);
  rejectUnknown(body, ['ids', 'note', 'by']);
  const { ids } = body;
  if (!Array.isArray(ids) || ids.length < 1 || ids.length > TRIAGE_LIMITS.maxIds) {
    throw new ValidationError('ids', `must be a list of 1 to ${TRIAGE_LIMITS.maxIds} dead-letter ids (got ${describe(ids)})`);
  }
  ids.forEach((id: unknown, i) => {
    if (typeof id !== 'string' || id === '') throw new ValidationError(`ids[${i}]`, `must be a dead-letter id, a non-empty string (got ${describe(id)})`);
  });
  return { ids: ids as string[], ...fields(body) };
}

function fields(body: Record<string, unknown>): TriageInput {
  return {
    note: text(body.note, 'note', TRIAGE_LIMITS.noteMaxChars, true),
    by: text(body.by, 'by', TRIAGE_LIMITS.byMaxChars, false),
  };
}

/** Trimmed; `by` is one line (no control character), a note may hold line breaks. */
function text(value: unknown, field: string, maxChars: number, multiline: boolean): string {
  if (typeof value !== 'string') throw new ValidationError(field, `must be a string (got ${describe(value)})`);
  const trimmed = value.trim();
  if (trimmed === '') throw new ValidationError(field, 'must not be empty');
  const length = [...trimmed].length;
  if (length > maxChars) throw new ValidationError(field, `must be at most ${maxChars} characters (got ${length})`);
  const control = multiline ? /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/ : /[\u0000-\u001f\u007f]/;
  if (control.test(trimmed)) {
    throw new ValidationError(field, multiline ? 'must not hold control characters other than line breaks and tabs' : 'must be one line without control characters');
  }
  return trimmed;
}

function requireObject(input: unknown): Record<string, unknown> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new ValidationError('body', `must be a JSON object with note and by (got ${describe(input)})`);
  }
  return input as Record<string, unknown>;
}

function rejectUnknown(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw new ValidationError(key, `is not a known field (allowed: ${allowed.join(', ')})`);
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  return value === null ? 'null' : typeof value === 'object' ? 'an object' : JSON.stringify(value);
}
