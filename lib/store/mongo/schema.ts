/**
 * The MongoDB schema, in one place: the collections, the shape of their
 * documents and every index, shared by the store and by producers that
 * publish into the outbox inside their own transactions. Times are epoch
 * milliseconds (numbers), as everywhere in Herald; the two TTL indexes need a
 * BSON date, so attempts and dead letters also carry `at` (a `Date` of
 * `startedAt` / `createdAt`).
 *
 * {@link ensureSchema} creates the collections and their indexes up front:
 * producers insert events inside their own transactions, which cannot create
 * a collection when they write across shards, and would otherwise write into
 * one with no indexes yet. Any process may call it at any time.
 */
import type { Db, IndexDescription, ObjectId } from 'mongodb';
import type { ClientTls, Outcome, ReplayJobFilter, ReplayJobState, RetrySpec, SigningSecret, TraceContext, TriageState } from '../../model.ts';
import { MongoErrorCode, serverErrorCode } from './mongo-errors.ts';

/**
 * Bumped when a migration is needed; stored in `meta` under `schema_version`. 2: dead letters carry
 * their `triage` ({@link migrateDeadLetterTriage}); 3: failure kinds ({@link migrateFailureKinds});
 * 4: tenant tokens (a new collection and its index, which {@link ensureSchema} creates: no data moves);
 * 5: the `delivery_minutes` collection and its indexes (created like every collection, no document
 * to change); 7: an index of the waiting events by tenant; 8: sequence numbers per endpoint — the
 * `endpoint_sequences` collection and the deliveries' `(endpointId, sequence)` index (deliveries
 * written before it have no `sequence`, and numbering starts at 1 for every endpoint from there: no
 * document to change); 10: the `replay_jobs` collection and an index of the live replays per
 * endpoint (created like every collection: no document to change); 11: FIFO endpoints' lines, the
 * index `deliveries_open_line` (created like every index: deliveries written before schema 8 have no
 * `orderingKey` nor `sequence`, which put them first in their endpoint's default line); 12: the
 * endpoint change log, the `endpoint_changes` collection numbered by the `meta` counter
 * `endpoint_change_counter` (created like every collection: no document to change); 13: a node's
 * `inFlight` and `clockOffsetMs`, written by its heartbeats (a document written before has neither
 * and reads 0 until its node's next heartbeat: no document to change); 14: the event-type catalog, the
 * `event_types` collection and its `meta` version `event_types_version` (created like every
 * collection, the version read as 0 until the first catalog write: no document to change).
 */
export const SCHEMA_VERSION = 14;

export const Collections = {
  META: 'meta',
  ENDPOINTS: 'endpoints',
  EVENTS: 'events',
  DELIVERIES: 'deliveries',
  ATTEMPTS: 'attempts',
  DEAD_LETTERS: 'dead_letters',
  LEASES: 'leases',
  NODES: 'nodes',
  TENANT_TOKENS: 'tenant_tokens',
  DELIVERY_MINUTES: 'delivery_minutes',
  ENDPOINT_SEQUENCES: 'endpoint_sequences',
  REPLAY_JOBS: 'replay_jobs',
  ENDPOINT_CHANGES: 'endpoint_changes',
  EVENT_TYPES: 'event_types',
} as const;
export type CollectionName = (typeof Collections)[keyof typeof Collections];

/** `meta` keys. Resume tokens live under `resume_token:<key>`. */
export const MetaKeys = {
  SCHEMA_VERSION: 'schema_version',
  SLOT_COUNT: 'slot_count',
  RESUME_TOKEN_PREFIX: 'resume_token:',
  /** The number of the newest endpoint change (`value`), taken in the change's transaction. */
  ENDPOINT_CHANGE_COUNTER: 'endpoint_change_counter',
  /** The cluster's slot weights (`weights`, `by`, `at`): written by one node, read by every node at each heartbeat. */
  SLOT_WEIGHTS: 'slot_weights',
  /** The event-type catalog's version (`value`), bumped in the transaction of every catalog write. */
  EVENT_TYPES_VERSION: 'event_types_version',
} as const;

