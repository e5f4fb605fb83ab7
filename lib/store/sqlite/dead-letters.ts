/**
 * Dead letters in SQLite: listing them with the attempts of the round that
 * died, replaying them (their deliveries back to pending, a new round, the
 * same event id), their triage (acknowledged, discarded), and the unreviewed
 * ones the review check watches.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { listedStates, replayableStates, TRIAGE_STATES, triageOutcome, type TriageOutcome } from '../triage.ts';
import type { DeadLetter, TriageState } from '../../model.ts';
import type { DeadLetterFilter, ReplayableDeadLetter, TriageRequest, UnreviewedDeadLetters } from '../port.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../list-limit.ts';
import { deadLetterFromRow, type AttemptRow, type DeadLetterRow } from '../sql-rows.ts';
import { whereClause, type DynamicStatements, type Params, type Statement } from './sql.ts';

/** Dead letters per replay transaction, so other processes get the write lock in between. */
export const REPLAY_CHUNK = 500;

const TRIAGE_STATE_COUNT = TRIAGE_STATES.length;

export class DeadLetterStatements {
  readonly #dynamic: DynamicStatements;
  readonly #get: Statement<DeadLetterRow>;
  readonly #roundAttempts: Statement<AttemptRow>;
  readonly #unreplayedByIds: Statement<DeadLetterRow>;
  readonly #replayDelivery: Statement;
  readonly #markReplayed: Statement;
  readonly #statesByIds: Statement<{ id: string; triage_state: TriageState }>;
  readonly #setTriage: Statement;
  readonly #countUnreviewed: Statement<number>;
  readonly #oldestUnreviewed: Statement<number | null>;

