/**
 * Failures grouped by endpoint and failure kind in SQLite: counted over the partial indexes
 * `deliveries_failing` and `dead_letters_failing` (the failing rows only), each group's sample
 * read by one seek, and a group replayed.
 */
import type BetterSqlite3 from 'better-sqlite3';
import {
  failureGroupsLimit,
  mergeFailureGroups,
  sampledGroup,
  type FailureGroup,
  type FailureGroupCount,
  type FailureGroupFilter,
  type FailureGroupKey,
  type SampleSource,
} from '../failure-groups.ts';
import type { Outcome } from '../../model.ts';
import { fromJson, type JsonColumn } from '../sql-rows.ts';
import { scopeWhere } from './dead-letters.ts';
import { whereClause, type DynamicStatements, type Statement } from './sql.ts';

// The conditions are written out, not bound, as the partial indexes' own: only then does SQLite use them.
const RETRYING = `status = 'pending' AND last_failure_kind IS NOT NULL`;
const OPEN = `triage_state IN ('new', 'acknowledged') AND failure_kind IS NOT NULL`;

export class FailureGroupStatements {
  readonly #dynamic: DynamicStatements;
  readonly #latestRetrying: Statement<JsonColumn<Outcome>>;
  readonly #latestDead: Statement<JsonColumn<Outcome>>;
  readonly #resume: Statement;

  constructor(db: BetterSqlite3.Database, dynamic: DynamicStatements) {
    this.#dynamic = dynamic;
    this.#latestRetrying = db
      .prepare<unknown[], JsonColumn<Outcome>>(`SELECT outcome FROM attempts WHERE delivery_id = (
          SELECT id FROM deliveries WHERE ${RETRYING} AND endpoint_id = @endpointId AND last_failure_kind = @kind
          ORDER BY last_failure_at DESC LIMIT 1)
        ORDER BY id DESC LIMIT 1`)
      .pluck();
    this.#latestDead = db
      .prepare<unknown[], JsonColumn<Outcome>>(`SELECT last_outcome FROM dead_letters
        WHERE ${OPEN} AND endpoint_id = @endpointId AND failure_kind = @kind ORDER BY created_at DESC LIMIT 1`)
      .pluck();
    this.#resume = db.prepare(`UPDATE deliveries SET next_attempt_at = @now, updated_at = @now
      WHERE ${RETRYING} AND endpoint_id = @endpointId AND last_failure_kind = @kind AND next_attempt_at > @now`);
  }

  /** Both sides counted, merged and each group sampled. Reads several times: run it in a read transaction, for one snapshot. */
  groups(filter: FailureGroupFilter): FailureGroup[] {
    const groups = mergeFailureGroups(this.retrying(filter), this.dead(filter), failureGroupsLimit(filter));
    return groups.map((group) => sampledGroup(group, this.latest(group.sampleFrom, group)));
  }

  /** The retrying deliveries by (endpoint, kind). */
  retrying(filter: FailureGroupFilter): FailureGroupCount[] {
    return this.#count(filter, 'deliveries', 'last_failure_kind', 'last_failure_at', RETRYING);
  }

  /** The open dead letters by (endpoint, kind). */
  dead(filter: FailureGroupFilter): FailureGroupCount[] {
    return this.#count(filter, 'dead_letters', 'failure_kind', 'created_at', OPEN);
  }

  latest(source: SampleSource, key: FailureGroupKey): Outcome | undefined {
    const column = (source === 'retrying' ? this.#latestRetrying : this.#latestDead).get(key);
    return column === undefined ? undefined : fromJson(column);
  }

  /** Makes the group's retrying deliveries due at `now`; returns how many moved. */
  resume(key: FailureGroupKey, now: number): number {
    return this.#resume.run({ ...key, now }).changes;
  }

  #count(filter: FailureGroupFilter, table: string, kind: string, at: string, failing: string): FailureGroupCount[] {
    const { where, params } = scopeWhere(filter);
    const sql = `SELECT endpoint_id AS endpointId, max(tenant_id) AS tenantId, ${kind} AS kind, count(*) AS count,
        min(${at}) AS firstSeen, max(${at}) AS lastSeen
      FROM ${table} ${whereClause([failing, ...where])} GROUP BY endpoint_id, ${kind}`;
    return this.#dynamic.get<FailureGroupCount>(sql).all(params);
  }
}
