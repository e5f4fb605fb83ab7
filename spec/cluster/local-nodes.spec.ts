import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lib/clock.ts';
import {
  judgeRecord,
  localNodesFolder,
  LocalNodes,
  parseRecord,
  statOf,
  storeKeyOf,
  systemProcessProbe,
  type LocalNodeRecord,
  type ProcessIdentity,
  type ProcessProbe,
  type ProcessState,
  type ReapedNode,
} from '../../lib/cluster/local-nodes.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';

const LEASE_MS = 60_000;

const HERE: ProcessIdentity = Object.freeze({
  pid: 4242,
  hostname: 'host-a',
  bootId: 'boot-1',
  pidNamespace: 'pid:[4026531836]',
  processStartTicks: '900000',
});

function recordOf(changes: Partial<LocalNodeRecord> = {}): LocalNodeRecord {
  return { nodeId: 'node_dead', store: 'k', pid: 1234, hostname: 'host-a', bootId: 'boot-1', pidNamespace: 'pid:[4026531836]', processStartTicks: '500', startedAt: 0, ...changes };
}

/** A probe that sees `HERE` and answers for the pids in `states` (anything else is gone). */
function fakeProbe(states: Readonly<Record<number, ProcessState>>): ProcessProbe & { inspected: number[] } {
  const inspected: number[] = [];
  return {
    inspected,
    self: () => HERE,
    inspect(pid) {
      inspected.push(pid);
      return states[pid] ?? { kind: 'gone', detail: 'ESRCH' };
    },
  };
}

describe('judgeRecord', () => {
  const cases: ReadonlyArray<readonly [string, Partial<LocalNodeRecord>, ProcessState | undefined, boolean, RegExp]> = [
    ['its pid no longer exists (ESRCH)', {}, { kind: 'gone', detail: 'ESRCH' }, true, /gone/],
    ['its pid is alive with the recorded start time', { processStartTicks: '500' }, { kind: 'alive', startTicks: '500', zombie: false }, false, /alive/],
    ['its pid is alive with another start time (reused)', { processStartTicks: '500' }, { kind: 'alive', startTicks: '777', zombie: false }, true, /reused/],
    ['its pid is now ours (reused by this process, as pid 1 after a restart in a shared pid namespace)', { pid: HERE.pid }, { kind: 'alive', startTicks: HERE.processStartTicks, zombie: false }, true, /reused/],
    ['its pid is a zombie', {}, { kind: 'alive', startTicks: '500', zombie: true }, true, /zombie/],
    ['its pid cannot be signalled (EPERM)', {}, { kind: 'unknown', detail: 'EPERM' }, false, /EPERM/],
    ['its pid is alive and no start time is known (no /proc)', { processStartTicks: null }, { kind: 'alive', startTicks: null, zombie: false }, false, /unknown/],
    ['it ran on another host', { hostname: 'host-b' }, undefined, false, /another host/],
    ['it ran before a reboot, or on another machine with this hostname', { bootId: 'boot-0' }, undefined, false, /boot/],
    ['it ran in another pid namespace (a sibling container)', { pidNamespace: 'pid:[4026532000]' }, undefined, false, /namespace/],
  ];
  for (const [when, changes, state, dead, why] of cases) {
    context(`when ${when}`, () => {
      it(dead ? 'judges it dead' : 'leaves it alone', () => {
        const inspected: number[] = [];
        const verdict = judgeRecord(recordOf(changes), HERE, (pid) => {
          inspected.push(pid);
          return state ?? { kind: 'gone', detail: 'ESRCH' };
        });
        expect(verdict.dead).to.equal(dead);
        expect(verdict.why).to.match(why);
        // A pid from another host, boot or namespace is never even probed.
        expect(inspected).to.have.length(state === undefined ? 0 : 1);
      });
    });
  }
});