/** The delivery statuses after which nothing more happens to a delivery (until a replay). */
export const TERMINAL_STATUSES = ['delivered', 'dead', 'cancelled'] as const;

export interface MetaDoc {
  _id: string;
  value?: number;
  /** A change stream resume token (opaque to Herald). */
  token?: unknown;
  savedAt?: number;
  /** Under `slot_weights`: one weight per slot, the node that measured them and when. */
  weights?: number[];
  by?: string;
  at?: number;
}

export interface EndpointDoc {
  _id: string;
  tenantId: string;
  url: string;
  description: string;
  eventTypes: string[];
  retry: RetrySpec;
  timeoutMs: number;
  mode: string;
  /** `none` or `fifo`; missing in documents written before orderings existed (read as `none`, so no migration). */
  ordering?: string;
  concurrency: number;
  /** `null`: no limit; missing in documents written before rate limits existed (read as no limit too). */
  rateLimit?: { perSecond: number; burst: number } | null;
  /**
   * `null`: a fixed concurrency; missing in documents written before adaptive concurrency existed
   * (read as fixed too, so no migration).
   */
  adaptiveConcurrency?: { initial: number; targetLatencyMs: number } | null;
  /**
   * The payload filter as JSON text: its keys are dotted paths and `$` operators, which MongoDB
   * would take for its own in an update. `null`: no filter; missing in documents written before
   * filters existed (read as none too, so no migration).
   */
  payloadFilter?: string | null;
  /** Custom headers, secret values sealed; `null`: none, and missing in documents written before they existed (read as none). */
  headers?: HeaderDoc[] | null;
  /** Authentication, its secret sealed; `null`: none, and missing in documents written before it existed (read as none). */
  auth?: AuthDoc | null;
  /** `null`: no client certificate; missing in documents written before client certificates existed (read as none, so no migration). */
  clientTls?: ClientTls | null;
  status: string;
  disabledReason: string | null;
  failingSince: number | null;
  secrets: SigningSecret[];
  createdAt: number;
  updatedAt: number;
  /** Bumped by each replay touching the endpoint, so that a concurrent delete conflicts with it (`dead-letters.ts`). */
  replayFence?: number;
}

export interface HeaderDoc {
  name: string;
  value: string;
  secret: boolean;
}

/** Every field of every type, `null` where the type has none: one shape, written in one order, so a stored one can be matched whole. */
export interface AuthDoc {
  type: string;
  token: string | null;
  username: string | null;
  password: string | null;
  tokenUrl: string | null;
  clientId: string | null;
  clientSecret: string | null;
  scope: string | null;
  audience: string | null;
}

export interface EventDoc {
  _id: string;
  tenantId: string;
  type: string;
  payload: string;
  createdAt: number;
  endpointId: string | null;
  /** False until fan-out; the partial index `events_unfanned` holds only these. */
  fannedOut: boolean;
  fannedOutAt: number | null;
  /** Insertion order among events created in the same millisecond (ObjectIds increase within a process). */
  ord: ObjectId;
  /** The store that inserted it (absent for a producer's publish): its own change feed skips it. */
  origin?: string;
  /** The producer's ordering key; missing on events written before schema 8 (read as none). */
  orderingKey?: string | null;
  /** The producer's W3C trace context; missing when it had none (and on events written before it existed). */
  traceContext?: TraceContext | null;
}

