/**
 * Publishing into a PostgreSQL outbox from the producer's own connection,
 * inside the producer's own transaction: run the business change and
 * `publish()` on the same client between `BEGIN` and `COMMIT` (a `pg`
 * `Client` or `PoolClient`, or TypeORM's transactional entity manager, whose
 * `query(sql, parameters)` reaches the same connection), and either both
 * commit or neither does.
 *
 * Validation and the tenant and endpoint checks are those of the other
 * producers (`sqlite-publish.ts`). The events of one call are written by one
 * `INSERT` statement, so a batch is atomic even outside a transaction. The
 * schema must exist: Herald creates it at its first start
 * (`migratePostgresSchema`).
 */
import { systemClock } from '../clock.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { checkedPostgresCatalog, reloadPostgresCatalog, type RowsOf } from '../event-types/postgres-catalog.ts';
import { catalogVersionSql } from '../store/postgres/event-types.ts';
import { DEFAULT_POSTGRES_SCHEMA, validSchemaName } from '../store/postgres/schema.ts';
import { eventFromRow, traceContextToColumn, type EventRow } from '../store/sql-rows.ts';
import { PublishPath, tracePublish } from '../tracing/publish-span.ts';
import { outboxEventOf, validateEventInputs } from './validate-event.ts';
import type { EventInput, ValidEventInput } from './validate-event.ts';

/**
 * Whatever runs SQL on the producer's connection: node-postgres answers `{rows}`, TypeORM's
 * `EntityManager.query` and `QueryRunner.query` answer the rows themselves.
 */
export interface SqlRunner {
  query(sql: string, parameters: unknown[]): Promise<unknown>;
}

export interface PostgresPublishOptions {
  /** The schema Herald was started with. @default 'herald' */
  readonly schema?: string;
  /** @default systemClock */
  readonly clock?: Clock;
  /**
   * The largest serialised payload accepted, in UTF-8 bytes.
   * @default 262144 (256 KiB)
   */
  readonly maxPayloadBytes?: number;
}

const DEFAULTS = Object.freeze({
  schema: DEFAULT_POSTGRES_SCHEMA,
  clock: systemClock,
  maxPayloadBytes: 256 * 1024,
} satisfies Required<PostgresPublishOptions>);


/**
 * Writes events into the outbox with `runner`, inside its transaction if one
 * is open. An input whose `id` is already stored is an idempotent retry: the
 * stored event is returned and nothing is written.
 *
 * @returns the events as stored, in input order.
 * @throws ValidationError `HERALD_INVALID_INPUT` for a malformed input (field and rule named), a payload that
 *   does not match its type's schema in the catalog (`payload/<JSON pointer>`), or a bad schema name.
 * @throws PayloadTooLargeError `HERALD_PAYLOAD_TOO_LARGE` for an oversized payload.
 * @throws NotFoundError `HERALD_NOT_FOUND` when the tenant has no endpoint, or
 *   `endpointId` names no endpoint of that tenant.
 * @throws ConflictError `HERALD_CONFLICT` when `id` is already used by another tenant's event.
 * Driver errors are rethrown as they are (the caller's transaction is then to be rolled back).
 */
export async function publish(
  runner: SqlRunner,
  input: EventInput | readonly EventInput[],
  options: PostgresPublishOptions = {},
): Promise<OutboxEvent[]> {
  const schema = validSchemaName(options.schema ?? DEFAULTS.schema);
  const clock = options.clock ?? DEFAULTS.clock;
  // Validate everything first, so a bad input in a batch writes nothing.
  const valid = validateEventInputs(input, { maxPayloadBytes: options.maxPayloadBytes ?? DEFAULTS.maxPayloadBytes });
  if (valid.length === 0) return [];
  return tracePublish(PublishPath.POSTGRES, (trace) => write(runner, schema, valid, clock, trace));
}

