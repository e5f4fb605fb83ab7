/**
 * Dead letters in PostgreSQL: listing them with the attempts of the round
 * that died, replaying them (their deliveries back to pending, a new round,
 * the same event id), their triage (acknowledged, discarded), and the
 * unreviewed ones the review check watches.
 */
import { listedStates, OPEN_TRIAGE_STATES, replayableStates, TRIAGE_STATES, triageOutcome, type TriageOutcome } from '../triage.ts';
import type { DeadLetter, TriageState } from '../../model.ts';
import type { DeadLetterFilter, ReplayableDeadLetter, TriageRequest, UnreviewedDeadLetters } from '../port.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../list-limit.ts';
import { Conditions } from './delivery-log.ts';
import { deadLetterFromRow, type AttemptRow, type DeadLetterRow } from '../sql-rows.ts';
import type { Sql } from './sql.ts';
import { workNotice } from './work-notice.ts';

/** Dead letters per replay statement, so a huge replay never holds many rows locked for long. */
export const REPLAY_CHUNK = 500;

export class DeadLetterQueries {
  readonly #s: string;

  constructor(schema: string) {
    this.#s = schema;
  }

  /** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
  async get(sql: Sql, id: string): Promise<DeadLetter | undefined> {
    const rows = await sql.query<DeadLetterRow>(`SELECT * FROM ${this.#s}.dead_letters WHERE id = $1`, [id]);
    return (await this.#withAttempts(sql, rows))[0];
  }

  /** Newest first (ties: the later inserted first); `after` continues a listing past its last row. */
  async list(sql: Sql, filter: DeadLetterFilter): Promise<DeadLetter[]> {
    const where = filterConditions(filter);
    // Past the page's last row in the listing's order; a vanished one (seq 0) leaves none of its millisecond.
    where.add(
      `(created_at, seq) < ($?, coalesce((SELECT seq FROM ${this.#s}.dead_letters WHERE id = $?), 0))`,
      filter.after?.createdAt,
      filter.after?.id,
    );
    const limit = where.value(clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT));
    const rows = await sql.query<DeadLetterRow>(
      `SELECT * FROM ${this.#s}.dead_letters ${where.clause()} ORDER BY created_at DESC, seq DESC LIMIT ${limit}`,
      where.values,
    );
    return this.#withAttempts(sql, rows);
  }

  /**
   * Replays the named dead letters not yet replayed, in one statement, and tells the other
   * processes. A delivery whose endpoint was deleted stays dead (replaying it would leave it
   * pending forever): its dead letter is skipped. Returns the ids replayed, oldest first.
   */
  async replay(sql: Sql, ids: readonly string[], now: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await sql.query<{ id: string; notice: unknown }>(
      `WITH chosen AS (
         SELECT id, delivery_id FROM ${this.#s}.dead_letters WHERE id = ANY($1::text[]) AND replayed_at IS NULL
       ),
       revived AS (
         UPDATE ${this.#s}.deliveries d SET status = 'pending', attempts = 0, round = d.round + 1, next_attempt_at = $2,
           last_error = NULL, delivered_at = NULL, updated_at = $2, last_failure_kind = NULL, last_failure_at = NULL
         FROM chosen c
         WHERE d.id = c.delivery_id AND d.status = 'dead'
           AND EXISTS (SELECT 1 FROM ${this.#s}.endpoints e WHERE e.id = d.endpoint_id)
         RETURNING c.id
       ),
       marked AS (
         UPDATE ${this.#s}.dead_letters dl SET replayed_at = $2, triage_state = 'replayed', triage_at = $2 FROM revived r WHERE dl.id = r.id
         RETURNING dl.id, dl.created_at, dl.seq
       )
       SELECT id, NULL AS notice FROM (SELECT id, created_at, seq FROM marked ORDER BY created_at, seq) replayed
       UNION ALL
       SELECT NULL, ${workNotice(this.#s)} FROM (SELECT 1 FROM marked LIMIT 1) any_replayed`,
      [ids, now],
    );
    return rows.filter((row) => row.id !== null).map((row) => row.id);
  }

  /** The next page of open dead letters matching `filter`, oldest first, after a keyset cursor. */
  async unreplayedPage(
    sql: Sql,
    filter: DeadLetterFilter,
    after: { createdAt: number; seq: number },
    limit = REPLAY_CHUNK,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<{ id: string; deliveryId: string; endpointId: string; createdAt: number; seq: number }[]> {
    const states = replayableStates(filter);
    if (states.length === 0) return [];
    const where = filterConditions(filter, states);
    where.add('(created_at, seq) > ($?, $?)', after.createdAt, after.seq);
    if (exceptEndpointIds.length > 0) where.add('NOT (endpoint_id = ANY($?::text[]))', exceptEndpointIds);
    const rows = await sql.query<{ id: string; delivery_id: string; endpoint_id: string; created_at: number; seq: number }>(
      `SELECT id, delivery_id, endpoint_id, created_at, seq FROM ${this.#s}.dead_letters ${where.clause()} ORDER BY created_at, seq LIMIT ${Math.floor(limit)}`,
      where.values,
    );
    return rows.map((row) => ({ id: row.id, deliveryId: row.delivery_id, endpointId: row.endpoint_id, createdAt: Number(row.created_at), seq: Number(row.seq) }));
  }

  /** `unreplayedPage` after the dead letter `afterId` (its creation time and sequence), or from the start. */
  async replayablePage(
    sql: Sql,
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    const [cursor] = afterId === null ? [] : await sql.query<{ created_at: number; seq: number }>(
      `SELECT created_at, seq FROM ${this.#s}.dead_letters WHERE id = $1`,
      [afterId],
    );
    const after = cursor === undefined ? { createdAt: Number.MIN_SAFE_INTEGER, seq: 0 } : { createdAt: Number(cursor.created_at), seq: Number(cursor.seq) };
    return (await this.unreplayedPage(sql, filter, after, limit, exceptEndpointIds)).map(({ id, deliveryId, endpointId }) => ({ id, deliveryId, endpointId }));
  }

  /** How many of the open dead letters matching `filter` a replay would revive (the conditions of `replay`). */
  async countReplayable(sql: Sql, filter: DeadLetterFilter): Promise<number> {
    const states = replayableStates(filter);
    if (states.length === 0) return 0;
    const where = filterConditions(filter, states);
    where.always(`EXISTS (SELECT 1 FROM ${this.#s}.deliveries d JOIN ${this.#s}.endpoints e ON e.id = d.endpoint_id
      WHERE d.id = dead_letters.delivery_id AND d.status = 'dead')`);
    const [row] = await sql.query<{ count: number | string }>(
      `SELECT count(*)::int AS count FROM ${this.#s}.dead_letters ${where.clause()}`,
      where.values,
    );
    return Number(row?.count ?? 0);
  }

  /**
   * Sets the triage of the open ones among `request.ids`, in one statement: the rows are locked
   * first, so the states read are those the update acts on.
   */
  async triage(sql: Sql, request: TriageRequest, now: number): Promise<TriageOutcome> {
    const rows = await sql.query<{ id: string; triage_state: TriageState }>(
      `WITH locked AS (
         SELECT id, triage_state FROM ${this.#s}.dead_letters WHERE id = ANY($1::text[]) FOR UPDATE
       ),
       updated AS (
         UPDATE ${this.#s}.dead_letters d SET triage_state = $2, triage_note = $3, triage_by = $4, triage_at = $5
         FROM locked l WHERE d.id = l.id AND l.triage_state IN (${statesSql(OPEN_TRIAGE_STATES)})
         RETURNING d.id
       )
       SELECT id, triage_state FROM locked`,
      [[...new Set(request.ids)], request.state, request.note, request.by, now],
    );
    return triageOutcome(request.ids, new Map(rows.map((row) => [row.id, row.triage_state])));
  }

  /** 'new' is written out, not bound, so the planner can use the partial index dead_letters_unreviewed. */
  async unreviewed(sql: Sql, cap: number): Promise<UnreviewedDeadLetters> {
    const [row] = await sql.query<{ count: number | string; oldest_at: number | string | null }>(
      `SELECT (SELECT count(*) FROM (SELECT 1 FROM ${this.#s}.dead_letters WHERE triage_state = 'new' LIMIT $1) c)::int AS count,
              (SELECT min(created_at) FROM ${this.#s}.dead_letters WHERE triage_state = 'new') AS oldest_at`,
      [Math.max(0, Math.floor(cap))],
    );
    return { count: Number(row?.count ?? 0), oldestAt: row?.oldest_at === null || row?.oldest_at === undefined ? null : Number(row.oldest_at) };
  }

  /** The rows as dead letters, with the attempts of each one's round: one query for all of them. */
  async #withAttempts(sql: Sql, rows: readonly DeadLetterRow[]): Promise<DeadLetter[]> {
    if (rows.length === 0) return [];
    const attempts = await sql.query<AttemptRow>(
      `SELECT a.* FROM ${this.#s}.attempts a
       JOIN unnest($1::text[], $2::int[]) AS r(delivery_id, round) ON a.delivery_id = r.delivery_id AND a.round = r.round
       ORDER BY a.id`,
      [rows.map((row) => row.delivery_id), rows.map((row) => row.round)],
    );
    const byRound = new Map<string, AttemptRow[]>();
    for (const attempt of attempts) {
      const key = `${attempt.delivery_id}\0${attempt.round}`;
      const list = byRound.get(key);
      if (list === undefined) byRound.set(key, [attempt]);
      else list.push(attempt);
    }
    return rows.map((row) => deadLetterFromRow(row, byRound.get(`${row.delivery_id}\0${row.round}`) ?? []));
  }
}

function filterConditions(filter: DeadLetterFilter, states: readonly TriageState[] = listedStates(filter)): Conditions {
  const where = new Conditions();
  where.add('endpoint_id = $?', filter.endpointId);
  where.add('tenant_id = $?', filter.tenantId);
  where.add('failure_kind = $?', filter.failureKind);
  where.add('created_at >= $?', filter.since);
  where.add('created_at < $?', filter.until);
  if (states.length < TRIAGE_STATES.length) where.always(`triage_state IN (${statesSql(states)})`);
  return where;
}

/** States as SQL literals: they are the model's constants, never input. */
function statesSql(states: readonly TriageState[]): string {
  return states.map((state) => `'${state}'`).join(', ');
}
