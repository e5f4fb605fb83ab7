/**
 * Publishing into a SQLite outbox from the producer's own connection, inside
 * the producer's own transaction: wrap the business change and `publish()` in
 * one `db.transaction(...)` and either both commit or neither does. Herald's
 * processes see the event on their next poll of the file.
 *
 * Synchronous, like better-sqlite3 itself. Without an open transaction a
 * batch still commits atomically (better-sqlite3 nests `db.transaction` as a
 * savepoint when one is open, and begins one when none is).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { systemClock } from '../clock.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { newEventId } from '../ids.ts';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { currentSqliteCatalog } from '../event-types/sqlite-catalog.ts';
import { eventFromRow, traceContextToColumn, type EventRow } from '../store/sql-rows.ts';
import { ensureSchema } from '../store/sqlite/schema.ts';
import { PublishPath, tracePublishSync } from '../tracing/publish-span.ts';
import { validateEventInputs } from './validate-event.ts';
import type { EventInput, ValidEventInput } from './validate-event.ts';

/**
 * The producer's connection: a better-sqlite3 `Database`, named by what `publish` uses of it.
 * Herald's own interface, so that its declarations need no `@types/better-sqlite3`.
 */
export interface SqliteConnection {
  prepare(source: string): object;
  transaction(fn: (...args: never[]) => unknown): object;
  exec(source: string): object;
  readonly inTransaction: boolean;
}

export interface PublishOptions {
  /** @default systemClock */
  readonly clock?: Clock;
  /**
   * The largest serialised payload accepted, in UTF-8 bytes.
   * @default 262144 (256 KiB)
   */
  readonly maxPayloadBytes?: number;
}

const DEFAULTS = Object.freeze({
  clock: systemClock,
  maxPayloadBytes: 256 * 1024,
} satisfies Required<PublishOptions>);

function prepareStatements(db: BetterSqlite3.Database) {
  return {
    tenantExists: db.prepare<[string], number>(`SELECT 1 FROM endpoints WHERE tenant_id = ? LIMIT 1`).pluck(),
    endpointTenant: db.prepare<[string], string>(`SELECT tenant_id FROM endpoints WHERE id = ?`).pluck(),
    getEvent: db.prepare<[string], EventRow>(
      `SELECT id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context FROM events WHERE id = ?`,
    ),
    insertEvent: db.prepare<[EventRow], unknown>(`INSERT INTO events (id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context)
      VALUES (@id, @tenant_id, @type, @payload, @created_at, @endpoint_id, @ordering_key, @trace_context)`),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/** Statements per connection, prepared on first use. */
const statements = new WeakMap<BetterSqlite3.Database, Statements>();

/**
 * Writes events into the outbox on `db`, joining the caller's transaction if
 * one is open. An input whose `id` is already stored is an idempotent retry:
 * the stored event is returned and nothing is written.
 *
 * @returns the events as stored, in input order.
 * @throws ValidationError `HERALD_INVALID_INPUT` for a malformed input (field and rule named), or a payload
 *   that does not match its type's schema in the catalog (`payload/<JSON pointer>`, lib/event-types/).
 * @throws PayloadTooLargeError `HERALD_PAYLOAD_TOO_LARGE` for an oversized payload.
 * @throws NotFoundError `HERALD_NOT_FOUND` when the tenant has no endpoint, or
 *   `endpointId` names no endpoint of that tenant.
 * @throws ConflictError `HERALD_CONFLICT` when `id` is already used by another tenant's event.
 */
export function publish(
  connection: SqliteConnection,
  input: EventInput | readonly EventInput[],
  options: PublishOptions = {},
): OutboxEvent[] {
  // A better-sqlite3 Database: the interface above only says what is used of it.
  const db = connection as BetterSqlite3.Database;
  const clock = options.clock ?? DEFAULTS.clock;
  const maxPayloadBytes = options.maxPayloadBytes ?? DEFAULTS.maxPayloadBytes;
  // Validate everything first, so a bad input in a batch writes nothing.
  const valid = validateEventInputs(input, { maxPayloadBytes });

  ensureSchema(db);
  let s = statements.get(db);
  if (s === undefined) {
    s = prepareStatements(db);
    statements.set(db, s);
  }
  const prepared = s;
  const write = db.transaction((trace: TraceContext | null) => {
    // Payloads against their types' schemas, as the catalog stands in this transaction.
    currentSqliteCatalog(db).check(valid);
    return valid.map((event) => publishOne(prepared, event, clock, trace));
  });
  // In the caller's transaction, join it. Alone, take the write lock first (IMMEDIATE): a
  // deferred transaction reads, then fails at once with SQLITE_BUSY ("database is locked",
  // no busy wait) if another process committed between its read and its write.
  return tracePublishSync(PublishPath.SQLITE, (trace) => (db.inTransaction ? write(trace) : write.immediate(trace)));
}

function publishOne(s: Statements, input: ValidEventInput, clock: Clock, traceContext: TraceContext | null): OutboxEvent {
  if (input.id !== undefined) {
    const stored = s.getEvent.get(input.id);
    if (stored !== undefined) {
      if (stored.tenant_id !== input.tenantId) {
        throw new ConflictError(`id: event '${input.id}' already exists for another tenant`);
      }
      return eventFromRow(stored);
    }
  }
  if (s.tenantExists.get(input.tenantId) === undefined) throw new NotFoundError('tenant', input.tenantId, 'tenantId');
  if (input.endpointId !== undefined && s.endpointTenant.get(input.endpointId) !== input.tenantId) {
    throw new NotFoundError('endpoint', input.endpointId, 'endpointId');
  }
  const createdAt = clock.now();
  const row: EventRow = {
    id: input.id ?? newEventId(createdAt),
    tenant_id: input.tenantId,
    type: input.type,
    payload: input.payloadJson,
    created_at: createdAt,
    endpoint_id: input.endpointId ?? null,
    ordering_key: input.orderingKey ?? null,
    trace_context: traceContextToColumn(traceContext),
  };
  s.insertEvent.run(row);
  return eventFromRow(row);
}