export interface DeliveryDoc {
  _id: string;
  eventId: string;
  endpointId: string;
  tenantId: string;
  eventType: string;
  slot: number;
  status: string;
  attempts: number;
  round: number;
  nextAttemptAt: number;
  leaseEpoch: number;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | null;
  /** Which claim took it last: lets one bulk claim read back exactly what it won. */
  claimId?: ObjectId;
  /**
   * Set by the writes that make work due for whoever owns the slot (replay,
   * resume), so the change feed can pick them out of all the updates.
   */
  wokeAt?: number;
  /** The store that inserted it: its own change feed skips it. */
  origin?: string;
  /**
   * The failure kind of the last failed attempt (`lib/policy/failure-kind.ts`), set by a retry or a
   * death, cleared by a success and a replay; with `lastFailureAt`, when that settle was written.
   */
  lastFailureKind?: string | null;
  lastFailureAt?: number | null;
  /** The endpoint's number for it (`webhook-sequence`); missing on deliveries written before schema 8. */
  sequence?: number;
  /** Its event's ordering key; missing before schema 8 (read as none). */
  orderingKey?: string | null;
}

/**
 * An endpoint's last sequence number given, `_id` the endpoint id; no document means 0. A
 * collection of its own rather than a field of the endpoint: fan-out writes it in every batch, and
 * its transactions then conflict with each other only, never with an admin's update of the endpoint.
 */
export interface EndpointSequenceDoc {
  _id: string;
  last: number;
}

export interface AttemptDoc {
  _id?: ObjectId;
  deliveryId: string;
  number: number;
  round: number;
  startedAt: number;
  durationMs: number;
  outcome: Outcome;
  error: string | null;
  /** `startedAt` as a date, for the TTL index. */
  at: Date;
}

export interface DeadLetterDoc {
  _id: string;
  deliveryId: string;
  eventId: string;
  endpointId: string;
  tenantId: string;
  eventType: string;
  payload: string;
  reason: string;
  lastOutcome: Outcome;
  /** The delivery's round that died, so a dead letter lists that round's attempts. */
  round: number;
  createdAt: number;
  replayedAt: number | null;
  /** Where the operators' review stands (`lib/store/triage.ts`); indexed with `createdAt`. */
  triage: TriageDoc;
  /** Insertion order among dead letters created in the same millisecond. */
  ord: ObjectId;
  /** The failure kind of its last outcome (`lib/policy/failure-kind.ts`); `unknown` for one written before version 3. */
  failureKind?: string;
  /** `createdAt` as a date, for the TTL index. */
  at: Date;
}

export interface TriageDoc {
  state: TriageState;
  note: string | null;
  by: string | null;
  at: number;
}

/**
 * One endpoint's minute (lib/store/delivery-minutes.ts), written only by `$inc` of increments, so
 * nodes add to the same document. `_id` is `<endpointId>@<minute>`; `latency` holds the attempts per
 * duration bucket as `b00` … `b24` (fields, not an array: `$inc` on an upserted array element
 * would make an object).
 */
export interface DeliveryMinuteDoc {
  _id: string;
  endpointId: string;
  tenantId: string;
  minute: number;
  attempts: number;
  delivered: number;
  retriesScheduled: number;
  deadLettered: number;
  firstAttempts: number;
  firstAttemptSuccesses: number;
  latency: Record<string, number>;
}

/** `owner` is null once released: anyone takes the slot at once, with the next epoch. */
export interface LeaseDoc {
  _id: number;
  owner: string | null;
  until: number;
  epoch: number;
}

/** A tenant token (lib/tenants/tenant-tokens.ts): `_id` is the token's id, `secretHash` a SHA-256 of its secret. */
export interface TenantTokenDoc {
  _id: string;
  tenantId: string;
  name: string;
  secretHash: string;
  createdAt: number;
  expiresAt: number | null;
}

/**
 * An event type (lib/store/event-type-port.ts): `_id` is its name. Each version's schema is kept as
 * JSON text: a schema's keys (`$ref`, `$defs`, property names with dots) are not all field names MongoDB takes.
 */
export interface EventTypeDoc {
  _id: string;
  description: string;
  versions: Array<{ version: number; schema: string | null; createdAt: number }>;
  deprecatedAt: number | null;
  deprecationNote: string | null;
  createdAt: number;
  updatedAt: number;
}

