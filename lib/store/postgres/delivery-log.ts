/**
 * The delivery log in PostgreSQL: deliveries and their attempts as the admin
 * API and the dashboard read them, and the counts the engine and metrics use.
 */
import type { Attempt, Delivery, DeliveryStatus } from '../../model.ts';
import { DeliveryStatus as Status } from '../../model.ts';
import type { DeliveryFilter } from '../port.ts';
import { attemptFromRow, deliveryFromRow, type AttemptRow, type DeliveryRow } from '../sql-rows.ts';
import { named, type Sql, type Statement } from './sql.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../list-limit.ts';


export class DeliveryLogQueries {
  readonly #s: string;
  readonly #get: Statement;
  readonly #nextDueAt: Statement;
  readonly #afterSequence: Statement;
  /** The hot statements by name, for their plans (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'afterSequence', Statement>>;

  constructor(schema: string) {
    const s = schema;
    this.#s = s;
    this.#get = named(s, 'delivery_get', `SELECT * FROM ${s}.deliveries WHERE id = $1`);
    this.#nextDueAt = named(s, 'next_due_at', `SELECT d.next_attempt_at FROM ${s}.deliveries d
      WHERE d.status = 'pending'
        AND EXISTS (SELECT 1 FROM ${s}.endpoints e WHERE e.id = d.endpoint_id AND e.status = 'enabled')
      ORDER BY d.next_attempt_at LIMIT 1`);
    // A seek on deliveries_endpoint_sequence, read in its order.
    this.#afterSequence = named(s, 'deliveries_after_sequence',
      `SELECT * FROM ${s}.deliveries WHERE endpoint_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`);
    this.statements = { afterSequence: this.#afterSequence };
  }

  async afterSequence(sql: Sql, endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    const rows = await sql.query<DeliveryRow>(this.#afterSequence, [endpointId, after, clampLimit(limit, MAX_LIST_LIMIT)]);
    return rows.map(deliveryFromRow);
  }

  async get(sql: Sql, id: string): Promise<Delivery | undefined> {
    const [row] = await sql.query<DeliveryRow>(this.#get, [id]);
    return row === undefined ? undefined : deliveryFromRow(row);
  }

  /** Newest first, ties by id descending; `after` continues a listing past its last row. */
  async list(sql: Sql, filter: DeliveryFilter): Promise<Delivery[]> {
    const where = new Conditions();
    where.add('endpoint_id = $?', filter.endpointId);
    where.add('tenant_id = $?', filter.tenantId);
    where.add('event_id = $?', filter.eventId);
    where.add('status = $?', filter.status);
    where.add('created_at >= $?', filter.since);
    where.add('created_at < $?', filter.until);
    where.add('event_type = $?', filter.eventType);
    if (filter.after !== undefined) where.add('(created_at, id) < ($?, $?)', filter.after.createdAt, filter.after.id);
    const limit = where.value(clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT));
    const rows = await sql.query<DeliveryRow>(
      `SELECT * FROM ${this.#s}.deliveries ${where.clause()} ORDER BY created_at DESC, id DESC LIMIT ${limit}`,
      where.values,
    );
    return rows.map(deliveryFromRow);
  }

  async listAttempts(sql: Sql, deliveryId: string): Promise<Attempt[]> {
    // A first-attempt success kept on the delivery's row (settle.ts) came before any row of attempts.
    const rows = await sql.query<AttemptRow>(`
      SELECT delivery_id, number, round, started_at, duration_ms, outcome, error FROM (
        SELECT id AS delivery_id, 1 AS number, 0 AS round, first_started_at AS started_at, first_duration_ms AS duration_ms,
          first_outcome AS outcome, first_error AS error, 0::bigint AS seq
        FROM ${this.#s}.deliveries WHERE id = $1 AND first_started_at IS NOT NULL
        UNION ALL
        SELECT delivery_id, number, round, started_at, duration_ms, outcome, error, id FROM ${this.#s}.attempts WHERE delivery_id = $1
      ) a ORDER BY seq`, [deliveryId]);
    return rows.map(attemptFromRow);
  }

  async count(sql: Sql): Promise<Readonly<Record<DeliveryStatus, number>>> {
    const counts = Object.fromEntries(Object.values(Status).map((status) => [status, 0])) as Record<DeliveryStatus, number>;
    const rows = await sql.query<{ status: string; n: number }>(`SELECT status, count(*) AS n FROM ${this.#s}.deliveries GROUP BY status`);
    for (const { status, n } of rows) {
      if (status in counts) counts[status as DeliveryStatus] = n;
    }
    return counts;
  }

  async nextDueAt(sql: Sql): Promise<number | undefined> {
    const [row] = await sql.query<{ next_attempt_at: number }>(this.#nextDueAt);
    return row?.next_attempt_at;
  }
}

/** A WHERE clause built from the filters that are set, with numbered parameters. */
export class Conditions {
  readonly values: unknown[] = [];
  readonly #parts: string[] = [];

  /** Adds `condition` (each `$?` takes the next of `values`) unless its first value is undefined. */
  add(condition: string, ...values: unknown[]): void {
    if (values[0] === undefined) return;
    let i = 0;
    this.#parts.push(condition.replace(/\$\?/g, () => this.value(values[i++])));
  }

  /** Adds a condition that takes no value. */
  always(condition: string): void {
    this.#parts.push(condition);
  }

  /** A parameter for `value`: its placeholder. */
  value(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  clause(): string {
    return this.#parts.length === 0 ? '' : `WHERE ${this.#parts.join(' AND ')}`;
  }
}

