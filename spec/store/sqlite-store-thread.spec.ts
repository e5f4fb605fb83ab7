import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { ConflictError, ErrorCode, NotFoundError, isHeraldError } from '../../lib/errors.ts';
import { Herald } from '../../lib/herald.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { SqliteStoreThread } from '../../lib/store/sqlite/sqlite-store-thread.ts';
import { describeFileStoreConformance } from './conformance/index.ts';

// The thread runs on the system clock: the test's clock starts at the real time, and the store reads
// its own clock only to measure a wait for another connection's lock, which these tests never make.
describeFileStoreConformance('SqliteStoreThread', (path) => new SqliteStoreThread({ path }), Date.now());

describe('SqliteStoreThread', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-sqlite-thread-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives errors thrown on the thread back with their class, code and field', async () => {
    const store = new SqliteStoreThread({ path: join(dir, 'herald.db') });
    try {
      await store.init({ slotCount: 4 });
      const now = Date.now();
      const fanOut = await store.recordFanOuts([{ eventId: 'evt_missing', deliveries: [] }], now).catch((e: unknown) => e);
      expect(fanOut).to.be.instanceOf(NotFoundError);
      expect(isHeraldError(fanOut) && fanOut.code).to.equal(ErrorCode.NOT_FOUND);
      expect((fanOut as Error).message).to.include('evt_missing');

      const endpoint = {
        id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/a', description: '', eventTypes: [],
        retry: { preset: 'default' as const }, timeoutMs: 1_000, mode: 'at-least-once' as const, ordering: 'none' as const, concurrency: 1,
        status: 'enabled' as const, disabledReason: null, failingSince: null, secrets: [], createdAt: now, updatedAt: now,
      };
      await store.createEndpoint(endpoint);
      const twice = await store.createEndpoint(endpoint).catch((e: unknown) => e);
      expect(twice).to.be.instanceOf(ConflictError);
    } finally {
      await store.close();
    }
  });

  context('in a Herald', () => {
    const config = (overrides: { storeThread?: boolean } = {}) =>
      resolveConfig({ store: `sqlite:${join(dir, 'herald.db')}`, dataDir: dir, logLevel: 'silent', engine: overrides });

    it('runs the SQLite store on its own thread on the system clock (engine.storeThread, on by default)', async () => {
      const herald = await Herald.open(config());
      try {
        expect(herald.store).to.be.instanceOf(SqliteStoreThread);
      } finally {
        await herald.close();
      }
    });

    it('keeps it on the main thread when engine.storeThread is false, or when a clock is injected (the thread cannot follow it)', async () => {
      const off = await Herald.open(config({ storeThread: false }));
      try {
        expect(off.store).to.be.instanceOf(SqliteStore);
      } finally {
        await off.close();
      }
      const injected = await Herald.open(config(), { clock: new ManualClock(Date.now()) });
      try {
        expect(injected.store).to.be.instanceOf(SqliteStore);
      } finally {
        await injected.close();
      }
    });
  });
});
