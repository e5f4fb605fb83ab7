/**
 * Delivery minutes in PostgreSQL (`delivery_minutes`, lib/store/delivery-minutes.ts): a batch of
 * increments added to their (endpoint, minute) rows by one statement (`unnest` of one array per
 * column, so any batch is one round trip and one transaction), and a window of minutes summed over
 * an endpoint, a tenant or every endpoint: per minute (the charts) or per endpoint (the stats).
 */
import { byEndpointId, type DeliveryMinute, type DeliveryMinuteIncrement, type DeliveryMinutesQuery, type EndpointDeliveryTotals } from '../delivery-minutes.ts';
import { deliveryMinuteOf, deliveryTotalsOf, MINUTE_COLUMNS, MINUTE_COUNT_COLUMNS, minuteValuesOf, type DeliveryMinuteRow } from '../sql-rows.ts';
import { named, type Sql, type Statement } from './sql.ts';

export class DeliveryMinuteQueries {
  readonly #add: Statement;
  readonly #all: Statement;
  readonly #tenant: Statement;
  readonly #endpoints: Statement;
  readonly #totals: { readonly [K in DeliveryMinutesQuery['scope']['kind']]: Statement };

  constructor(schema: string) {
    const s = schema;
    const columns = MINUTE_COLUMNS.join(', ');
    const arrays = MINUTE_COLUMNS.map((_, i) => `$${i + 4}::integer[]`).join(', ');
    this.#add = named(s, 'add_delivery_minutes', `INSERT INTO ${s}.delivery_minutes (endpoint_id, minute, tenant_id, ${columns})
      SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], ${arrays})
      ON CONFLICT (endpoint_id, minute) DO UPDATE SET
        ${MINUTE_COLUMNS.map((c) => `${c} = ${s}.delivery_minutes.${c} + EXCLUDED.${c}`).join(', ')}`);
    const sums = MINUTE_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(', ');
    const select = (what: string, where: string): Statement =>
      named(s, what, `SELECT minute, ${sums} FROM ${s}.delivery_minutes
        WHERE ${where} minute >= $1 AND minute < $2 GROUP BY minute ORDER BY minute`);
    this.#all = select('delivery_minutes_all', '');
    this.#tenant = select('delivery_minutes_tenant', 'tenant_id = $3 AND');
    this.#endpoints = select('delivery_minutes_endpoints', 'endpoint_id = ANY($3::text[]) AND');
    const countSums = MINUTE_COUNT_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(', ');
    const totals = (what: string, where: string): Statement =>
      named(s, what, `SELECT endpoint_id, ${countSums} FROM ${s}.delivery_minutes
        WHERE ${where} minute >= $1 AND minute < $2 GROUP BY endpoint_id`);
    this.#totals = {
      all: totals('delivery_totals_all', ''),
      tenant: totals('delivery_totals_tenant', 'tenant_id = $3 AND'),
      endpoints: totals('delivery_totals_endpoints', 'endpoint_id = ANY($3::text[]) AND'),
    };
  }

  /** Adds every increment to its row, in one statement. */
  async add(sql: Sql, increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    const values = increments.map(minuteValuesOf);
    await sql.query(this.#add, [
      increments.map((inc) => inc.endpointId),
      increments.map((inc) => inc.minute),
      increments.map((inc) => inc.tenantId),
      ...MINUTE_COLUMNS.map((_, column) => values.map((row) => row[column])),
    ]);
  }

  async read(sql: Sql, query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    const { scope, from, to } = query;
    let rows: DeliveryMinuteRow[];
    if (scope.kind === 'all') rows = await sql.query<DeliveryMinuteRow>(this.#all, [from, to]);
    else if (scope.kind === 'tenant') rows = await sql.query<DeliveryMinuteRow>(this.#tenant, [from, to, scope.tenantId]);
    else if (scope.endpointIds.length === 0) rows = [];
    else rows = await sql.query<DeliveryMinuteRow>(this.#endpoints, [from, to, scope.endpointIds]);
    return rows.map(deliveryMinuteOf);
  }

  /** The window summed per endpoint, by endpoint id (sorted here: the database's collation may not be code unit order). */
  async totals(sql: Sql, query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    const { scope, from, to } = query;
    let rows: DeliveryMinuteRow[];
    if (scope.kind === 'all') rows = await sql.query<DeliveryMinuteRow>(this.#totals.all, [from, to]);
    else if (scope.kind === 'tenant') rows = await sql.query<DeliveryMinuteRow>(this.#totals.tenant, [from, to, scope.tenantId]);
    else if (scope.endpointIds.length === 0) rows = [];
    else rows = await sql.query<DeliveryMinuteRow>(this.#totals.endpoints, [from, to, scope.endpointIds]);
    return rows.map(deliveryTotalsOf).sort(byEndpointId);
  }
}
