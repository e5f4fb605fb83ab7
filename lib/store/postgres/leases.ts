/**
 * Slot leases and cluster membership in PostgreSQL. A lease row is taken,
 * renewed or left as it is by one upsert per call, whose conditions are
 * checked again on the row's newest version when two processes race for a
 * slot (READ COMMITTED re-evaluates an upsert's WHERE after waiting for the
 * other's row lock): at most one of them gets it, with the next epoch.
 * Epochs follow the rule in `../port.ts`: the upsert's `CASE` keeps the epoch
 * for the owner recorded on the row and increments it for any other taker.
 */
import type { LeaseRequest, NodeHeartbeat, NodeRecord, SlotLease, SlotOpenCount, SlotWeights } from '../port.ts';
import { leaseFromRow, nodeFromRow, SLOT_WEIGHTS_KEY, slotWeightsFromText, slotWeightsToText, type LeaseRow, type NodeRow } from '../sql-rows.ts';
import { named, type Sql, type Statement } from './sql.ts';

export class LeaseQueries {
  readonly #s: string;
  readonly #acquire: Statement;
  readonly #heartbeat: Statement;
  readonly #countOpen: Statement;
  /** The statement one node runs at each heartbeat, for its plan (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'countOpenBySlot', Statement>>;

  constructor(schema: string) {
    const s = schema;
    this.#s = s;
    // RETURNING gives exactly the rows the owner took or renewed: the leases it holds among `slots`.
    // Slots are upserted in order, so two processes asking for overlapping sets lock rows in the same order.
    this.#acquire = named(s, 'leases_acquire', `
      INSERT INTO ${s}.leases AS l (slot, owner, until, epoch)
      SELECT slot, $2, $3, 1 FROM unnest($1::int[]) AS slot ORDER BY slot
      ON CONFLICT (slot) DO UPDATE SET
        epoch = CASE WHEN l.owner = excluded.owner THEN l.epoch ELSE l.epoch + 1 END,
        owner = excluded.owner,
        until = excluded.until
      WHERE l.owner IS NULL OR l.until <= $4 OR l.owner = excluded.owner
      RETURNING l.slot, l.owner, l.until, l.epoch`);
    this.#heartbeat = named(s, 'nodes_heartbeat', `
      INSERT INTO ${s}.nodes AS n (id, started_at, seen_at, in_flight, clock_offset_ms) VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (id) DO UPDATE SET
        seen_at = GREATEST(n.seen_at, excluded.seen_at),
        in_flight = excluded.in_flight,
        clock_offset_ms = excluded.clock_offset_ms`);
    // Index-only scans of deliveries_pending_claim (slot, endpoint_id, next_attempt_at, id) and
    // deliveries_in_flight (slot, lease_epoch), both partial on their status.
    this.#countOpen = named(s, 'slots_count_open', `
      SELECT slot, sum(n)::int AS open FROM (
        SELECT slot, count(*) AS n FROM ${s}.deliveries WHERE status = 'pending' AND next_attempt_at <= $1 GROUP BY slot
        UNION ALL
        SELECT slot, count(*) AS n FROM ${s}.deliveries WHERE status = 'in_flight' GROUP BY slot) AS open
      GROUP BY slot ORDER BY slot`);
    this.statements = { countOpenBySlot: this.#countOpen };
  }

  async acquire(sql: Sql, request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, now, leaseMs } = request;
    const slots = [...new Set(request.slots)].sort((a, b) => a - b);
    if (slots.length === 0) return [];
    const rows = await sql.query<LeaseRow>(this.#acquire, [slots, owner, now + leaseMs, now]);
    return rows.map(leaseFromRow).sort((a, b) => a.slot - b.slot);
  }

  async release(sql: Sql, owner: string, slots: readonly number[]): Promise<void> {
    // Rows locked in slot order, as `acquire` locks them: a plain UPDATE locks them in the order it
    // finds them, and a release crossing another node's acquire of the same slots deadlocked (seen in
    // the scaleout bench, once slots moved under load).
    await sql.query(`UPDATE ${this.#s}.leases AS l SET owner = NULL, until = 0
      FROM (SELECT slot FROM ${this.#s}.leases WHERE owner = $1 AND slot = ANY($2::int[]) ORDER BY slot FOR UPDATE) AS mine
      WHERE l.slot = mine.slot AND l.owner = $1`, [owner, slots]);
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  async list(sql: Sql): Promise<SlotLease[]> {
    return (await sql.query<LeaseRow>(
      `SELECT slot, owner, until, epoch FROM ${this.#s}.leases WHERE owner IS NOT NULL ORDER BY slot`)).map(leaseFromRow);
  }

  /**
   * The server's wall clock now: `clock_timestamp()`, which moves during a statement, unlike
   * `now()` (the transaction's start). float8 keeps its microseconds as a fraction of a ms.
   */
  async serverTime(sql: Sql): Promise<number> {
    const [row] = await sql.query<{ ms: number }>(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`);
    return Number(row?.ms);
  }

  async heartbeat(sql: Sql, node: NodeHeartbeat): Promise<void> {
    await sql.query(this.#heartbeat, [node.id, node.startedAt, node.now, node.inFlight, Math.round(node.clockOffsetMs)]);
  }

  async listNodes(sql: Sql, seenSince: number): Promise<NodeRecord[]> {
    const rows = await sql.query<NodeRow>(
      `SELECT id, started_at, seen_at, in_flight, clock_offset_ms FROM ${this.#s}.nodes WHERE seen_at >= $1 ORDER BY id`, [seenSince]);
    return rows.map(nodeFromRow);
  }

  async removeNode(sql: Sql, id: string): Promise<void> {
    await sql.query(`DELETE FROM ${this.#s}.nodes WHERE id = $1`, [id]);
  }

  async countOpenBySlot(sql: Sql, now: number): Promise<SlotOpenCount[]> {
    return sql.query<SlotOpenCount>(this.#countOpen, [now]);
  }

  async getSlotWeights(sql: Sql): Promise<SlotWeights | undefined> {
    const rows = await sql.query<{ value: string }>(`SELECT value FROM ${this.#s}.meta WHERE key = '${SLOT_WEIGHTS_KEY}'`);
    return rows[0] === undefined ? undefined : slotWeightsFromText(rows[0].value);
  }

  async putSlotWeights(sql: Sql, weights: SlotWeights): Promise<void> {
    await sql.query(
      `INSERT INTO ${this.#s}.meta (key, value) VALUES ('${SLOT_WEIGHTS_KEY}', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      [slotWeightsToText(weights)],
    );
  }

  /** Stores `wanted` unless a slot count is stored already; answers the stored one (`../slot-count.ts`), in one statement. */
  async fixSlotCount(sql: Sql, wanted: number): Promise<number> {
    const [row] = await sql.query<{ value: string }>(
      `WITH added AS (
         INSERT INTO ${this.#s}.meta (key, value) VALUES ('slot_count', $1) ON CONFLICT (key) DO NOTHING RETURNING value
       )
       SELECT value FROM added UNION ALL SELECT value FROM ${this.#s}.meta WHERE key = 'slot_count'`,
      [String(wanted)],
    );
    return Number(row!.value);
  }
}
