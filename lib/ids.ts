/**
 * Identifiers, and their short forms for people. Endpoint ids are random;
 * event ids begin with their creation time; a delivery's id is derived from
 * its (event, endpoint) pair so that fan-out run twice creates nothing twice,
 * and begins with the event's time.
 *
 * Why time first: SQLite indexes ids in B-trees. Random ids land on a random
 * page each, so a batch of 100 new events dirtied about 100 pages per index,
 * each written to the WAL at commit; ids that grow with time append to the
 * last few pages, which makes fan-out markedly cheaper.
 */
import { createHash, randomUUID } from 'node:crypto';

/** A new random id such as `ep_3f2a…` (a UUID v4 without dashes); `htk` is a tenant token's. */
export function newId(prefix: 'ep' | 'dl' | 'node' | 'htk'): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`;
}

/** The creation time as 12 hex digits: sorts like the time (epoch ms up to the year 10889). */
function timePrefix(at: number): string {
  return Math.max(0, Math.floor(at)).toString(16).padStart(12, '0');
}

/**
 * A new event id such as `evt_019a3f…`: 12 hex digits of `now` (ms), then 80 random bits; 32 hex
 * digits in all. The random digits are a UUID v4's first 12 and last 8: its digits 12 and 16 are
 * fixed (version `4`, variant `8`–`b`), and the end is what a short form shows ({@link shortIds}).
 */
export function newEventId(now: number): string {
  const random = randomUUID().replaceAll('-', '');
  return `evt_${timePrefix(now)}${random.slice(0, 12)}${random.slice(24)}`;
}

/**
 * The delivery id of one (event, endpoint) pair: the same inputs always give
 * the same id. `eventCreatedAt` (fixed for an event) only orders it.
 */
export function deliveryIdFor(eventId: string, endpointId: string, eventCreatedAt: number): string {
  const digest = createHash('sha256').update(eventId).update('\0').update(endpointId).digest('base64url');
  return `dlv_${timePrefix(eventCreatedAt)}${digest.slice(0, 20)}`;
}

/** The slot an endpoint hashes into (FNV-1a, 32 bit). */
export function slotOf(endpointId: string, slotCount: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < endpointId.length; i++) {
    hash ^= endpointId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % slotCount;
}

/**
 * Short forms: what tells ids apart is their end. Events of one run share
 * the leading time digits (`evt_019a3f…` for minutes on end) and so do their
 * deliveries; every id here ends in random (or digest) characters. A short
 * form is therefore the kind prefix, an ellipsis and the tail, as git shows
 * commits by their first characters: `evt_…a3f9c2`.
 */
const KIND_PREFIX = /^[a-z]+_/;

/** The fewest tail characters a short form shows. @default 6 (24 random bits when hex) */
export const SHORT_ID_MIN_CHARS = 6;

/** The short form of `id` with `tailChars` of its end: `evt_…a3f9c2`, or the whole id when the ellipsis would hide little. */
function shortForm(id: string, tailChars: number): string {
  const prefix = KIND_PREFIX.exec(id)?.[0] ?? '';
  const body = id.slice(prefix.length);
  return body.length <= tailChars + 1 ? id : `${prefix}…${body.slice(-tailChars)}`;
}

/**
 * The short forms of ids shown together (a table, a page), keyed by id: all of
 * one length, the fewest tail characters (at least `minChars`) at which no two
 * ids share a tail. Ids of different kinds (`evt_`, `dlv_`) never clash.
 */
export function shortIds(ids: Iterable<string>, minChars = SHORT_ID_MIN_CHARS): Map<string, string> {
  const distinct = [...new Set(ids)];
  const longest = Math.max(0, ...distinct.map((id) => id.length));
  let tailChars = Math.max(1, minChars);
  for (; tailChars < longest; tailChars++) {
    if (new Set(distinct.map((id) => tailKey(id, tailChars))).size === distinct.length) break;
  }
  return new Map(distinct.map((id) => [id, shortForm(id, tailChars)]));
}

/** What a reader compares: the kind and the shown tail (an id shown whole counts by its tail too). */
function tailKey(id: string, tailChars: number): string {
  const prefix = KIND_PREFIX.exec(id)?.[0] ?? '';
  return `${prefix} ${id.slice(prefix.length).slice(-tailChars)}`;
}

/**
 * Short forms for a running output (a log, the demo), where ids arrive one by
 * one. An id keeps the form it was first shown with, and no two ids ever share
 * one: a new id whose tail is taken gets a longer tail. `minChars` should
 * make that rare, so forms stay the same length: with 8 hex characters
 * (32 random bits) two of 10 000 events share a tail with a chance of about 1 %.
 */
export class ShortIds {
  readonly #minChars: number;
  readonly #shown = new Map<string, string>();
  readonly #taken = new Set<string>();

  /** @param minChars the fewest tail characters shown. @default 8 */
  constructor(minChars = 8) {
    this.#minChars = Math.max(1, minChars);
  }

  /** The short form of `id`: the same every time it is asked, and no other id's. */
  of(id: string): string {
    const known = this.#shown.get(id);
    if (known !== undefined) return known;
    let form = shortForm(id, this.#minChars);
    for (let tailChars = this.#minChars + 1; this.#taken.has(form) && form !== id; tailChars++) form = shortForm(id, tailChars);
    this.#shown.set(id, form);
    this.#taken.add(form);
    return form;
  }
}