/** A paced replay job (lib/dead-letters/replay-jobs.ts): `_id` is the job's id. */
/** One change of an endpoint, numbered cluster-wide (`lib/store/port.ts`, `EndpointChange`). */
export interface EndpointChangeDoc {
  /** The change's number. */
  _id: number;
  endpointId: string;
  changedAt: number;
}

export interface ReplayJobDoc {
  _id: string;
  filter: ReplayJobFilter;
  state: ReplayJobState;
  total: number;
  replayed: number;
  waiting: number;
  cursor: string | null;
  chunkSize: number;
  createdAt: number;
  finishedAt: number | null;
  error: string | null;
  owner: string | null;
  leaseUntil: number;
}

export interface NodeDoc {
  _id: string;
  startedAt: number;
  seenAt: number;
  /** Missing in documents written before version 13 (read as 0, so no migration). */
  inFlight?: number;
  clockOffsetMs?: number;
}

/** The names of the two TTL indexes, whose `expireAfterSeconds` follows the retention setting. */
export const TTL_INDEXES = [
  { collection: Collections.ATTEMPTS, name: 'attempts_ttl' },
  { collection: Collections.DEAD_LETTERS, name: 'dead_letters_ttl' },
] as const;

/** The largest `expireAfterSeconds` MongoDB accepts. */
export const MAX_TTL_SECONDS = 2_147_483_647;

/**
 * Every index, per collection. `retentionSeconds` is the TTL of attempts and
 * dead letters, or `null` for no TTL index (then only `purge()` deletes them).
 */
