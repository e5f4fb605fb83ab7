/**
 * Slot leases and cluster membership in PostgreSQL. A lease row is taken,
 * renewed or left as it is by one upsert per call, whose conditions are
 * checked again on the row's newest version when two processes race for a
 * slot (READ COMMITTED re-evaluates an upsert's WHERE after waiting for the
 * other's row lock): at most one of them gets it, with the next epoch.
 * Epochs follow the rule in `../port.ts`: the upsert's `CASE` keeps the epoch
 * for the owner recorded on the row and increments it for any other taker.
 */
import type { LeaseRequest, NodeHeartbeat, NodeRecord, SlotLease } from '../port.ts';
import { leaseFromRow, nodeFromRow, type LeaseRow, type NodeRow } from '../sql-rows.ts';
import { named, type Sql, type Statement } from './sql.ts';

export class LeaseQueries {
  readonly #s: string;
  readonly #acquire: Statement;
  readonly #heartbeat: Statement;

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
  }

  async acquire(sql: Sql, request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, now, leaseMs } = request;
    const slots = [...new Set(request.slots)].sort((a, b) => a - b);
    if (slots.length === 0) return [];
    const rows = await sql.query<LeaseRow>(this.#acquire, [slots, owner, now + leaseMs, now]);
    return rows.map(leaseFromRow).sort((a, b) => a.slot - b.slot);
  }

  async release(sql: Sql, owner: string, slots: readonly number[]): Promise<void> {
    await sql.query(`UPDATE ${this.#s}.leases SET owner = NULL, until = 0 WHERE owner = $1 AND slot = ANY($2::int[])`, [owner, slots]);
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
}
