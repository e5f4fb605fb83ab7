/**
 * Slot leases and cluster membership in SQLite. A lease row is taken,
 * renewed or left as it is by one upsert per slot; the write lock the
 * caller's transaction holds means two processes never race for a slot.
 * Epochs follow the rule in `../port.ts`: the upsert's `CASE` keeps the epoch
 * for the owner recorded on the row and increments it for any other taker.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { NodeHeartbeat, NodeRecord, SlotLease, SlotOpenCount, SlotWeights } from '../port.ts';
import { leaseFromRow, nodeFromRow, SLOT_WEIGHTS_KEY, slotWeightsFromText, slotWeightsToText, type LeaseRow, type NodeRow } from '../sql-rows.ts';
import type { Statement } from './sql.ts';

export class LeaseStatements {
  readonly #acquire: Statement;
  readonly #held: Statement<LeaseRow>;
  readonly #release: Statement;
  readonly #list: Statement<LeaseRow>;
  readonly #owned: Statement<{ epoch: number }>;
  readonly #heartbeat: Statement;
  readonly #listNodes: Statement<NodeRow>;
  readonly #removeNode: Statement;
  readonly #countOpen: Statement<SlotOpenCount>;
  readonly #getWeights: Statement<{ value: string }>;
  readonly #putWeights: Statement;
  readonly #initSlotCount: Statement;
  readonly #getSlotCount: Statement<string>;

  constructor(db: BetterSqlite3.Database) {
    this.#acquire = db.prepare(`INSERT INTO leases (slot, owner, until, epoch) VALUES (@slot, @owner, @until, 1)
      ON CONFLICT (slot) DO UPDATE SET
        epoch = CASE WHEN leases.owner = excluded.owner THEN leases.epoch ELSE leases.epoch + 1 END,
        owner = excluded.owner,
        until = excluded.until
      WHERE leases.owner IS NULL OR leases.until <= @now OR leases.owner = excluded.owner`);
    this.#held = db.prepare<unknown[], LeaseRow>(`SELECT slot, owner, until, epoch FROM leases
      WHERE owner = @owner AND until > @now AND slot IN (SELECT value FROM json_each(@slots)) ORDER BY slot`);
    this.#release = db.prepare(`UPDATE leases SET owner = NULL, until = 0
      WHERE owner = @owner AND slot IN (SELECT value FROM json_each(@slots))`);
    this.#list = db.prepare<unknown[], LeaseRow>(`SELECT slot, owner, until, epoch FROM leases WHERE owner IS NOT NULL ORDER BY slot`);
    this.#owned = db.prepare<unknown[], { epoch: number }>(`SELECT epoch FROM leases WHERE slot = @slot AND owner = @owner AND until > @now`);
    this.#heartbeat = db.prepare(`INSERT INTO nodes (id, started_at, seen_at, in_flight, clock_offset_ms)
      VALUES (@id, @startedAt, @now, @inFlight, @clockOffsetMs)
      ON CONFLICT (id) DO UPDATE SET
        seen_at = MAX(nodes.seen_at, excluded.seen_at),
        in_flight = excluded.in_flight,
        clock_offset_ms = excluded.clock_offset_ms`);
    this.#listNodes = db.prepare<unknown[], NodeRow>(
      `SELECT id, started_at, seen_at, in_flight, clock_offset_ms FROM nodes WHERE seen_at >= ? ORDER BY id`);
    this.#removeNode = db.prepare(`DELETE FROM nodes WHERE id = ?`);
    // Two index-only walks: deliveries_pending_claim (slot, endpoint_id, next_attempt_at) and deliveries_in_flight (slot, …).
    this.#countOpen = db.prepare<unknown[], SlotOpenCount>(`SELECT slot, sum(n) AS open FROM (
        SELECT slot, count(*) AS n FROM deliveries WHERE status = 'pending' AND next_attempt_at <= @now GROUP BY slot
        UNION ALL
        SELECT slot, count(*) AS n FROM deliveries WHERE status = 'in_flight' GROUP BY slot)
      GROUP BY slot ORDER BY slot`);
    this.#getWeights = db.prepare<unknown[], { value: string }>(`SELECT value FROM meta WHERE key = '${SLOT_WEIGHTS_KEY}'`);
    this.#putWeights = db.prepare(`INSERT INTO meta (key, value) VALUES ('${SLOT_WEIGHTS_KEY}', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`);
    this.#initSlotCount = db.prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('slot_count', ?)`);
    this.#getSlotCount = db.prepare<unknown[], string>(`SELECT value FROM meta WHERE key = 'slot_count'`).pluck();
  }

  /**
   * Takes or renews `slots` for `owner` until `now + leaseMs` and answers the leases it holds
   * among them. Writes a row per slot: run it in a transaction.
   */
  acquire(owner: string, slots: readonly number[], now: number, leaseMs: number): SlotLease[] {
    const until = now + leaseMs;
    for (const slot of slots) this.#acquire.run({ slot, owner, until, now });
    return this.#held.all({ owner, now, slots: JSON.stringify(slots) }).map(leaseFromRow);
  }

  release(owner: string, slots: readonly number[]): void {
    this.#release.run({ owner, slots: JSON.stringify(slots) });
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  list(): SlotLease[] {
    return this.#list.all().map(leaseFromRow);
  }

  /** The epoch of `slot` while `owner` holds it at `now`; undefined when it does not. */
  ownedEpoch(slot: number, owner: string, now: number): number | undefined {
    return this.#owned.get({ slot, owner, now })?.epoch;
  }

  heartbeat(node: NodeHeartbeat): void {
    const { id, startedAt, now, inFlight } = node;
    this.#heartbeat.run({ id, startedAt, now, inFlight, clockOffsetMs: Math.round(node.clockOffsetMs) });
  }

  listNodes(seenSince: number): NodeRecord[] {
    return this.#listNodes.all(seenSince).map(nodeFromRow);
  }

  removeNode(id: string): void {
    this.#removeNode.run(id);
  }

  countOpenBySlot(now: number): SlotOpenCount[] {
    return this.#countOpen.all({ now });
  }

  getSlotWeights(): SlotWeights | undefined {
    const row = this.#getWeights.get();
    return row === undefined ? undefined : slotWeightsFromText(row.value);
  }

  putSlotWeights(weights: SlotWeights): void {
    this.#putWeights.run(slotWeightsToText(weights));
  }

  /** Stores `wanted` unless a slot count is stored already; answers the stored one (`../slot-count.ts`). Run it in a transaction. */
  fixSlotCount(wanted: number): number {
    this.#initSlotCount.run(String(wanted));
    return Number(this.#getSlotCount.get());
  }
}