describe('systemProcessProbe', () => {
  it('finds this process alive at its own start time, and an exited pid gone', function () {
    const self = systemProcessProbe.self();
    expect(self.pid).to.equal(process.pid);
    if (!existsSync('/proc/self/stat')) this.skip();
    const state = systemProcessProbe.inspect(process.pid);
    expect(state).to.deep.equal({ kind: 'alive', startTicks: self.processStartTicks, zombie: false });
    expect(judgeRecord(recordOf({ ...self, nodeId: 'node_me' }), self, systemProcessProbe.inspect).dead).to.equal(false);
    // Above the kernel's pid_max (at most 2^22): no such process.
    expect(systemProcessProbe.inspect(2 ** 22 + 1).kind).to.equal('gone');
  });

  it('reads the state and start time of a stat line whose command holds spaces and parentheses', () => {
    const rest = Array.from({ length: 50 }, (_, i) => String(i + 4)).join(' ');
    expect(statOf(`77 (a (b) c) S ${rest}`)).to.deep.equal({ state: 'S', startTicks: '22' });
    expect(statOf('garbage')).to.equal(undefined);
  });
});

describe('localNodesFolder', () => {
  it('is nodes/ beside a SQLite file, in dataDir for another store, and none for an in-memory database', () => {
    expect(localNodesFolder('sqlite:/var/lib/herald/h.db', '/ignored')).to.equal('/var/lib/herald/nodes');
    expect(localNodesFolder('mongodb://u:p@db/herald', '/srv/herald')).to.equal('/srv/herald/nodes');
    expect(localNodesFolder('sqlite::memory:', '/srv/herald')).to.equal(undefined);
  });

  it('names the data by a digest that never holds the URI', () => {
    expect(storeKeyOf('mongodb://u:secret@db/herald')).to.match(/^[0-9a-f]{16}$/);
    expect(storeKeyOf(`sqlite:${join(process.cwd(), 'data', 'h.db')}`)).to.equal(storeKeyOf('sqlite:./data/h.db'));
  });
});