  constructor(db: BetterSqlite3.Database, dynamic: DynamicStatements) {
    this.#dynamic = dynamic;
    this.#get = db.prepare<unknown[], DeadLetterRow>(`SELECT * FROM dead_letters WHERE id = ?`);
    this.#roundAttempts = db.prepare<unknown[], AttemptRow>(`SELECT * FROM attempts WHERE delivery_id = ? AND round = ? ORDER BY id`);
    this.#unreplayedByIds = db.prepare<unknown[], DeadLetterRow>(`SELECT * FROM dead_letters
      WHERE id IN (SELECT value FROM json_each(?)) AND replayed_at IS NULL ORDER BY created_at, id`);
    // A delivery whose endpoint was deleted stays dead: replaying it would leave it pending forever.
    this.#replayDelivery = db.prepare(`UPDATE deliveries SET status = 'pending', attempts = 0, round = round + 1,
        next_attempt_at = @now, last_error = NULL, delivered_at = NULL, updated_at = @now, last_failure_kind = NULL, last_failure_at = NULL
      WHERE id = @id AND status = 'dead' AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id)`);
    this.#markReplayed = db.prepare(`UPDATE dead_letters SET replayed_at = @now, triage_state = 'replayed', triage_at = @now WHERE id = @id`);
    this.#statesByIds = db.prepare<unknown[], { id: string; triage_state: TriageState }>(
      `SELECT id, triage_state FROM dead_letters WHERE id IN (SELECT value FROM json_each(?))`,
    );
    this.#setTriage = db.prepare(`UPDATE dead_letters SET triage_state = @state, triage_note = @note, triage_by = @by, triage_at = @now
      WHERE id IN (SELECT value FROM json_each(@ids))`);
    // 'new' written out, not bound: only then does SQLite use the partial index dead_letters_unreviewed.
    this.#countUnreviewed = db
      .prepare<unknown[], number>(`SELECT count(*) FROM (SELECT 1 FROM dead_letters WHERE triage_state = 'new' LIMIT ?)`)
      .pluck();
    this.#oldestUnreviewed = db.prepare<unknown[], number | null>(`SELECT min(created_at) FROM dead_letters WHERE triage_state = 'new'`).pluck();
  }

  get(id: string): DeadLetter | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : this.#fromRow(row);
  }

  list(filter: DeadLetterFilter): DeadLetter[] {
    const { where, params } = deadLetterWhere(filter);
    params['limit'] = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
    if (filter.after !== undefined) {
      // Past the page's last row in the listing's order; a vanished one (rowid 0) leaves none of its millisecond.
      where.push('(created_at, rowid) < (@afterCreatedAt, coalesce((SELECT rowid FROM dead_letters WHERE id = @afterId), 0))');
      params['afterCreatedAt'] = filter.after.createdAt;
      params['afterId'] = filter.after.id;
    }
    const sql = `SELECT * FROM dead_letters ${whereClause(where)} ORDER BY created_at DESC, rowid DESC LIMIT @limit`;
    return this.#dynamic.get<DeadLetterRow>(sql).all(params).map((row) => this.#fromRow(row));
  }

  /** The named dead letters not yet replayed, oldest first. */
  unreplayed(ids: readonly string[]): DeadLetterRow[] {
    return this.#unreplayedByIds.all(JSON.stringify(ids));
  }

  /**
   * The next `REPLAY_CHUNK` open dead letters that match `filter`, oldest first, after a keyset
   * cursor; none of the endpoints in `exceptEndpointIds`.
   */
  unreplayedPage(
    filter: DeadLetterFilter,
    after: { readonly createdAt: number; readonly id: string },
    limit = REPLAY_CHUNK,
    exceptEndpointIds: readonly string[] = [],
  ): DeadLetterRow[] {
    const { where, params } = deadLetterWhere(filter, replayableStates(filter));
    where.push('(created_at, id) > (@afterCreatedAt, @afterId)');
    if (exceptEndpointIds.length > 0) {
      where.push('endpoint_id NOT IN (SELECT value FROM json_each(@exceptEndpointIds))');
      params['exceptEndpointIds'] = JSON.stringify(exceptEndpointIds);
    }
    const sql = `SELECT * FROM dead_letters ${whereClause(where)} ORDER BY created_at, id LIMIT ${Math.floor(limit)}`;
    return this.#dynamic.get<DeadLetterRow>(sql).all({ ...params, afterCreatedAt: after.createdAt, afterId: after.id });
  }

  /** `unreplayedPage` after the dead letter `afterId` (its creation time and id), or from the start. */
  replayablePage(filter: DeadLetterFilter, afterId: string | null, limit: number, exceptEndpointIds: readonly string[] = []): ReplayableDeadLetter[] {
    const cursor = afterId === null ? undefined : this.#get.get(afterId);
    const after = cursor === undefined ? { createdAt: Number.MIN_SAFE_INTEGER, id: '' } : { createdAt: cursor.created_at, id: cursor.id };
    return this.unreplayedPage(filter, after, limit, exceptEndpointIds).map((row) => ({ id: row.id, deliveryId: row.delivery_id, endpointId: row.endpoint_id }));
  }

  /** How many of the open dead letters matching `filter` a replay would revive (the conditions of `replay`). */
  countReplayable(filter: DeadLetterFilter): number {
    const { where, params } = deadLetterWhere(filter, replayableStates(filter));
    where.push(`EXISTS (SELECT 1 FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
      WHERE d.id = dead_letters.delivery_id AND d.status = 'dead')`);
    return this.#dynamic.get<number>(`SELECT count(*) FROM dead_letters ${whereClause(where)}`).pluck().get(params) ?? 0;
  }

  /** Replays `rows`, answering the ids of those replayed. Writes two rows each: run it in a transaction. */
  replay(rows: readonly DeadLetterRow[], now: number): string[] {
    const ids: string[] = [];
    for (const row of rows) {
      if (this.#replayDelivery.run({ id: row.delivery_id, now }).changes === 0) continue;
      this.#markReplayed.run({ id: row.id, now });
      ids.push(row.id);
    }
    return ids;
  }

  /** Sets the triage of the open ones among `request.ids`. Reads, then writes: run it in a transaction. */
  triage(request: TriageRequest, now: number): TriageOutcome {
    const found = new Map(this.#statesByIds.all(JSON.stringify(request.ids)).map((row) => [row.id, row.triage_state]));
    const outcome = triageOutcome(request.ids, found);
    if (outcome.applied.length > 0) {
      this.#setTriage.run({ ids: JSON.stringify(outcome.applied), state: request.state, note: request.note, by: request.by, now });
    }
    return outcome;
  }

  unreviewed(cap: number): UnreviewedDeadLetters {
    return { count: this.#countUnreviewed.get(Math.max(0, Math.floor(cap))) ?? 0, oldestAt: this.#oldestUnreviewed.get() ?? null };
  }

  /** The row as a dead letter, with the attempts of the round that died. */
  #fromRow(row: DeadLetterRow): DeadLetter {
    return deadLetterFromRow(row, this.#roundAttempts.all(row.delivery_id, row.round));
  }

}

/** `endpoint_id = @endpointId`, `tenant_id = @tenantId`: the conditions for the ones `filter` names. */
export function scopeWhere(filter: { readonly endpointId?: string; readonly tenantId?: string }): { where: string[]; params: Params } {
  const where: string[] = [];
  const params: Params = {};
  if (filter.endpointId !== undefined) {
    where.push('endpoint_id = @endpointId');
    params['endpointId'] = filter.endpointId;
  }
  if (filter.tenantId !== undefined) {
    where.push('tenant_id = @tenantId');
    params['tenantId'] = filter.tenantId;
  }
  return { where, params };
}

function deadLetterWhere(filter: DeadLetterFilter, states: readonly TriageState[] = listedStates(filter)): { where: string[]; params: Params } {
  const { where, params } = scopeWhere(filter);
  if (filter.failureKind !== undefined) {
    where.push('failure_kind = @failureKind');
    params['failureKind'] = filter.failureKind;
  }
  if (filter.since !== undefined) {
    where.push('created_at >= @since');
    params['since'] = filter.since;
  }
  if (filter.until !== undefined) {
    where.push('created_at < @until');
    params['until'] = filter.until;
  }
  // The states are constants of the model, safe to write out (and one statement per set of them).
  if (states.length < TRIAGE_STATE_COUNT) where.push(`triage_state IN (${states.map((state) => `'${state}'`).join(', ')})`);
  return { where, params };
}
