/**
 * Delivery minutes in SQLite (`delivery_minutes`, lib/store/delivery-minutes.ts): increments added
 * to their (endpoint, minute) rows with one upsert each, and a window of minutes summed over an
 * endpoint, a tenant or every endpoint: per minute (the charts) or per endpoint (the stats).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { byEndpointId, type DeliveryMinute, type DeliveryMinuteIncrement, type DeliveryMinutesQuery, type EndpointDeliveryTotals } from '../delivery-minutes.ts';
import { deliveryMinuteOf, deliveryTotalsOf, MINUTE_COLUMNS, MINUTE_COUNT_COLUMNS, minuteValuesOf, type DeliveryMinuteRow } from '../sql-rows.ts';
import type { Statement } from './sql.ts';

const SUMS = MINUTE_COLUMNS.map((column) => `sum(${column}) AS ${column}`).join(', ');
const RANGE = 'minute >= @from AND minute < @to';
const BY_MINUTE = 'GROUP BY minute ORDER BY minute';
const COUNT_SUMS = MINUTE_COUNT_COLUMNS.map((column) => `sum(${column}) AS ${column}`).join(', ');

export class DeliveryMinuteStatements {
  readonly #add: Statement;
  readonly #all: Statement<DeliveryMinuteRow>;
  readonly #tenant: Statement<DeliveryMinuteRow>;
  readonly #endpoints: Statement<DeliveryMinuteRow>;
  readonly #totals: { readonly [K in DeliveryMinutesQuery['scope']['kind']]: Statement<DeliveryMinuteRow> };

  constructor(db: BetterSqlite3.Database) {
    this.#add = db.prepare(`INSERT INTO delivery_minutes (endpoint_id, minute, tenant_id, ${MINUTE_COLUMNS.join(', ')})
      VALUES (?, ?, ?, ${MINUTE_COLUMNS.map(() => '?').join(', ')})
      ON CONFLICT (endpoint_id, minute) DO UPDATE SET ${MINUTE_COLUMNS.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')}`);
    const select = (where: string) => db.prepare<unknown[], DeliveryMinuteRow>(`SELECT minute, ${SUMS} FROM delivery_minutes WHERE ${where} ${BY_MINUTE}`);
    this.#all = select(RANGE);
    this.#tenant = select(`tenant_id = @tenantId AND ${RANGE}`);
    this.#endpoints = select(`endpoint_id IN (SELECT value FROM json_each(@ids)) AND ${RANGE}`);
    const totals = (where: string) =>
      db.prepare<unknown[], DeliveryMinuteRow>(`SELECT endpoint_id, ${COUNT_SUMS} FROM delivery_minutes WHERE ${where} GROUP BY endpoint_id`);
    this.#totals = {
      all: totals(RANGE),
      tenant: totals(`tenant_id = @tenantId AND ${RANGE}`),
      endpoints: totals(`endpoint_id IN (SELECT value FROM json_each(@ids)) AND ${RANGE}`),
    };
  }

  /** Adds every increment to its row; run it in a transaction. */
  add(increments: readonly DeliveryMinuteIncrement[]): void {
    for (const inc of increments) this.#add.run(inc.endpointId, inc.minute, inc.tenantId, ...minuteValuesOf(inc));
  }

  read(query: DeliveryMinutesQuery): DeliveryMinute[] {
    const range = { from: query.from, to: query.to };
    const { scope } = query;
    let rows: DeliveryMinuteRow[];
    if (scope.kind === 'all') rows = this.#all.all(range);
    else if (scope.kind === 'tenant') rows = this.#tenant.all({ ...range, tenantId: scope.tenantId });
    else if (scope.endpointIds.length === 0) rows = [];
    else rows = this.#endpoints.all({ ...range, ids: JSON.stringify(scope.endpointIds) });
    return rows.map(deliveryMinuteOf);
  }

  /** The window summed per endpoint, by endpoint id. */
  totals(query: DeliveryMinutesQuery): EndpointDeliveryTotals[] {
    const range = { from: query.from, to: query.to };
    const { scope } = query;
    let rows: DeliveryMinuteRow[];
    if (scope.kind === 'all') rows = this.#totals.all.all(range);
    else if (scope.kind === 'tenant') rows = this.#totals.tenant.all({ ...range, tenantId: scope.tenantId });
    else if (scope.endpointIds.length === 0) rows = [];
    else rows = this.#totals.endpoints.all({ ...range, ids: JSON.stringify(scope.endpointIds) });
    return rows.map(deliveryTotalsOf).sort(byEndpointId);
  }
}