describe('LocalNodes', () => {
  let dir: string;
  let folder: string;
  let clock: ManualClock;
  let store: SqliteStore;
  let reaped: ReapedNode[];
  let errors: Array<{ file: string; error: unknown }>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-local-nodes-'));
    folder = join(dir, 'nodes');
    clock = new ManualClock();
    store = new SqliteStore({ path: join(dir, 'herald.db'), clock });
    await store.init({ slotCount: 8 });
    reaped = [];
    errors = [];
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function localNodes(nodeId: string, probe: ProcessProbe, storeKey = 'k'): LocalNodes {
    return new LocalNodes(
      { folder, nodeId, storeKey },
      { store, clock, probe, reaped: (node) => reaped.push(node), onError: (file, error) => errors.push({ file, error }) },
    );
  }

  function writeRecord(record: LocalNodeRecord): string {
    mkdirSync(folder, { recursive: true });
    const file = join(folder, `${record.nodeId}.json`);
    writeFileSync(file, JSON.stringify(record));
    return file;
  }

  /** Two nodes of a cluster: `node_dead` holds slots 0–3, `node_other` (never recorded here) slots 4–7. */
  async function twoNodesHoldingSlots(): Promise<void> {
    const now = clock.now();
    for (const [id, slots] of [['node_dead', [0, 1, 2, 3]], ['node_other', [4, 5, 6, 7]]] as const) {
      await store.heartbeat({ id, startedAt: now, now, inFlight: 0, clockOffsetMs: 0 });
      await store.acquireLeases({ owner: id, slots, now, leaseMs: LEASE_MS });
    }
  }

  context('when started', () => {
    it('records this process atomically, and close() removes the record', async () => {
      const local = localNodes('node_new', fakeProbe({}));
      expect(await local.start()).to.deep.equal([]);
      expect(readdirSync(folder)).to.deep.equal(['node_new.json']);
      expect(parseRecord(readFileSync(local.file, 'utf8'))).to.deep.equal({ nodeId: 'node_new', store: 'k', ...HERE, startedAt: clock.now() });
      local.close();
      expect(readdirSync(folder)).to.deep.equal([]);
    });
  });

  context('when a dead predecessor on this host is recorded', () => {
    it('releases exactly its leases and its node row, deletes its record, and the next acquisition takes its slots at epoch + 1', async () => {
      await twoNodesHoldingSlots();
      const before = await store.listLeases();
      const file = writeRecord(recordOf());
      clock.advance(1_000); // far inside the dead node's 60 s lease

      const local = localNodes('node_new', fakeProbe({}));
      const result = await local.start();

      expect(result).to.deep.equal([{ nodeId: 'node_dead', pid: 1234, slots: [0, 1, 2, 3], why: 'pid 1234 is gone (ESRCH)' }]);
      expect(reaped).to.deep.equal(result);
      expect(errors).to.deep.equal([]);
      expect(existsSync(file)).to.equal(false);
      expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['node_other']);
      // node_other, never recorded in the folder, keeps its leases untouched.
      expect(await store.listLeases()).to.deep.equal(before.filter((lease) => lease.owner === 'node_other'));

      const taken = await store.acquireLeases({ owner: 'node_new', slots: [0, 1, 2, 3, 4], now: clock.now(), leaseMs: LEASE_MS });
      const epochOf = new Map(before.map((lease) => [lease.slot, lease.epoch]));
      expect(taken.map((lease) => [lease.slot, lease.epoch])).to.deep.equal([0, 1, 2, 3].map((slot) => [slot, (epochOf.get(slot) ?? 0) + 1]));
      local.close();
    });
  });

  const leftAlone: ReadonlyArray<readonly [string, Partial<LocalNodeRecord>, Record<number, ProcessState>]> = [
    ['alive at its recorded start time (a paused process is alive too)', {}, { 1234: { kind: 'alive', startTicks: '500', zombie: false } }],
    ['on another host', { hostname: 'host-b' }, {}],
    ['one this process may not signal (EPERM)', {}, { 1234: { kind: 'unknown', detail: 'EPERM' } }],
    ['of other data sharing the folder', { store: 'other-data' }, {}],
  ];
  for (const [what, changes, states] of leftAlone) {
    context(`when the recorded process is ${what}`, () => {
      it('leaves its leases, node row and record alone', async () => {
        await twoNodesHoldingSlots();
        const before = await store.listLeases();
        const file = writeRecord(recordOf(changes));
        const local = localNodes('node_new', fakeProbe(states));
        expect(await local.start()).to.deep.equal([]);
        expect(await store.listLeases()).to.deep.equal(before);
        expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['node_dead', 'node_other']);
        expect(existsSync(file)).to.equal(true);
        expect(errors).to.deep.equal([]);
        local.close();
      });
    });
  }

  context('when a record file is corrupt or not a record', () => {
    it('reports it, leaves it, and still reaps the dead predecessors', async () => {
      await twoNodesHoldingSlots();
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, 'node_torn.json'), '{"nodeId": "node_to');
      writeFileSync(join(folder, 'node_odd.json'), JSON.stringify({ nodeId: 'node_odd', pid: 'one' }));
      writeFileSync(join(folder, 'notes.txt'), 'not a record, not even looked at');
      writeRecord(recordOf());

      const local = localNodes('node_new', fakeProbe({}));
      expect((await local.start()).map((node) => node.nodeId)).to.deep.equal(['node_dead']);
      expect(errors.map((e) => e.file).sort()).to.deep.equal([join(folder, 'node_odd.json'), join(folder, 'node_torn.json')]);
      expect(errors.every((e) => isHeraldError(e.error) && e.error.code === ErrorCode.INVALID_INPUT)).to.equal(true);
      expect(readdirSync(folder).sort()).to.deep.equal(['node_new.json', 'node_odd.json', 'node_torn.json', 'notes.txt']);
      local.close();
    });
  });

  context('when two processes of one host share the data', () => {
    it('never reaps a live sibling, nor itself', async () => {
      const probe = fakeProbe({ [HERE.pid]: { kind: 'alive', startTicks: HERE.processStartTicks, zombie: false } });
      const first = localNodes('node_first', probe);
      const second = localNodes('node_second', probe);
      await first.start();
      await second.start();
      expect(reaped).to.deep.equal([]);
      expect(readdirSync(folder).sort()).to.deep.equal(['node_first.json', 'node_second.json']);
      first.close();
      second.close();
    });
  });
});
