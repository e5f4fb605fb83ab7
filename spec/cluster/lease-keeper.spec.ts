import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, type Clock } from '../../lib/clock.ts';
import { ClusterClock } from '../../lib/cluster/cluster-clock.ts';
import { LeaseKeeper, type LeaseKeeperDeps } from '../../lib/cluster/lease-keeper.ts';
import type { LeaseRequest, Store } from '../../lib/store/port.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';

const SLOTS = 64;
const LEASE_MS = 10_000;
const HEARTBEAT_MS = 2_000;

describe('LeaseKeeper (membership and slot leases, fake time)', () => {
  let dir: string;
  let store: SqliteStore;
  let clock: ManualClock;
  const drains: Array<{ node: string; slots: readonly number[] }> = [];
  let holdDrain: Promise<void> | undefined;

  function keeper(owner: string, deps: Partial<Pick<LeaseKeeperDeps, 'clock' | 'clockOffset' | 'inFlight'>> = {}, through: Store = store): LeaseKeeper {
    return new LeaseKeeper(
      { owner, slotCount: SLOTS, leaseMs: LEASE_MS, renewIntervalMs: HEARTBEAT_MS },
      {
        store: through,
        clock,
        ...deps,
        onChange: () => undefined,
        drain: async (slots) => {
          drains.push({ node: owner, slots });
          await holdDrain;
        },
        released: () => undefined,
        onError: (error) => {
          throw error;
        },
      },
    );
  }
  const slots = (k: LeaseKeeper): number[] => k.held.map((l) => l.slot);
  /** Lets drains that were started finish (they run on promises, not on the clock). */
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-keeper-'));
    clock = new ManualClock(1_000_000);
    store = new SqliteStore({ path: join(dir, 'h.db'), clock });
    await store.init({ slotCount: SLOTS });
    drains.length = 0;
    holdDrain = undefined;
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  context('when the store answers an acquire after a release sent later (a pool of connections)', () => {
    it('sends the release of drained slots only once the acquire that still asked for them is answered', async () => {
      const writes: string[] = [];
      let opened: (() => void) | undefined;
      let gated = false;
      // SQLite answers in order; a PostgreSQL pool may not: hold the acquire back to play that.
      const pooled = new Proxy(store, {
        get(target, name) {
          if (name === 'acquireLeases') {
            return async (request: LeaseRequest) => {
              if (gated) await new Promise<void>((resolve) => (opened = resolve));
              writes.push('acquire');
              return target.acquireLeases(request);
            };
          }
          if (name === 'releaseLeases') {
            return async (owner: string, released: readonly number[]) => {
              writes.push('release');
              return target.releaseLeases(owner, released);
            };
          }
          const value = Reflect.get(target, name) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const a = keeper('node-a', {}, pooled);
      const b = keeper('node-b');
      await a.renew();
      await b.renew();
      clock.advance(HEARTBEAT_MS);
      gated = true;
      writes.length = 0;
      const round = a.renew();
      await settle();
      expect(drains, 'drained at once').to.have.length(1);
      expect(writes, 'nothing written while the acquire waits').to.deep.equal([]);
      gated = false;
      opened?.();
      await round;
      await settle();
      expect(writes).to.deep.equal(['acquire', 'release']);
      await b.renew();
      expect(slots(b), 'the released slots are free for the new node').to.deep.equal(drains[0]?.slots);
    });
  });

  context('when a second node joins', () => {
    it('hands over half the slots: the first drains and releases them, the second takes them at the next epoch', async () => {
      const a = keeper('node-a');
      const b = keeper('node-b');
      await a.renew();
      expect(slots(a)).to.have.length(SLOTS);
      await b.renew();
      expect(slots(b), 'nothing is taken from a live holder').to.deep.equal([]);

      clock.advance(HEARTBEAT_MS);
      await a.renew();
      await settle();
      expect(drains).to.have.length(1);
      expect(slots(a)).to.have.length(SLOTS / 2);
      await b.renew();
      expect(slots(b)).to.deep.equal(drains[0]?.slots);
      expect(new Set([...slots(a), ...slots(b)]).size).to.equal(SLOTS);
      expect(b.held.every((lease) => lease.epoch === 2)).to.equal(true);
      expect(a.liveNodes).to.deep.equal(['node-a', 'node-b']);
    });

    it('keeps renewing a slot until its drain is over, and releases it only then', async () => {
      const a = keeper('node-a');
      const b = keeper('node-b');
      await a.renew();
      await b.renew();
      let finishDrain!: () => void;
      holdDrain = new Promise((resolve) => {
        finishDrain = resolve;
      });
      await a.renew();
      expect(a.draining).to.have.length(SLOTS / 2);
      clock.advance(LEASE_MS - 1);
      await a.renew(); // still draining: renewed, not released
      clock.advance(HEARTBEAT_MS);
      await b.renew();
      expect(slots(b), 'the draining slots are still renewed by their holder').to.deep.equal([]);
      finishDrain();
      await settle();
      expect(a.draining).to.deep.equal([]);
      await b.renew();
      expect(slots(b)).to.have.length(SLOTS / 2);
    });
  });

  context('when a node dies', () => {
    it('has its slots owned again at the first heartbeat after its lease period', async () => {
      const a = keeper('node-a');
      const b = keeper('node-b');
      await a.renew();
      await b.renew();
      await a.renew();
      await settle();
      await b.renew();
      const lastHeartbeatOfB = clock.now();
      expect(slots(b)).to.have.length(SLOTS / 2);

      // b stops (killed): a goes on heartbeating.
      clock.advanceTo(lastHeartbeatOfB + LEASE_MS - 1);
      await a.renew();
      expect(slots(a)).to.have.length(SLOTS / 2);
      clock.advanceTo(lastHeartbeatOfB + LEASE_MS);
      await a.renew();
      expect(slots(a)).to.have.length(SLOTS);
      const taken = a.held.filter((lease) => lease.epoch === 3);
      expect(taken, 'taken over from the dead node at the next epoch').to.have.length(SLOTS / 2);
    });
  });

  context('when a node is paused past its lease and then resumes', () => {
    it('stops believing it owns its slots as soon as they expire, before it even runs again, and gets a fair share back later', async () => {
      const a = keeper('node-a');
      const b = keeper('node-b');
      await a.renew();
      await b.renew();
      await a.renew();
      await settle();
      await b.renew();
      const bSlots = slots(b);

      clock.advance(LEASE_MS + HEARTBEAT_MS); // b is stopped meanwhile
      expect(b.held, 'b no longer believes it owns anything').to.deep.equal([]);
      await a.renew();
      expect(slots(a)).to.have.length(SLOTS);
      for (const slot of bSlots) expect(slots(a)).to.include(slot);

      await b.renew(); // b resumes: a holds everything, so b takes nothing yet
      expect(slots(b)).to.deep.equal([]);
      clock.advance(HEARTBEAT_MS);
      await a.renew(); // a sees b alive again and hands over
      await settle();
      await b.renew();
      expect(slots(b)).to.have.length(SLOTS / 2);
      expect(new Set([...slots(a), ...slots(b)]).size).to.equal(SLOTS);
    });
  });

  context('when a node leaves gracefully', () => {
    it('releases its slots and leaves the cluster so the others take them at their next heartbeat', async () => {
      const a = keeper('node-a');
      const b = keeper('node-b');
      await a.renew();
      await b.renew();
      await a.renew();
      await settle();
      await b.renew();
      await b.close();
      expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['node-a']);
      await a.renew();
      expect(slots(a)).to.have.length(SLOTS);
    });
  });

  context('when one node\'s clock is 30 s ahead of the store\'s', () => {
    const AHEAD_MS = 30_000;
    /** The ahead node's own clock: `clock` (the store's time, here) + 30 s, moving with it. */
    let ahead: ManualClock;
    const advance = (ms: number): void => {
      clock.advance(ms);
      ahead.advance(ms);
    };
    /** The ahead node's clock corrected by its offset to the store's, which answers `clock`'s time. */
    const corrected = (): ClusterClock =>
      new ClusterClock({ base: ahead, serverTime: async () => clock.now(), onSkewChange: () => undefined });

    beforeEach(() => {
      ahead = new ManualClock(clock.now() + AHEAD_MS);
    });

    context('and it is not corrected', () => {
      it('counts the other node dead and takes every slot (what the cluster clock prevents)', async () => {
        const a = keeper('node-a');
        const b = keeper('node-b', { clock: ahead as Clock });
        await a.renew();
        await b.renew();
        expect(b.liveNodes).to.deep.equal(['node-b']);
        expect(slots(b)).to.have.length(SLOTS);
      });
    });

    context('and it runs on the corrected clock', () => {
      it('counts the other node live, takes only its share once handed over, and writes times on the store\'s clock', async () => {
        const a = keeper('node-a');
        const bClock = corrected();
        const b = keeper('node-b', { clock: bClock, clockOffset: bClock, inFlight: () => 3 });
        await a.renew();
        await b.renew();
        expect(bClock.offsetMs).to.equal(-AHEAD_MS);
        expect(b.liveNodes, 'a is live').to.deep.equal(['node-a', 'node-b']);
        expect(slots(b), 'nothing is taken from a live holder').to.deep.equal([]);

        for (let round = 0; round < 3; round++) {
          advance(HEARTBEAT_MS);
          await a.renew();
          await settle();
          await b.renew();
        }
        expect(slots(a)).to.have.length(SLOTS / 2);
        expect(slots(b)).to.have.length(SLOTS / 2);
        expect(new Set([...slots(a), ...slots(b)]).size).to.equal(SLOTS);
        expect(a.liveNodes).to.deep.equal(['node-a', 'node-b']);
        // b's leases run until the store's time + a lease period, not 30 s later.
        for (const lease of await store.listLeases()) expect(lease.until).to.be.within(clock.now(), clock.now() + LEASE_MS);
        const nodes = await store.listNodes(0);
        expect(nodes.map(({ id, seenAt, inFlight, clockOffsetMs }) => ({ id, seenAt, inFlight, clockOffsetMs }))).to.deep.equal([
          { id: 'node-a', seenAt: clock.now(), inFlight: 0, clockOffsetMs: 0 },
          { id: 'node-b', seenAt: clock.now(), inFlight: 3, clockOffsetMs: -AHEAD_MS },
        ]);
      });

      it('goes on heartbeating on the last offset while measurements fail, each failure reported', async () => {
        const a = keeper('node-a');
        let failing = false;
        const bClock = new ClusterClock({
          base: ahead,
          serverTime: async () => {
            if (failing) throw new Error('read failed');
            return clock.now();
          },
          onSkewChange: () => undefined,
        });
        const errors: unknown[] = [];
        const b = new LeaseKeeper(
          { owner: 'node-b', slotCount: SLOTS, leaseMs: LEASE_MS, renewIntervalMs: HEARTBEAT_MS },
          { store, clock: bClock, clockOffset: bClock, onChange: () => undefined, drain: async () => undefined, released: () => undefined, onError: (e) => errors.push(e) },
        );
        await a.renew();
        await b.renew();
        await a.renew();
        await settle();
        await b.renew();
        failing = true;
        // Longer than a lease period: had the rounds stopped, b's leases would lapse; had its offset
        // gone back to 0, it would count a dead and take every slot.
        const rounds = LEASE_MS / HEARTBEAT_MS + 1;
        for (let round = 0; round < rounds; round++) {
          advance(HEARTBEAT_MS);
          await a.renew();
          await b.renew();
        }
        expect(errors.map((e) => (e as Error).message)).to.deep.equal(Array(rounds).fill('read failed'));
        expect(bClock.offsetMs).to.equal(-AHEAD_MS);
        expect(a.liveNodes).to.deep.equal(['node-a', 'node-b']);
        expect(b.liveNodes).to.deep.equal(['node-a', 'node-b']);
        expect(slots(a)).to.have.length(SLOTS / 2);
        expect(slots(b)).to.have.length(SLOTS / 2);
      });
    });
  });
});
