/**
 * Failures grouped by endpoint and failure kind in PostgreSQL: counted over the partial indexes
 * `deliveries_failing` and `dead_letters_failing` (the failing rows only, index-only), each
 * group's sample read by one seek, and a group's retrying deliveries made due.
 */
import {
  failureGroupsLimit,
  mergeFailureGroups,
  withSamples,
  type FailureGroup,
  type FailureGroupCount,
  type FailureGroupFilter,
  type FailureGroupKey,
  type SampleSource,
} from '../failure-groups.ts';
import type { Outcome } from '../../model.ts';
import { Conditions } from './delivery-log.ts';
import type { Sql } from './sql.ts';
import { workNotice } from './work-notice.ts';

// Written out, not bound, as the partial indexes' own conditions: only then can the planner use them.
const RETRYING = `status = 'pending' AND last_failure_kind IS NOT NULL`;
const OPEN = `triage_state IN ('new', 'acknowledged') AND failure_kind IS NOT NULL`;

interface CountRow {
  endpoint_id: string;
  tenant_id: string;
  kind: string;
  count: number | string;
  first_seen: number | string;
  last_seen: number | string;
}

export class FailureGroupQueries {
  readonly #s: string;

  constructor(schema: string) {
    this.#s = schema;
  }

  /** Both sides counted at once, merged, and each group sampled. */
  async groups(sql: Sql, filter: FailureGroupFilter): Promise<FailureGroup[]> {
    const [retrying, dead] = await Promise.all([this.retrying(sql, filter), this.dead(sql, filter)]);
    const groups = mergeFailureGroups(retrying, dead, failureGroupsLimit(filter));
    return withSamples(groups, (source, key) => this.latest(sql, source, key));
  }

  /** The retrying deliveries by (endpoint, kind). */
  async retrying(sql: Sql, filter: FailureGroupFilter): Promise<FailureGroupCount[]> {
    return this.#count(sql, filter, 'deliveries', 'last_failure_kind', 'last_failure_at', RETRYING);
  }

  /** The open dead letters by (endpoint, kind). */
  async dead(sql: Sql, filter: FailureGroupFilter): Promise<FailureGroupCount[]> {
    return this.#count(sql, filter, 'dead_letters', 'failure_kind', 'created_at', OPEN);
  }

  /** The outcome of the group's latest failure on the side named. */
  async latest(sql: Sql, source: SampleSource, key: FailureGroupKey): Promise<Outcome | undefined> {
    const rows =
      source === 'retrying'
        ? await sql.query<{ outcome: Outcome }>(
            `SELECT a.outcome FROM ${this.#s}.attempts a WHERE a.delivery_id = (
               SELECT id FROM ${this.#s}.deliveries WHERE ${RETRYING} AND endpoint_id = $1 AND last_failure_kind = $2
               ORDER BY last_failure_at DESC LIMIT 1)
             ORDER BY a.id DESC LIMIT 1`,
            [key.endpointId, key.kind],
          )
        : await sql.query<{ outcome: Outcome }>(
            `SELECT last_outcome AS outcome FROM ${this.#s}.dead_letters
             WHERE ${OPEN} AND endpoint_id = $1 AND failure_kind = $2 ORDER BY created_at DESC LIMIT 1`,
            [key.endpointId, key.kind],
          );
    return rows[0]?.outcome;
  }

  /** Makes the group's retrying deliveries due at `now`, and tells the other processes. */
  async resume(sql: Sql, key: FailureGroupKey, now: number): Promise<number> {
    const [row] = await sql.query<{ moved: number | string }>(
      `WITH moved AS (
         UPDATE ${this.#s}.deliveries SET next_attempt_at = $3, updated_at = $3
         WHERE ${RETRYING} AND endpoint_id = $1 AND last_failure_kind = $2 AND next_attempt_at > $3
         RETURNING 1
       )
       SELECT count(*) AS moved, CASE WHEN count(*) > 0 THEN ${workNotice(this.#s)} END AS notice FROM moved`,
      [key.endpointId, key.kind, now],
    );
    return Number(row?.moved ?? 0);
  }

  async #count(sql: Sql, filter: FailureGroupFilter, table: string, kind: string, at: string, failing: string): Promise<FailureGroupCount[]> {
    const where = new Conditions();
    where.always(failing);
    where.add('endpoint_id = $?', filter.endpointId);
    where.add('tenant_id = $?', filter.tenantId);
    const rows = await sql.query<CountRow>(
      `SELECT endpoint_id, max(tenant_id) AS tenant_id, ${kind} AS kind, count(*) AS count, min(${at}) AS first_seen, max(${at}) AS last_seen
       FROM ${this.#s}.${table} ${where.clause()} GROUP BY endpoint_id, ${kind}`,
      where.values,
    );
    return rows.map((row) => ({
      endpointId: row.endpoint_id,
      tenantId: row.tenant_id,
      kind: row.kind,
      count: Number(row.count),
      firstSeen: Number(row.first_seen),
      lastSeen: Number(row.last_seen),
    }));
  }
}