export function indexSpecs(retentionSeconds: number | null): Readonly<Record<CollectionName, readonly IndexDescription[]>> {
  const ttl = (name: string): IndexDescription[] =>
    retentionSeconds === null ? [] : [{ key: { at: 1 }, name, expireAfterSeconds: retentionSeconds }];
  return {
    [Collections.META]: [],
    [Collections.ENDPOINTS]: [{ key: { tenantId: 1 }, name: 'endpoints_tenant' }],
    [Collections.EVENTS]: [
      // Partial: the fan-out loop reads only the few events still waiting, never the whole history.
      { key: { createdAt: 1, ord: 1 }, name: 'events_unfanned', partialFilterExpression: { fannedOut: false } },
      // Schema 7: the tenants with events waiting, for the fan-out past a busy tenant's backlog (a
      // distinct over it reads one entry per tenant), and each one's oldest.
      { key: { tenantId: 1, createdAt: 1, ord: 1 }, name: 'events_unfanned_tenant', partialFilterExpression: { fannedOut: false } },
      { key: { createdAt: 1 }, name: 'events_created' },
    ],
    [Collections.DELIVERIES]: [
      // Claims and nextDueAt walk pending deliveries in due order, per owned slot.
      { key: { status: 1, slot: 1, nextAttemptAt: 1 }, name: 'deliveries_due' },
      { key: { status: 1, nextAttemptAt: 1 }, name: 'deliveries_next' },
      // A claim takes the first few due deliveries of each busy endpoint.
      { key: { endpointId: 1, status: 1, nextAttemptAt: 1 }, name: 'deliveries_endpoint_due' },
      // Orphans: in flight under an older epoch than the slot's.
      { key: { status: 1, slot: 1, leaseEpoch: 1 }, name: 'deliveries_in_flight' },
      // A bulk claim reads back what it won.
      { key: { claimId: 1 }, name: 'deliveries_claim', sparse: true },
      // The delivery log, newest first, and per endpoint.
      { key: { createdAt: -1, _id: -1 }, name: 'deliveries_created' },
      { key: { eventId: 1 }, name: 'deliveries_event' },
      // Claims (claims.ts): a slot's busy endpoints, each with its earliest pending (a DISTINCT_SCAN),
      // and an endpoint's first due deliveries in (nextAttemptAt, _id) order, covered, stopping at the limit.
      { key: { status: 1, slot: 1, endpointId: 1, nextAttemptAt: 1, _id: 1 }, name: 'deliveries_claim_walk' },
      // The delivery log's filters, each in the log's order (newest first, ties by id) so a page stops at its limit.
      { key: { endpointId: 1, createdAt: -1, _id: -1 }, name: 'deliveries_endpoint_log' },
      { key: { tenantId: 1, createdAt: -1, _id: -1 }, name: 'deliveries_tenant_log' },
      { key: { eventType: 1, createdAt: -1, _id: -1 }, name: 'deliveries_type_log' },
      { key: { status: 1, createdAt: -1, _id: -1 }, name: 'deliveries_status_log' },
      // Schema 8: an endpoint's deliveries after sequence N, in order (a seek); unique, so a number
      // given twice is an error. Partial: deliveries older than the numbering have none.
      {
        key: { endpointId: 1, sequence: 1 },
        name: 'deliveries_endpoint_sequence',
        unique: true,
        partialFilterExpression: { sequence: { $type: 'number' } },
      },
      // Failures grouped (failure-groups.ts): the retrying deliveries only, by endpoint and kind, latest first.
      {
        key: { endpointId: 1, lastFailureKind: 1, lastFailureAt: -1 },
        name: 'deliveries_failing',
        partialFilterExpression: { status: 'pending', lastFailureKind: { $type: 'string' } },
      },
      // Schema 10: a replay job's look counts each endpoint's replays still pending or in flight
      // (round above 0) over the replayed deliveries only ($in in a partial filter needs MongoDB 6).
      { key: { endpointId: 1, status: 1 }, name: 'deliveries_live_replays', partialFilterExpression: { round: { $gt: 0 } } },
      // Schema 11: FIFO endpoints (line-heads.ts). A line's head, the earliest of its open deliveries:
      // `status` $in pending/in_flight gives two ranges in the line's order, merged, and the limit of 1
      // stops it. And a FIFO endpoint's lines with a pending delivery, a DISTINCT_SCAN. `status` before
      // `orderingKey` for the second: a line's closed deliveries are never walked. Not partial on the
      // open statuses: `$in` in a partial filter needs MongoDB 6, and 4.4 is supported.
      { key: { endpointId: 1, status: 1, orderingKey: 1, sequence: 1, createdAt: 1, _id: 1 }, name: 'deliveries_open_line' },
    ],
    [Collections.ATTEMPTS]: [
      { key: { deliveryId: 1, round: 1, number: 1 }, name: 'attempts_delivery' },
      { key: { startedAt: 1 }, name: 'attempts_started' },
      ...ttl('attempts_ttl'),
    ],
    [Collections.DEAD_LETTERS]: [
      { key: { createdAt: -1, ord: -1 }, name: 'dead_letters_created' },
      { key: { eventId: 1 }, name: 'dead_letters_event' },
      // Listing by triage state, newest first; the review check's oldest unreviewed one (state new).
      { key: { 'triage.state': 1, createdAt: -1, ord: -1 }, name: 'dead_letters_triage' },
      // Listing (newest first) and replay by filter (oldest first, the same index backwards) by endpoint and by tenant.
      { key: { endpointId: 1, createdAt: -1, ord: -1 }, name: 'dead_letters_endpoint_log' },
      { key: { tenantId: 1, createdAt: -1, ord: -1 }, name: 'dead_letters_tenant_log' },
      // Failures grouped (failure-groups.ts), and a group's replay: by endpoint and kind, latest first.
      { key: { endpointId: 1, failureKind: 1, createdAt: -1 }, name: 'dead_letters_failing' },
      ...ttl('dead_letters_ttl'),
    ],
    [Collections.LEASES]: [{ key: { owner: 1 }, name: 'leases_owner' }],
    [Collections.NODES]: [{ key: { seenAt: 1 }, name: 'nodes_seen' }],
    // The admin lists a tenant's tokens, oldest first; a request looks one up by _id.
    [Collections.TENANT_TOKENS]: [{ key: { tenantId: 1, createdAt: 1, _id: 1 }, name: 'tenant_tokens_tenant' }],
    // One endpoint's series; every endpoint's (and the retention delete); a tenant's.
    [Collections.DELIVERY_MINUTES]: [
      { key: { endpointId: 1, minute: 1 }, name: 'delivery_minutes_endpoint' },
      { key: { minute: 1 }, name: 'delivery_minutes_minute' },
      { key: { tenantId: 1, minute: 1 }, name: 'delivery_minutes_tenant' },
    ],
    // Read and written by _id only.
    [Collections.ENDPOINT_SEQUENCES]: [],
    // The running jobs a node may take (lease ended); the list, newest first.
    [Collections.REPLAY_JOBS]: [
      { key: { state: 1, leaseUntil: 1 }, name: 'replay_jobs_running' },
      { key: { createdAt: -1, _id: -1 }, name: 'replay_jobs_created' },
    ],
    // Read by _id (the number) from a node's cursor on; the retention delete by time.
    [Collections.ENDPOINT_CHANGES]: [{ key: { changedAt: 1 }, name: 'endpoint_changes_changed' }],
    // Read by _id (the name), listed in _id order.
    [Collections.EVENT_TYPES]: [],
  };
}

