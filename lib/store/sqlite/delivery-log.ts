/**
 * The delivery log in SQLite: deliveries and their attempts as the admin API
 * and the dashboard read them, and the counts the engine and metrics use.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Attempt, Delivery, DeliveryStatus } from '../../model.ts';
import { DeliveryStatus as Status } from '../../model.ts';
import type { DeliveryFilter } from '../port.ts';
import { attemptFromRow, deliveryFromRow, type AttemptRow, type DeliveryRow } from '../sql-rows.ts';
import { whereClause, type DynamicStatements, type Params, type Statement } from './sql.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../list-limit.ts';


export class DeliveryLogStatements {
  readonly #dynamic: DynamicStatements;
  readonly #get: Statement<DeliveryRow>;
  readonly #listAttempts: Statement<AttemptRow>;
  readonly #count: Statement<{ status: string; n: number }>;
  readonly #nextDueAt: Statement<number>;
  readonly #afterSequence: Statement<DeliveryRow>;

  constructor(db: BetterSqlite3.Database, dynamic: DynamicStatements) {
    this.#dynamic = dynamic;
    this.#get = db.prepare<unknown[], DeliveryRow>(`SELECT * FROM deliveries WHERE id = ?`);
    // A first-attempt success kept on the delivery's row (settle.ts) came before any row of attempts.
    this.#listAttempts = db.prepare<unknown[], AttemptRow>(`
      SELECT delivery_id, number, round, started_at, duration_ms, outcome, error FROM (
        SELECT id AS delivery_id, 1 AS number, 0 AS round, first_started_at AS started_at, first_duration_ms AS duration_ms,
          first_outcome AS outcome, first_error AS error, 0 AS seq
        FROM deliveries WHERE id = @id AND first_started_at IS NOT NULL
        UNION ALL
        SELECT delivery_id, number, round, started_at, duration_ms, outcome, error, id FROM attempts WHERE delivery_id = @id
      ) ORDER BY seq`);
    this.#count = db.prepare<unknown[], { status: string; n: number }>(
      `SELECT status, count(*) AS n FROM deliveries GROUP BY status`,
    );
    this.#nextDueAt = db.prepare<unknown[], number>(`SELECT d.next_attempt_at FROM deliveries d
      WHERE d.status = 'pending'
        AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.status = 'enabled')
      ORDER BY d.next_attempt_at LIMIT 1`).pluck();
    // A seek on deliveries_endpoint_sequence, read in its order.
    this.#afterSequence = db.prepare<unknown[], DeliveryRow>(
      `SELECT * FROM deliveries WHERE endpoint_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`,
    );
  }

  afterSequence(endpointId: string, after: number, limit: number): Delivery[] {
    return this.#afterSequence.all(endpointId, after, clampLimit(limit, MAX_LIST_LIMIT)).map(deliveryFromRow);
  }

  get(id: string): Delivery | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : deliveryFromRow(row);
  }

  list(filter: DeliveryFilter): Delivery[] {
    const where: string[] = [];
    const params: Params = { limit: clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT) };
    const add = (sql: string, key: string, value: string | number | undefined): void => {
      if (value === undefined) return;
      where.push(sql);
      params[key] = value;
    };
    add('endpoint_id = @endpointId', 'endpointId', filter.endpointId);
    add('tenant_id = @tenantId', 'tenantId', filter.tenantId);
    add('event_id = @eventId', 'eventId', filter.eventId);
    add('status = @status', 'status', filter.status);
    add('created_at >= @since', 'since', filter.since);
    add('created_at < @until', 'until', filter.until);
    add('event_type = @eventType', 'eventType', filter.eventType);
    if (filter.after !== undefined) {
      where.push('(created_at < @afterCreatedAt OR (created_at = @afterCreatedAt AND id < @afterId))');
      params.afterCreatedAt = filter.after.createdAt;
      params.afterId = filter.after.id;
    }
    const sql = `SELECT * FROM deliveries ${whereClause(where)} ORDER BY created_at DESC, id DESC LIMIT @limit`;
    return this.#dynamic.get<DeliveryRow>(sql).all(params).map(deliveryFromRow);
  }

  listAttempts(deliveryId: string): Attempt[] {
    return this.#listAttempts.all({ id: deliveryId }).map(attemptFromRow);
  }

  count(): Readonly<Record<DeliveryStatus, number>> {
    const counts = Object.fromEntries(Object.values(Status).map((status) => [status, 0])) as Record<DeliveryStatus, number>;
    for (const { status, n } of this.#count.all()) {
      if (status in counts) counts[status as DeliveryStatus] = n;
    }
    return counts;
  }

  nextDueAt(): number | undefined {
    return this.#nextDueAt.get();
  }
}