async function write(runner: SqlRunner, schema: string, valid: readonly ValidEventInput[], clock: Clock, trace: TraceContext | null): Promise<OutboxEvent[]> {
  const rows: RowsOf = (sql, parameters) => rowsOf(runner, sql, parameters);
  let catalog = await checkedPostgresCatalog(runner, schema, rows, valid);
  // Events by id: those stored already, then those of this call as they are planned.
  const byId = await storedEvents(runner, schema, valid.flatMap((event) => (event.id === undefined ? [] : [event.id])));
  const tenants = [...new Set(valid.map((event) => event.tenantId))];
  const knownTenants = new Set((await rowsOf<{ tenant_id: string }>(runner, `SELECT DISTINCT tenant_id
    FROM ${schema}.endpoints WHERE tenant_id = ANY($1::text[])`, [tenants])).map((row) => row.tenant_id));
  const endpointIds = [...new Set(valid.flatMap((event) => (event.endpointId === undefined ? [] : [event.endpointId])))];
  const endpointTenant = new Map((await rowsOf<{ id: string; tenant_id: string }>(runner, `SELECT id, tenant_id
    FROM ${schema}.endpoints WHERE id = ANY($1::text[])`, [endpointIds])).map((row) => [row.id, row.tenant_id]));

  const createdAt = clock.now();
  const result: OutboxEvent[] = [];
  const fresh: OutboxEvent[] = [];
  for (const event of valid) {
    const earlier = event.id === undefined ? undefined : byId.get(event.id);
    if (earlier !== undefined) {
      result.push(sameTenant(earlier, event.tenantId));
      continue;
    }
    if (!knownTenants.has(event.tenantId)) throw new NotFoundError('tenant', event.tenantId, 'tenantId');
    if (event.endpointId !== undefined && endpointTenant.get(event.endpointId) !== event.tenantId) {
      throw new NotFoundError('endpoint', event.endpointId, 'endpointId');
    }
    const outbox = outboxEventOf(event, createdAt, trace);
    byId.set(outbox.id, outbox);
    fresh.push(outbox);
    result.push(outbox);
  }
  if (fresh.length === 0) return result;

  // Guarded by the catalog version the payloads were checked against: when the catalog has changed
  // since (through any node), nothing is inserted; reload it, check again, and retry.
  let inserted: Set<string> | undefined;
  while (inserted === undefined) {
    const [written] = await rowsOf<{ catalog_version: string | number; ids: string[] }>(runner, `WITH written AS (
    INSERT INTO ${schema}.events (id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::jsonb[])
    WHERE ${catalogVersionSql(schema)} = $9
    ON CONFLICT (id) DO NOTHING RETURNING id)
    SELECT ${catalogVersionSql(schema)} AS catalog_version, ARRAY(SELECT id FROM written) AS ids`, [
      fresh.map((e) => e.id),
      fresh.map((e) => e.tenantId),
      fresh.map((e) => e.type),
      fresh.map((e) => e.payload),
      fresh.map((e) => e.createdAt),
      fresh.map((e) => e.endpointId),
      fresh.map((e) => e.orderingKey),
      fresh.map((e) => traceContextToColumn(e.traceContext)),
      catalog.version,
    ]);
    if (Number(written?.catalog_version) === catalog.version) {
      inserted = new Set(written?.ids);
    } else {
      catalog = await reloadPostgresCatalog(runner, schema, rows);
      catalog.check(valid);
    }
  }
  // Another connection stored one of these ids between the read and the insert: what it stored
  // stands, as an earlier publish of the same id would.
  const raced = fresh.filter((e) => !inserted.has(e.id)).map((e) => e.id);
  if (raced.length === 0) return result;
  const winners = await storedEvents(runner, schema, raced);
  return result.map((event) => {
    const winner = winners.get(event.id);
    return winner === undefined ? event : sameTenant(winner, event.tenantId);
  });
}

/** The stored event of an id published again: its own tenant's, or a conflict. */
function sameTenant(stored: OutboxEvent, tenantId: string): OutboxEvent {
  if (stored.tenantId !== tenantId) throw new ConflictError(`id: event '${stored.id}' already exists for another tenant`);
  return stored;
}

async function storedEvents(runner: SqlRunner, schema: string, ids: readonly string[]): Promise<Map<string, OutboxEvent>> {
  const rows = await rowsOf<EventRow>(runner, `SELECT id, tenant_id, type, payload, created_at, endpoint_id, ordering_key, trace_context
    FROM ${schema}.events WHERE id = ANY($1::text[])`, [ids]);
  return new Map(rows.map((row) => [row.id, eventFromRow(row)]));
}


async function rowsOf<Row>(runner: SqlRunner, sql: string, parameters: unknown[]): Promise<Row[]> {
  const answer = await runner.query(sql, parameters);
  if (Array.isArray(answer)) return answer as Row[];
  return ((answer as { rows?: Row[] } | undefined)?.rows ?? []) as Row[];
}