/**
 * Indexes earlier versions created that a longer one now serves (a prefix of it), dropped at start:
 * each costs every write to its collection.
 */
export const RETIRED_INDEXES = [
  { collection: Collections.DELIVERIES, name: 'deliveries_endpoint' },
  { collection: Collections.DEAD_LETTERS, name: 'dead_letters_endpoint' },
] as const;

/** `retentionMs` as a TTL in whole seconds (at least 1, at most MongoDB's limit), or null for none. */
export function retentionSeconds(retentionMs: number | null): number | null {
  if (retentionMs === null) return null;
  return Math.min(MAX_TTL_SECONDS, Math.max(1, Math.ceil(retentionMs / 1_000)));
}

/**
 * Creates the collections and indexes if missing and records the schema
 * version. A TTL index whose `expireAfterSeconds` differs from the setting is
 * changed in place (`collMod`); a TTL index no longer wanted is dropped.
 */
export async function ensureSchema(db: Db, options: { readonly retentionMs: number | null }): Promise<void> {
  const existing = new Set((await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name));
  for (const name of Object.values(Collections)) {
    if (existing.has(name)) continue;
    try {
      await db.createCollection(name);
    } catch (error) {
      // Another process created it in between.
      if (serverErrorCode(error) !== MongoErrorCode.NAMESPACE_EXISTS) throw error;
    }
  }
  const seconds = retentionSeconds(options.retentionMs);
  const specs = indexSpecs(seconds);
  for (const name of Object.values(Collections)) {
    const wanted = specs[name];
    if (wanted.length === 0) continue;
    try {
      await db.collection(name).createIndexes([...wanted]);
    } catch (error) {
      if (serverErrorCode(error) !== MongoErrorCode.INDEX_OPTIONS_CONFLICT) throw error;
      // Only the TTL can differ from what an earlier start created: change it, then retry.
      for (const ttl of TTL_INDEXES.filter((t) => t.collection === name)) {
        if (seconds !== null) {
          await db.command({ collMod: name, index: { name: ttl.name, expireAfterSeconds: seconds } });
        }
      }
      await db.collection(name).createIndexes([...wanted]);
    }
  }
  if (seconds === null) {
    for (const ttl of TTL_INDEXES) {
      const indexes = await db.collection(ttl.collection).indexes();
      if (indexes.some((index) => index.name === ttl.name)) await db.collection(ttl.collection).dropIndex(ttl.name);
    }
  }
  for (const retired of RETIRED_INDEXES) {
    const indexes = await db.collection(retired.collection).indexes();
    if (indexes.some((index) => index.name === retired.name)) {
      await db
        .collection(retired.collection)
        .dropIndex(retired.name)
        .catch((error: unknown) => {
          // Another process dropped it in between.
          if (serverErrorCode(error) !== MongoErrorCode.INDEX_NOT_FOUND) throw error;
        });
    }
  }
  const meta = db.collection<MetaDoc>(Collections.META);
  const recorded = (await meta.findOne({ _id: MetaKeys.SCHEMA_VERSION }))?.value ?? 1;
  if (recorded < 2) await migrateDeadLetterTriage(db);
  if (recorded < 3) await migrateFailureKinds(db);
  await meta.updateOne({ _id: MetaKeys.SCHEMA_VERSION }, { $max: { value: SCHEMA_VERSION } }, { upsert: true });
}

