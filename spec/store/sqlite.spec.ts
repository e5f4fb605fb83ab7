import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { Endpoint, Outcome } from '../../lib/model.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { describeFileStoreConformance } from './conformance/index.ts';

/** A fresh folder per test under the system temp dir, removed afterwards. */
function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'herald-sqlite-'));
}

describeFileStoreConformance('SqliteStore', (path, clock) => new SqliteStore({ path, clock }));

// The same contract when writes are committed in groups (what the store thread runs): every call
// below reaches the store alone or beside others, and each must behave as if it ran by itself.
describeFileStoreConformance('SqliteStore (group commit)', (path, clock) => new SqliteStore({ path, clock, groupCommit: true }));

describe('SqliteStore', () => {
  let dir: string;
  let clock: ManualClock;
  const opened: Array<{ close(): unknown }> = [];

  beforeEach(() => {
    dir = tempDir();
    clock = new ManualClock();
  });

  afterEach(async () => {
    for (const handle of opened.splice(0)) await handle.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function openStore(path = join(dir, 'herald.db'), pollIntervalMs = 50): SqliteStore {
    const store = new SqliteStore({ path, clock, pollIntervalMs });
    opened.push(store);
    return store;
  }

  context('when opened on a path whose folder does not exist', () => {
    it('creates the folder and the file, in WAL mode', async () => {
      const path = join(dir, 'nested', 'deeper', 'herald.db');
      await openStore(path).init({ slotCount: 16 });
      expect(existsSync(path)).to.equal(true);
      const raw = new Database(path);
      opened.push(raw);
      expect(raw.pragma('journal_mode', { simple: true })).to.equal('wal');
    });
  });

  context('when given bad options', () => {
    it('names the option and shows the value', () => {
      const bad = [
        [{ path: '', clock }, 'path'],
        [{ path: 'x.db', clock: {} as ManualClock }, 'clock'],
        [{ path: 'x.db', clock, pollIntervalMs: 0 }, 'pollIntervalMs'],
        [{ path: 'x.db', clock, busyTimeoutMs: -1 }, 'busyTimeoutMs'],
      ] as const;
      for (const [options, field] of bad) {
        expect(() => new SqliteStore(options)).to.throw(`${field}:`).with.property('code', ErrorCode.INVALID_INPUT);
      }
    });

    it('refuses a slot count that is not a positive integer', async () => {
      const error = await openStore().init({ slotCount: 0 }).catch((e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.INVALID_INPUT);
    });
  });

  context('when writes are committed in groups', () => {
    it('undoes a call that fails alone: the calls beside it in the same transaction are written', async () => {
      const store = new SqliteStore({ path: join(dir, 'grouped.db'), clock, groupCommit: true });
      opened.push(store);
      await store.init({ slotCount: 4 });
      const event = (id: string) => ({ id, tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null });
      await store.appendEvents([event('evt_a')]);
      const delivery = { id: deliveryIdFor('evt_a', 'ep_1', clock.now()), eventId: 'evt_a', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: slotOf('ep_1', 4), nextAttemptAt: clock.now(), createdAt: clock.now(), orderingKey: null };

      // Made in one turn: one group. The fan-out names an event that does not exist after one that
      // does, so it fails after writing; its writes must go, the event appended beside it must stay.
      const [before, fanOut, after] = await Promise.allSettled([
        store.appendEvents([event('evt_b')]),
        store.recordFanOuts([{ eventId: 'evt_a', deliveries: [delivery] }, { eventId: 'evt_missing', deliveries: [] }], clock.now()),
        store.appendEvents([event('evt_c')]),
      ]);

      expect(before.status).to.equal('fulfilled');
      expect(after.status).to.equal('fulfilled');
      expect(fanOut.status).to.equal('rejected');
      expect(fanOut.status === 'rejected' && isHeraldError(fanOut.reason) && fanOut.reason.code).to.equal(ErrorCode.NOT_FOUND);
      expect(await store.getDelivery(delivery.id)).to.equal(undefined);
      expect((await store.unfannedEvents(10)).map((e) => e.id)).to.deep.equal(['evt_a', 'evt_b', 'evt_c']);
    });

    it('writes what it was given before close() resolves', async () => {
      const path = join(dir, 'grouped.db');
      const store = new SqliteStore({ path, clock, groupCommit: true });
      await store.init({ slotCount: 4 });
      const appended = store.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
      await store.close();
      await appended;
      const raw = new Database(path);
      opened.push(raw);
      expect(raw.prepare('SELECT id FROM events').pluck().all()).to.deep.equal(['evt_1']);
    });
  });

  context('when two processes share the file', () => {
    it('gives the second the slot count the first fixed', async () => {
      await openStore().init({ slotCount: 32 });
      expect(await openStore().init({ slotCount: 256 })).to.deep.equal({ slotCount: 32 });
    });
  });

  describe('watch', () => {
    context('when another connection commits', () => {
      it('calls the listener on the next poll', async () => {
        const store = openStore();
        await store.init({ slotCount: 4 });
        const other = openStore();
        await other.init({ slotCount: 4 });
        let calls = 0;
        store.watch(() => calls++);

        clock.advance(50);
        expect(calls).to.equal(0);

        await other.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
        clock.advance(49);
        expect(calls).to.equal(0);
        clock.advance(1);
        expect(calls).to.equal(1);
        clock.advance(500);
        expect(calls).to.equal(1);
      });

      it('sees commits from a raw better-sqlite3 connection too', async () => {
        const path = join(dir, 'herald.db');
        const store = openStore(path, 10);
        await store.init({ slotCount: 4 });
        const raw = new Database(path);
        opened.push(raw);
        let calls = 0;
        store.watch(() => calls++);
        raw.prepare(`INSERT INTO meta (key, value) VALUES ('probe', '1')`).run();
        clock.advance(10);
        expect(calls).to.equal(1);
      });
    });

    context('when another process commits and the clock does not move', () => {
      // A producer beside `herald start` commits from another process: seen by the write-ahead
      // log's watch, not after up to a whole poll interval.
      it('calls the listener once the write-ahead log is written', async () => {
        const path = join(dir, 'herald.db');
        const store = openStore(path, 60_000);
        await store.init({ slotCount: 4 });
        const raw = new Database(path);
        opened.push(raw);
        const startedAt = clock.now();
        const called = new Promise<void>((resolve) => store.watch(resolve));
        raw.prepare(`INSERT INTO meta (key, value) VALUES ('probe', '1')`).run();
        await called;
        expect(clock.now()).to.equal(startedAt);
      });
    });

    context('when only the store itself writes', () => {
      it('stays quiet (its own process signals in-process)', async () => {
        const store = openStore();
        await store.init({ slotCount: 4 });
        let calls = 0;
        store.watch(() => calls++);
        await store.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
        clock.advance(200);
        expect(calls).to.equal(0);
      });
    });

    context('when unsubscribed or closed', () => {
      it('stops polling and leaves no timers behind', async () => {
        const store = openStore();
        await store.init({ slotCount: 4 });
        const other = openStore();
        await other.init({ slotCount: 4 });
        let calls = 0;
        const stop = store.watch(() => calls++);
        store.watch(() => calls++);
        expect(clock.pendingTimerCount).to.equal(2);
        stop();
        expect(clock.pendingTimerCount).to.equal(1);
        await store.close();
        expect(clock.pendingTimerCount).to.equal(0);
        await other.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
        clock.advance(100);
        expect(calls).to.equal(0);
      });
    });
  });

  describe('claimDue under a backlog', () => {
    // Past 1 000 due rows the store walks busy endpoints instead of scanning every due row;
    // the rows claimed must be the same as the scan would give.
    context('when more than a thousand deliveries are due', () => {
      it('still caps each endpoint, honours skips and disabled endpoints, and reclaims orphans', async () => {
        const store = openStore();
        await store.init({ slotCount: 4 });
        const now = clock.now();
        const endpoint = (id: string, status: Endpoint['status'] = 'enabled'): Endpoint => ({
          id, tenantId: 'acme', url: `https://hooks.example.com/${id}`, description: '', eventTypes: [],
          retry: { preset: 'default' }, timeoutMs: 1_000, mode: 'at-least-once', ordering: 'none', concurrency: 1, status,
          disabledReason: status === 'enabled' ? null : 'operator', failingSince: null, secrets: [], createdAt: now, updatedAt: now,
        });
        for (const id of ['ep_big', 'ep_small', 'ep_orphan', 'ep_skipped']) await store.createEndpoint(endpoint(id));
        await store.createEndpoint(endpoint('ep_off', 'disabled'));
        let seq = 0;
        const seed = async (endpointId: string, dueAt: number) => {
          const id = `evt_${seq++}`;
          await store.appendEvents([{ id, tenantId: 'acme', type: 't', payload: '{}', createdAt: now, endpointId: null, orderingKey: null }]);
          await store.recordFanOuts([{ eventId: id, deliveries: [{
            id: deliveryIdFor(id, endpointId, now), eventId: id, endpointId, tenantId: 'acme', eventType: 't',
            slot: slotOf(endpointId, 4), nextAttemptAt: dueAt, createdAt: now, orderingKey: null,
          }] }], clock.now());
          return deliveryIdFor(id, endpointId, now);
        };
        const orphan = await seed('ep_orphan', now - 2 * 3_600_000);
        for (let i = 0; i < 1_100; i++) await seed('ep_big', now - 3_600_000 + i);
        const small = await seed('ep_small', now);
        await seed('ep_skipped', now - 5);
        await seed('ep_off', now - 5);
        await seed('ep_small', now + 60_000);

        const slots = [0, 1, 2, 3];
        await store.acquireLeases({ owner: 'a', slots, now, leaseMs: 1_000 });
        const first = await store.claimDue({ owner: 'a', now, limit: 1, perEndpointLimit: 1, skipEndpointIds: [] });
        expect(first.map((j) => j.delivery.id)).to.deep.equal([orphan]);
        // The claimer of the orphan dies; another node takes the slots at the next epoch.
        clock.advance(1_000);
        await store.acquireLeases({ owner: 'b', slots, now: clock.now(), leaseMs: 1_000 });

        const jobs = await store.claimDue({ owner: 'b', now: clock.now(), limit: 20, perEndpointLimit: 5, skipEndpointIds: ['ep_skipped'] });
        const count = (id: string) => jobs.filter((j) => j.delivery.endpointId === id).length;
        expect([count('ep_big'), count('ep_small'), count('ep_orphan'), count('ep_skipped'), count('ep_off')]).to.deep.equal([5, 1, 1, 0, 0]);
        expect(jobs[0]!.delivery).to.include({ id: orphan, leaseEpoch: 2 });
        expect(jobs.map((j) => j.delivery.nextAttemptAt)).to.deep.equal([...jobs.map((j) => j.delivery.nextAttemptAt)].sort((x, y) => x - y));
        expect(jobs.at(-1)!.delivery.id).to.equal(small);
        expect(jobs.every((j) => j.delivery.status === 'in_flight' && j.event.id === j.delivery.eventId)).to.equal(true);

        const only = await store.claimDue({ owner: 'b', now: clock.now(), limit: 3, perEndpointLimit: 10, skipEndpointIds: [], endpointId: 'ep_big' });
        expect(only.map((j) => j.delivery.endpointId)).to.deep.equal(['ep_big', 'ep_big', 'ep_big']);
        expect(only[0]!.delivery.nextAttemptAt).to.equal(now - 3_600_000 + 5);
      });
    });
  });

  describe('FIFO lines in SQLite', () => {
    const now = 1_767_225_600_000;
    const fifoEndpoint = (id: string): Endpoint => ({
      id, tenantId: 'acme', url: `https://hooks.example.com/${id}`, description: '', eventTypes: [],
      retry: { preset: 'default' }, timeoutMs: 1_000, mode: 'at-least-once', ordering: 'fifo', concurrency: 8, status: 'enabled',
      disabledReason: null, failingSince: null, secrets: [], createdAt: now, updatedAt: now,
    });
    async function seeded(store: SqliteStore, endpointId: string, count: number, orderingKey: string | null, dueAt: (i: number) => number, from = 0) {
      const ids: string[] = [];
      const events = Array.from({ length: count }, (_, i) => ({
        id: `evt_${orderingKey ?? 'none'}_${from + i}`, tenantId: 'acme', type: 't', payload: '{}', createdAt: now + from + i, endpointId: null, orderingKey,
      }));
      await store.appendEvents(events);
      await store.recordFanOuts(events.map((event, i) => {
        const id = deliveryIdFor(event.id, endpointId, event.createdAt);
        ids.push(id);
        return { eventId: event.id, deliveries: [{ id, eventId: event.id, endpointId, tenantId: 'acme', eventType: 't',
          slot: slotOf(endpointId, 4), nextAttemptAt: dueAt(i), createdAt: event.createdAt, orderingKey }] };
      }), now);
      return ids;
    }

    context('when more than a thousand deliveries of one line are due (the claim by endpoint)', () => {
      it('still finds the head of another line behind them, and only the heads', async () => {
        clock = new ManualClock(now);
        const store = openStore();
        await store.init({ slotCount: 4 });
        await store.createEndpoint(fifoEndpoint('ep_fifo'));
        const long = await seeded(store, 'ep_fifo', 1_100, 'k', (i) => now - 3_600_000 + i);
        const [other] = await seeded(store, 'ep_fifo', 1, 'j', () => now, 1_100);
        await store.acquireLeases({ owner: 'a', slots: [0, 1, 2, 3], now, leaseMs: 60_000 });
        const jobs = await store.claimDue({ owner: 'a', now, limit: 20, perEndpointLimit: 5, skipEndpointIds: [] });
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal([long[0], other]);
      });
    });

    context('when a line holds deliveries from before sequence numbers (NULL)', () => {
      it('puts them first, oldest created first, then the numbered ones', async () => {
        clock = new ManualClock(now);
        const path = join(dir, 'herald.db');
        const store = openStore(path);
        await store.init({ slotCount: 4 });
        await store.createEndpoint(fifoEndpoint('ep_fifo'));
        const [numbered, older, old] = await seeded(store, 'ep_fifo', 3, 'k', () => now);
        // As the migration left them: no number; `older` was created before `old`.
        const raw = new Database(path);
        opened.push(raw);
        raw.prepare(`UPDATE deliveries SET sequence = NULL WHERE id IN (?, ?)`).run(older, old);
        raw.prepare(`UPDATE deliveries SET created_at = created_at - 10 WHERE id = ?`).run(older);
        await store.acquireLeases({ owner: 'a', slots: [0, 1, 2, 3], now, leaseMs: 60_000 });
        const order: string[] = [];
        for (let i = 0; i < 3; i++) {
          const [job] = await store.claimDue({ owner: 'a', now, limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
          expect(job, `claim ${i + 1}`).to.not.equal(undefined);
          order.push(job!.delivery.id);
          await store.settle([{ kind: 'delivered', deliveryId: job!.delivery.id, epoch: job!.delivery.leaseEpoch,
            attempt: { number: 1, startedAt: now, durationMs: 1, outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, error: null } }], now);
        }
        expect(order).to.deep.equal([older, old, numbered]);
      });
    });
  });

  describe('dead letters across rounds', () => {
    context('when a replayed delivery dies again', () => {
      it('gives each dead letter the attempts of the round that died', async () => {
        const store = openStore();
        await store.init({ slotCount: 4 });
        const now = clock.now();
        const endpoint: Endpoint = {
          id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/1', description: '', eventTypes: [],
          retry: { preset: 'default' }, timeoutMs: 1_000, mode: 'at-most-once', ordering: 'none', concurrency: 1, status: 'enabled',
          disabledReason: null, failingSince: null, secrets: [], createdAt: now, updatedAt: now,
        };
        await store.createEndpoint(endpoint);
        await store.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{"a":1}', createdAt: now, endpointId: null, orderingKey: null }]);
        const deliveryId = deliveryIdFor('evt_1', 'ep_1', now);
        await store.recordFanOuts([{ eventId: 'evt_1', deliveries: [{
          id: deliveryId, eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't',
          slot: slotOf('ep_1', 4), nextAttemptAt: now, createdAt: now, orderingKey: null,
        }] }], clock.now());
        const refused: Outcome = { kind: 'network', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' };
        const die = async (deadLetterId: string) => {
          await store.acquireLeases({ owner: 'a', slots: [0, 1, 2, 3], now: clock.now(), leaseMs: 1_000 });
          const [job] = await store.claimDue({ owner: 'a', now: clock.now(), limit: 1, perEndpointLimit: 1, skipEndpointIds: [] });
          await store.settle([{
            kind: 'dead', deliveryId, epoch: job!.delivery.leaseEpoch, deadLetterId, reason: 'at-most-once: ECONNREFUSED',
            attempt: { number: 1, startedAt: clock.now(), durationMs: 3, outcome: refused, error: 'ECONNREFUSED' },
          }], clock.now());
        };
        await die('dl_1');
        clock.advance(1_000);
        await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now());
        await die('dl_2');

        const first = await store.getDeadLetter('dl_1');
        const second = await store.getDeadLetter('dl_2');
        expect(first?.attempts.map((a) => a.round)).to.deep.equal([0]);
        expect(second?.attempts.map((a) => a.round)).to.deep.equal([1]);
        expect(await store.listAttempts(deliveryId)).to.have.length(2);
      });
    });
  });
  describe('a success at the first attempt', () => {
    it('is kept on the delivery, writes no attempt row, and is listed first; later attempts and rounds are rows', async () => {
      const path = join(dir, 'herald.db');
      const store = openStore(path);
      await store.init({ slotCount: 4 });
      const now = clock.now();
      await store.createEndpoint({
        id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/1', description: '', eventTypes: [],
        retry: { preset: 'default' }, timeoutMs: 1_000, mode: 'at-least-once', ordering: 'none', concurrency: 8, status: 'enabled',
        disabledReason: null, failingSince: null, secrets: [], createdAt: now, updatedAt: now,
      });
      const ids = ['evt_1', 'evt_2'].map((eventId) => deliveryIdFor(eventId, 'ep_1', now));
      await store.appendEvents(['evt_1', 'evt_2'].map((id) => ({ id, tenantId: 'acme', type: 't', payload: '{}', createdAt: now, endpointId: null, orderingKey: null })));
      await store.recordFanOuts(['evt_1', 'evt_2'].map((eventId, i) => ({ eventId, deliveries: [{
        id: ids[i]!, eventId, endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: slotOf('ep_1', 4), nextAttemptAt: now, createdAt: now, orderingKey: null,
      }] })), now);
      await store.acquireLeases({ owner: 'a', slots: [0, 1, 2, 3], now, leaseMs: 60_000 });
      const jobs = await store.claimDue({ owner: 'a', now, limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      const epoch = jobs[0]!.delivery.leaseEpoch;
      const ok: Outcome = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' };
      const busy: Outcome = { kind: 'response', status: 503, location: null, retryAfter: null, body: 'busy' };
      await store.settle([
        { kind: 'delivered', deliveryId: ids[0]!, epoch, attempt: { number: 1, startedAt: now + 5, durationMs: 7, outcome: ok, error: null } },
        { kind: 'retry', deliveryId: ids[1]!, epoch, nextAttemptAt: now, attempt: { number: 1, startedAt: now + 6, durationMs: 9, outcome: busy, error: 'HTTP 503' } },
      ], now);
      const [again] = await store.claimDue({ owner: 'a', now, limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      await store.settle([{ kind: 'delivered', deliveryId: ids[1]!, epoch, attempt: { number: 2, startedAt: now + 8, durationMs: 4, outcome: ok, error: null } }], now);
      expect(again?.delivery.id).to.equal(ids[1]);

      const raw = new Database(path, { readonly: true });
      opened.push(raw);
      const rows = raw.prepare(`SELECT delivery_id, count(*) AS n FROM attempts GROUP BY delivery_id`).all();
      expect(rows).to.deep.equal([{ delivery_id: ids[1], n: 2 }]);
      expect(await store.listAttempts(ids[0]!)).to.deep.equal([{ deliveryId: ids[0]!, number: 1, round: 0, startedAt: now + 5, durationMs: 7, outcome: ok, error: null }]);
      expect((await store.listAttempts(ids[1]!)).map((a) => [a.number, a.startedAt])).to.deep.equal([[1, now + 6], [2, now + 8]]);
    });
  });
});
