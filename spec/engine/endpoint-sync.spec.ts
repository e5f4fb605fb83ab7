import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lib/clock.ts';
import { EndpointSync } from '../../lib/engine/endpoint-sync.ts';
import type { Endpoint } from '../../lib/model.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { makeEndpoint } from '../store/conformance/index.ts';

const INTERVAL_MS = 250;

describe('EndpointSync (following the endpoint change log)', () => {
  let dir: string;
  let clock: ManualClock;
  /** The store this node reads, and another node's view of the same file (the writer of the changes). */
  let store: SqliteStore;
  let other: SqliteStore;
  let sync: EndpointSync;
  let tracked: Set<string>;
  let applied: Array<{ id: string; endpoint: Endpoint | undefined }>;
  let errors: unknown[];
  let failReads = false;

  /** Lets a catch-up started by the clock run to its end (it runs on promises, not on the clock). */
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-sync-'));
    clock = new ManualClock(1_000_000);
    store = new SqliteStore({ path: join(dir, 'h.db'), clock });
    await store.init({ slotCount: 8 });
    other = new SqliteStore({ path: join(dir, 'h.db'), clock });
    await other.init({ slotCount: 8 });
    tracked = new Set();
    applied = [];
    errors = [];
    failReads = false;
    sync = new EndpointSync(
      { intervalMs: INTERVAL_MS },
      {
        store: {
          endpointChangesAfter: (after, limit) => (failReads ? Promise.reject(new Error('store down')) : store.endpointChangesAfter(after, limit)),
          lastEndpointChange: () => store.lastEndpointChange(),
          getEndpoint: (id) => store.getEndpoint(id),
        },
        clock,
        tracked: () => tracked,
        isTracked: (id) => tracked.has(id),
        apply: (id, endpoint) => applied.push({ id, endpoint }),
        onError: (error) => errors.push(error),
      },
    );
  });

  afterEach(async () => {
    await sync.close();
    await other.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function started(): Promise<void> {
    sync.start();
    await settle();
    applied.length = 0;
  }

  context('when an endpoint this node works is changed through another node', () => {
    it('hands its new version over at the next interval, not before', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      tracked.add('ep_1');
      await started();
      await other.updateEndpoint('ep_1', { url: 'https://hooks.example.com/moved' }, clock.now());
      await settle();
      expect(applied, 'nothing before the interval').to.deep.equal([]);
      clock.advance(INTERVAL_MS);
      await settle();
      expect(applied.map((a) => [a.id, a.endpoint?.url])).to.deep.equal([['ep_1', 'https://hooks.example.com/moved']]);
      expect(sync.cursor).to.equal(2);
    });

    it('hands over `undefined` when it was deleted', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      tracked.add('ep_1');
      await started();
      await other.deleteEndpoint('ep_1', clock.now());
      clock.advance(INTERVAL_MS);
      await settle();
      expect(applied).to.deep.equal([{ id: 'ep_1', endpoint: undefined }]);
    });

    it('reads each endpoint once for several changes of it, and never one without an actor here', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      await other.createEndpoint(makeEndpoint('ep_2', 'acme', clock.now()));
      tracked.add('ep_1');
      await started();
      await other.updateEndpoint('ep_1', { description: 'one' }, clock.now());
      await other.updateEndpoint('ep_2', { description: 'two' }, clock.now());
      await other.updateEndpoint('ep_1', { description: 'three' }, clock.now());
      clock.advance(INTERVAL_MS);
      await settle();
      expect(applied.map((a) => [a.id, a.endpoint?.description])).to.deep.equal([['ep_1', 'three']]);
    });
  });

  context('when it starts with actors already made', () => {
    it('refreshes them once, since they read their endpoint before the cursor was known', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      tracked.add('ep_1');
      sync.start();
      await settle();
      expect(applied.map((a) => a.id)).to.deep.equal(['ep_1']);
      expect(sync.cursor).to.equal(1);
    });
  });

  context('when changes it never read were purged (the first one after its cursor skips numbers)', () => {
    it('refreshes every actor it has', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      await other.createEndpoint(makeEndpoint('ep_2', 'acme', clock.now()));
      tracked.add('ep_1').add('ep_2');
      await started();
      await other.updateEndpoint('ep_1', { description: 'purged' }, clock.now());
      clock.advance(1_000);
      await other.purge(clock.now());
      await other.updateEndpoint('ep_2', { description: 'kept' }, clock.now());
      clock.advance(INTERVAL_MS);
      await settle();
      expect(applied.map((a) => [a.id, a.endpoint?.description]).sort()).to.deep.equal([['ep_1', 'purged'], ['ep_2', 'kept']]);
      expect(sync.cursor).to.equal(4);
    });
  });

  context('when the store fails a read', () => {
    it('reports it, keeps its cursor, and applies the change at the next interval', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      tracked.add('ep_1');
      await started();
      await other.updateEndpoint('ep_1', { description: 'after the outage' }, clock.now());
      failReads = true;
      clock.advance(INTERVAL_MS);
      await settle();
      expect(errors).to.have.length(1);
      expect(applied).to.deep.equal([]);
      failReads = false;
      clock.advance(INTERVAL_MS);
      await settle();
      expect(applied.map((a) => a.endpoint?.description)).to.deep.equal(['after the outage']);
    });
  });

  context('when a change made through this node asks for a catch-up', () => {
    it('resolves only once the change is applied, even with a catch-up already running', async () => {
      await other.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
      tracked.add('ep_1');
      await started();
      // A catch-up that began before the change (and read the log without it) is running...
      const running = sync.catchUp();
      await store.updateEndpoint('ep_1', { url: 'https://hooks.example.com/local' }, clock.now());
      // ...so the one asked for after the change goes round once more.
      await sync.catchUp();
      expect(applied.at(-1)?.endpoint?.url).to.equal('https://hooks.example.com/local');
      await running;
    });
  });
});