/**
 * Version 2: gives every dead letter written before it a `triage` — `replayed` (since its replay)
 * when it was, else `new` (since its creation). Idempotent (only documents without one are
 * touched), so processes starting together may both run it. Plain updates, no update pipeline.
 */
export async function migrateDeadLetterTriage(db: Db): Promise<number> {
  const deadLetters = db.collection<DeadLetterDoc>(Collections.DEAD_LETTERS);
  const missing = { triage: { $exists: false } } as const;
  let migrated = 0;
  for (;;) {
    const docs = await deadLetters
      .find(missing, { projection: { _id: 1, createdAt: 1, replayedAt: 1 } })
      .limit(MIGRATION_BATCH)
      .toArray();
    if (docs.length === 0) return migrated;
    const result = await deadLetters.bulkWrite(
      docs.map((doc) => ({
        updateOne: { filter: { _id: doc._id, ...missing }, update: { $set: { triage: legacyTriage(doc) } } },
      })),
      { ordered: false },
    );
    migrated += result.modifiedCount;
  }
}

const MIGRATION_BATCH = 500;

/**
 * Version 3: failures recorded before failure kinds existed are `unknown` (the retrying deliveries
 * until their next attempt, the dead letters for good). Idempotent (only documents without one are
 * touched), so processes starting together may both run it.
 */
export async function migrateFailureKinds(db: Db): Promise<number> {
  const deliveries = db.collection<DeliveryDoc>(Collections.DELIVERIES);
  const deadLetters = db.collection<DeadLetterDoc>(Collections.DEAD_LETTERS);
  let migrated = 0;
  // Plain updates, no update pipeline: each delivery's time is its own last update, read first.
  for (;;) {
    const docs = await deliveries.find(LEGACY_RETRYING_FILTER, { projection: { _id: 1, updatedAt: 1 } }).limit(MIGRATION_BATCH).toArray();
    if (docs.length === 0) break;
    const result = await deliveries.bulkWrite(
      docs.map((doc) => ({ updateOne: { filter: { _id: doc._id, ...LEGACY_RETRYING_FILTER }, update: legacyFailureUpdate(doc.updatedAt) } })),
      { ordered: false },
    );
    migrated += result.modifiedCount;
  }
  const dead = await deadLetters.updateMany({ failureKind: { $exists: false } }, { $set: { failureKind: 'unknown' } });
  return migrated + dead.modifiedCount;
}

/** Retrying deliveries (pending after a failed attempt) that have no failure kind. */
export const LEGACY_RETRYING_FILTER = Object.freeze({ status: 'pending', attempts: { $gt: 0 }, lastFailureKind: { $exists: false } } as const);

/** A retrying delivery of before version 3: `unknown`, since its last update. */
export function legacyFailureUpdate(updatedAt: number): { $set: { lastFailureKind: string; lastFailureAt: number } } {
  return { $set: { lastFailureKind: 'unknown', lastFailureAt: updatedAt } };
}

/** The triage of a dead letter written before version 2. */
export function legacyTriage(doc: Pick<DeadLetterDoc, 'createdAt' | 'replayedAt'>): TriageDoc {
  const replayedAt = doc.replayedAt ?? null;
  return replayedAt === null
    ? { state: 'new', note: null, by: null, at: doc.createdAt }
    : { state: 'replayed', note: null, by: null, at: replayedAt };
}
