/**
 * The behaviour every Store adapter must show, whatever it is built on. An
 * adapter's spec calls {@link describeStoreConformance} with a function that
 * opens a fresh, empty store on a ManualClock; the suite calls `init()` itself.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import type { HeraldError } from '../../lib/errors.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { Endpoint, OutboxEvent, Outcome, ReplayJobRecord, TenantToken } from '../../lib/model.ts';
import type { AttemptRecord, ClaimRequest, NewDelivery, Store } from '../../lib/store/port.ts';
import { LATENCY_BUCKETS, type DeliveryMinuteIncrement } from '../../lib/store/delivery-minutes.ts';

export interface StoreHarness {
  readonly store: Store;
  readonly clock: ManualClock;
  close(): Promise<void>;
}

const SLOTS = 8;
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const LEASE_MS = 30 * SECOND;

const OK: Outcome = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' };
const BUSY: Outcome = { kind: 'response', status: 503, location: null, retryAfter: '30', body: 'busy' };
const TIMEOUT: Outcome = { kind: 'timeout', timeoutMs: 10_000 };

/** An endpoint id that hashes into `slot`, so tests can place work in chosen slots. */
function endpointIdInSlot(slot: number, prefix = 'ep'): string {
  for (let i = 0; ; i++) {
    const id = `${prefix}_${i}`;
    if (slotOf(id, SLOTS) === slot) return id;
  }
}

export function makeEndpoint(id: string, tenantId: string, now: number, overrides: Partial<Endpoint> = {}): Endpoint {
  return {
    id,
    tenantId,
    url: `https://hooks.example.com/${id}`,
    description: `endpoint ${id}`,
    eventTypes: ['invoice.*', 'user.created'],
    retry: { preset: 'default' },
    timeoutMs: 10_000,
    mode: 'at-least-once', ordering: 'none',
    concurrency: 4,
    status: 'enabled',
    disabledReason: null,
    failingSince: null,
    secrets: [{ secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', createdAt: now, expiresAt: null }],
    createdAt: now,
    updatedAt: now,
    ...overrides,
  };
}

function makeEvent(id: string, tenantId: string, now: number, overrides: Partial<OutboxEvent> = {}): OutboxEvent {
  return {
    id,
    tenantId,
    type: 'invoice.paid',
    payload: JSON.stringify({ invoice: id, amount: 42, note: 'héllo' }),
    createdAt: now,
    endpointId: null,
    orderingKey: null,
    ...overrides,
  };
}

function attempt(startedAt: number, outcome: Outcome, error: string | null, number = 1): AttemptRecord {
  return { number, startedAt, durationMs: 120, outcome, error };
}

async function rejection(promise: Promise<unknown>): Promise<HeraldError> {
  try {
    await promise;
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected the promise to reject');
}

/**
 * The suite against a store on a file of its own in a fresh temp folder (removed afterwards).
 * `startAt`: the clock's first reading (a store that reads the system clock needs the real time).
 */
export function describeFileStoreConformance(
  name: string,
  open: (path: string, clock: ManualClock) => Store & { close(): Promise<void> },
  startAt = 0,
): void {
  describe(`Store lifecycle: ${name}`, () => {
    it('rejects a call before init() with HERALD_STORE and after close() with HERALD_CLOSED', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'herald-store-'));
      try {
        const store = open(join(dir, 'herald.db'), new ManualClock(startAt));
        const early = await store.getEndpoint('ep_1').catch((e: unknown) => e);
        expect(isHeraldError(early) && early.code).to.equal(ErrorCode.STORE);
        await store.init({ slotCount: SLOTS });
        await store.close();
        const late = await store.getEndpoint('ep_1').catch((e: unknown) => e);
        expect(isHeraldError(late) && late.code).to.equal(ErrorCode.CLOSED);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describeStoreConformance(name, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-store-'));
    const clock = new ManualClock(startAt);
    const store = open(join(dir, 'herald.db'), clock);
    return {
      store,
      clock,
      async close() {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
}

export function describeStoreConformance(name: string, open: () => Promise<StoreHarness>): void {
  describe(`Store conformance: ${name}`, () => {
    let h: StoreHarness;
    let store: Store;
    let clock: ManualClock;
    let eventSeq = 0;

    beforeEach(async () => {
      h = await open();
      store = h.store;
      clock = h.clock;
      eventSeq = 0;
      await store.init({ slotCount: SLOTS });
    });

    afterEach(async () => {
      await h.close();
    });

    async function addEndpoint(id: string, tenantId = 'acme', overrides: Partial<Endpoint> = {}): Promise<Endpoint> {
      const endpoint = makeEndpoint(id, tenantId, clock.now(), overrides);
      await store.createEndpoint(endpoint);
      return endpoint;
    }

    /** Appends an event and fans it out to `endpointIds`; returns the event and its delivery ids. */
    async function seed(
      endpointIds: readonly string[],
      options: { tenantId?: string; dueAt?: number; eventId?: string; type?: string; orderingKey?: string } = {},
    ): Promise<{ event: OutboxEvent; deliveryIds: string[] }> {
      const now = clock.now();
      const event = makeEvent(options.eventId ?? `evt_${++eventSeq}`, options.tenantId ?? 'acme', now, {
        type: options.type ?? 'invoice.paid',
        orderingKey: options.orderingKey ?? null,
      });
      await store.appendEvents([event]);
      const deliveries = plan(event, endpointIds, options.dueAt ?? now);
      await store.recordFanOuts([{ eventId: event.id, deliveries }], clock.now());
      return { event, deliveryIds: deliveries.map((d) => d.id) };
    }

    function plan(event: OutboxEvent, endpointIds: readonly string[], dueAt: number): NewDelivery[] {
      return endpointIds.map((endpointId) => ({
        id: deliveryIdFor(event.id, endpointId, event.createdAt),
        eventId: event.id,
        endpointId,
        tenantId: event.tenantId,
        eventType: event.type,
        slot: slotOf(endpointId, SLOTS),
        nextAttemptAt: dueAt,
        createdAt: clock.now(),
        orderingKey: event.orderingKey,
      }));
    }

    const allSlots = Array.from({ length: SLOTS }, (_, i) => i);

    async function lease(owner = 'node-a', slots: readonly number[] = allSlots, leaseMs = LEASE_MS) {
      return store.acquireLeases({ owner, slots, now: clock.now(), leaseMs });
    }

    async function claim(overrides: Partial<ClaimRequest> = {}) {
      return store.claimDue({
        owner: 'node-a',
        now: clock.now(),
        limit: 100,
        perEndpointLimit: 100,
        skipEndpointIds: [],
        ...overrides,
      });
    }

    /** Seeds one delivery to `endpointId` and claims it as node-a; returns the claimed delivery. */
    async function claimedDelivery(endpointId: string) {
      const { deliveryIds, event } = await seed([endpointId]);
      await lease();
      const jobs = await claim({ endpointId });
      const job = jobs.find((j) => j.delivery.id === deliveryIds[0]);
      if (job === undefined) throw new Error('the seeded delivery was not claimed');
      return { delivery: job.delivery, event };
    }

    describe('init', () => {
      context('when started again with another slot count', () => {
        it('keeps the slot count of the first start', async () => {
          expect(await store.init({ slotCount: SLOTS })).to.deep.equal({ slotCount: SLOTS });
          expect(await store.init({ slotCount: 1024 })).to.deep.equal({ slotCount: SLOTS });
        });
      });
    });

    describe('endpoints', () => {
      context('when an endpoint is created', () => {
        it('reads it back exactly, nulls and JSON fields included', async () => {
          const created = await addEndpoint('ep_1', 'acme', {
            retry: { schedule: ['PT1M', 'PT5M'] },
            mode: 'at-most-once', ordering: 'none',
            secrets: [
              { secret: 'whsec_bmV3', createdAt: clock.now(), expiresAt: null },
              { secret: 'whsec_b2xk', createdAt: clock.now() - DAY, expiresAt: clock.now() + DAY },
            ],
          });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(created);
        });

        it('keeps every form of retry policy whole, jitter included, on create and on patch', async () => {
          const formula = { initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9, window: 'P2D', jitter: 'full' } as const;
          const decorrelated = { initial: 'PT10S', max: 'PT1H', window: 'P1D', jitter: 'decorrelated' } as const;
          const created = await addEndpoint('ep_1', 'acme', { retry: formula });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(created);
          for (const retry of [decorrelated, { preset: 'relaxed', jitter: 'equal' }, { schedule: ['PT1M'], jitter: '±20%' }] as const) {
            const patched = await store.updateEndpoint('ep_1', { retry }, clock.now());
            expect(patched?.retry).to.deep.equal(retry);
            expect((await store.getEndpoint('ep_1'))?.retry).to.deep.equal(retry);
          }
        });

        it('writes a patch with expectedSecrets only while the stored secrets are those (HERALD_CONFLICT otherwise, nothing written)', async () => {
          const created = await addEndpoint('ep_1');
          const read = created.secrets.map((s) => s.secret);
          const rotated = [{ secret: 'whsec_bmV3', createdAt: clock.now(), expiresAt: null }];
          const first = await store.updateEndpoint('ep_1', { secrets: rotated, expectedSecrets: read }, clock.now());
          expect(first).to.deep.equal({ ...created, secrets: rotated });
          const stale = await rejection(
            store.updateEndpoint('ep_1', { secrets: [{ secret: 'whsec_c3RhbGU=', createdAt: 0, expiresAt: null }], url: 'https://moved.example/', expectedSecrets: read }, clock.now()),
          );
          expect(stale.code).to.equal(ErrorCode.CONFLICT);
          expect(stale.message).to.include('ep_1');
          expect(await store.getEndpoint('ep_1')).to.deep.equal(first);
          expect(await store.updateEndpoint('ep_missing', { secrets: rotated, expectedSecrets: [] }, clock.now())).to.equal(undefined);
        });

        it('refuses a second endpoint with the same id (HERALD_CONFLICT)', async () => {
          await addEndpoint('ep_1');
          const error = await rejection(store.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now())));
          expect(error.code).to.equal(ErrorCode.CONFLICT);
        });

        it('makes its tenant exist', async () => {
          expect(await store.tenantExists('acme')).to.equal(false);
          await addEndpoint('ep_1', 'acme');
          expect(await store.tenantExists('acme')).to.equal(true);
          expect(await store.tenantExists('globex')).to.equal(false);
        });
      });

      context('when an endpoint has a rate limit', () => {
        it('reads it back exactly, and one without a limit has no rateLimit', async () => {
          const limited = await addEndpoint('ep_1', 'acme', { rateLimit: { perSecond: 0.25, burst: 3 } });
          const unlimited = await addEndpoint('ep_2', 'acme');
          expect(await store.getEndpoint('ep_1')).to.deep.equal(limited);
          expect(await store.getEndpoint('ep_2')).to.deep.equal(unlimited);
          expect(await store.getEndpoint('ep_2')).to.not.have.property('rateLimit');
          expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([limited, unlimited]);
        });

        it('sets, changes and lifts it by patch (null), leaving the other fields alone', async () => {
          const created = await addEndpoint('ep_1', 'acme');
          const set = await store.updateEndpoint('ep_1', { rateLimit: { perSecond: 10, burst: 10 } }, clock.now());
          expect(set).to.deep.equal({ ...created, rateLimit: { perSecond: 10, burst: 10 } });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
          const changed = await store.updateEndpoint('ep_1', { rateLimit: { perSecond: 10_000, burst: 1 }, concurrency: 2 }, clock.now());
          expect(await store.getEndpoint('ep_1')).to.deep.equal(changed);
          expect(changed?.rateLimit).to.deep.equal({ perSecond: 10_000, burst: 1 });
          const kept = await store.updateEndpoint('ep_1', { url: 'https://hooks.example.com/moved' }, clock.now());
          expect(kept?.rateLimit, 'a patch without rateLimit keeps it').to.deep.equal({ perSecond: 10_000, burst: 1 });
          const lifted = await store.updateEndpoint('ep_1', { rateLimit: null }, clock.now());
          expect(lifted).to.deep.equal({ ...created, url: 'https://hooks.example.com/moved', concurrency: 2 });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(lifted);
          expect(await store.getEndpoint('ep_1')).to.not.have.property('rateLimit');
        });
      });

      context('when an endpoint has adaptive concurrency', () => {
        it('reads it back exactly, and a fixed one has no adaptiveConcurrency', async () => {
          const adaptive = await addEndpoint('ep_1', 'acme', { concurrency: 64, adaptiveConcurrency: { initial: 2, targetLatencyMs: 750 } });
          const fixed = await addEndpoint('ep_2', 'acme');
          expect(await store.getEndpoint('ep_1')).to.deep.equal(adaptive);
          expect(await store.getEndpoint('ep_2')).to.not.have.property('adaptiveConcurrency');
          expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([adaptive, fixed]);
        });

        it('sets, changes and removes it by patch (null), leaving the other fields alone', async () => {
          const created = await addEndpoint('ep_1', 'acme', { rateLimit: { perSecond: 5, burst: 5 } });
          const set = await store.updateEndpoint('ep_1', { adaptiveConcurrency: { initial: 1, targetLatencyMs: 2_000 } }, clock.now());
          expect(set).to.deep.equal({ ...created, adaptiveConcurrency: { initial: 1, targetLatencyMs: 2_000 } });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
          const kept = await store.updateEndpoint('ep_1', { concurrency: 9, rateLimit: null }, clock.now());
          expect(kept?.adaptiveConcurrency, 'a patch without adaptiveConcurrency keeps it').to.deep.equal({ initial: 1, targetLatencyMs: 2_000 });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(kept);
          const fixed = await store.updateEndpoint('ep_1', { adaptiveConcurrency: null }, clock.now());
          const { rateLimit: _, ...unlimited } = created;
          expect(fixed).to.deep.equal({ ...unlimited, concurrency: 9 });
          expect(await store.getEndpoint('ep_1')).to.deep.equal(fixed);
        });
      });

      context('when an endpoint does not exist', () => {
        it('returns undefined from get and update, false from delete', async () => {
          expect(await store.getEndpoint('ep_missing')).to.equal(undefined);
          expect(await store.updateEndpoint('ep_missing', { url: 'https://x.example' }, clock.now())).to.equal(undefined);
          expect(await store.deleteEndpoint('ep_missing', clock.now())).to.equal(false);
        });
      });

      context('when listing', () => {
        it('lists all endpoints or those of one tenant', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'globex');
          await addEndpoint('ep_3', 'acme');
          expect((await store.listEndpoints()).map((e) => e.id).sort()).to.deep.equal(['ep_1', 'ep_2', 'ep_3']);
          expect((await store.listEndpoints({ tenantId: 'acme' })).map((e) => e.id).sort()).to.deep.equal(['ep_1', 'ep_3']);
          expect(await store.listEndpoints({ tenantId: 'initech' })).to.deep.equal([]);
        });
      });

      context('when patched', () => {
        it('changes only the given fields, sets updatedAt and returns the new endpoint', async () => {
          const created = await addEndpoint('ep_1', 'acme', { failingSince: clock.now() - HOUR });
          clock.advance(MINUTE);
          const updated = await store.updateEndpoint(
            'ep_1',
            { url: 'https://new.example/hook', status: 'disabled', disabledReason: 'operator', failingSince: null },
            clock.now(),
          );
          const expected: Endpoint = {
            ...created,
            url: 'https://new.example/hook',
            status: 'disabled',
            disabledReason: 'operator',
            failingSince: null,
            updatedAt: clock.now(),
          };
          expect(updated).to.deep.equal(expected);
          expect(await store.getEndpoint('ep_1')).to.deep.equal(expected);
        });
      });

      context('when deleted', () => {
        it('removes it and cancels its undelivered deliveries, leaving finished ones alone', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const { delivery: inFlight } = await claimedDelivery('ep_1');
          const { delivery: done } = await claimedDelivery('ep_1');
          await store.settle(
            [{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          const { deliveryIds: [pendingId] } = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
          const { deliveryIds: [otherId] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
          clock.advance(SECOND);

          expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(true);
          expect(await store.getEndpoint('ep_1')).to.equal(undefined);
          expect((await store.getDelivery(inFlight.id))?.status).to.equal('cancelled');
          expect((await store.getDelivery(pendingId!))?.status).to.equal('cancelled');
          expect((await store.getDelivery(pendingId!))?.updatedAt).to.equal(clock.now());
          expect((await store.getDelivery(done.id))?.status).to.equal('delivered');
          expect((await store.getDelivery(otherId!))?.status).to.equal('pending');
          expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(false);
        });
      });
    });

    describe('endpoint changes', () => {
      context('when endpoints are created, updated and deleted', () => {
        it('numbers every change 1, 2, 3, … in order, and lists those after a cursor, at most a limit', async () => {
          expect(await store.lastEndpointChange()).to.equal(0);
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          await store.updateEndpoint('ep_1', { url: 'https://hooks.example.com/moved' }, clock.now());
          await store.updateEndpoint('ep_2', { status: 'disabled', disabledReason: 'operator' }, clock.now());
          expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(true);
          expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([
            { version: 1, endpointId: 'ep_1' },
            { version: 2, endpointId: 'ep_2' },
            { version: 3, endpointId: 'ep_1' },
            { version: 4, endpointId: 'ep_2' },
            { version: 5, endpointId: 'ep_1' },
          ]);
          expect(await store.endpointChangesAfter(3, 1)).to.deep.equal([{ version: 4, endpointId: 'ep_2' }]);
          expect(await store.endpointChangesAfter(5, 100)).to.deep.equal([]);
          expect(await store.lastEndpointChange()).to.equal(5);
        });
      });

      context('when a write changes nothing', () => {
        it('takes no number: an unknown id updated or deleted, a duplicate created, a secrets precondition that fails', async () => {
          const created = await addEndpoint('ep_1');
          expect(await store.updateEndpoint('ep_nope', { url: 'https://hooks.example.com/x' }, clock.now())).to.equal(undefined);
          expect(await store.deleteEndpoint('ep_nope', clock.now())).to.equal(false);
          const duplicate = await store.createEndpoint(created).then(() => 'created', (error: unknown) => error);
          expect((duplicate as HeraldError).code).to.equal(ErrorCode.CONFLICT);
          const conflict = await store
            .updateEndpoint('ep_1', { secrets: [], expectedSecrets: ['whsec_not_the_stored_one'] }, clock.now())
            .then(() => 'written', (error: unknown) => error);
          expect((conflict as HeraldError).code).to.equal(ErrorCode.CONFLICT);
          expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 1, endpointId: 'ep_1' }]);
          expect(await store.lastEndpointChange()).to.equal(1);
        });
      });

      context('when the changes are purged', () => {
        it('deletes those recorded before the horizon and never reuses their numbers', async () => {
          await addEndpoint('ep_1');
          clock.advance(DAY);
          await store.updateEndpoint('ep_1', { description: 'later' }, clock.now());
          await store.purge(clock.now() - HOUR);
          expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 2, endpointId: 'ep_1' }]);
          await store.purge(clock.now() + HOUR);
          expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([]);
          expect(await store.lastEndpointChange()).to.equal(2);
          await addEndpoint('ep_2');
          expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 3, endpointId: 'ep_2' }]);
        });
      });
    });

    describe('resumeDeliveries', () => {
      context('when an endpoint is re-enabled with deliveries waiting for later', () => {
        it('makes its pending deliveries due now and leaves other endpoints and earlier ones alone', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const { deliveryIds: [later] } = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
          const { deliveryIds: [earlier] } = await seed(['ep_1'], { dueAt: clock.now() - HOUR });
          const { deliveryIds: [other] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
          expect(await store.resumeDeliveries('ep_1', clock.now())).to.equal(1);
          expect((await store.getDelivery(later!))?.nextAttemptAt).to.equal(clock.now());
          expect((await store.getDelivery(earlier!))?.nextAttemptAt).to.equal(clock.now() - HOUR);
          expect((await store.getDelivery(other!))?.nextAttemptAt).to.equal(clock.now() + HOUR);
        });
      });
    });

    describe('outbox and fan-out', () => {
      context('when events are appended', () => {
        it('reads them back and lists unfanned ones oldest first, up to the limit', async () => {
          const first = makeEvent('evt_a', 'acme', clock.now(), { endpointId: 'ep_1' });
          clock.advance(SECOND);
          const second = makeEvent('evt_b', 'acme', clock.now());
          clock.advance(SECOND);
          const third = makeEvent('evt_c', 'globex', clock.now());
          await store.appendEvents([third]);
          await store.appendEvents([first, second]);
          expect(await store.getEvent('evt_a')).to.deep.equal(first);
          expect(await store.getEvent('evt_b')).to.deep.equal(second);
          expect(await store.getEvent('evt_missing')).to.equal(undefined);
          expect(await store.unfannedEvents(10)).to.deep.equal([first, second, third]);
          expect(await store.unfannedEvents(2)).to.deep.equal([first, second]);
        });

        it('lists only other tenants\' unfanned events when tenants are excepted, oldest first', async () => {
          const events = ['evt_1', 'evt_2', 'evt_3', 'evt_4', 'evt_5'].map((id, i) => {
            clock.advance(SECOND);
            return makeEvent(id, i === 2 ? 'globex' : i === 4 ? 'initech' : 'acme', clock.now());
          });
          await store.appendEvents(events);
          expect((await store.unfannedEvents(10, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_3', 'evt_5']);
          expect((await store.unfannedEvents(1, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_3']);
          expect((await store.unfannedEvents(10, ['acme', 'globex'])).map((e) => e.id)).to.deep.equal(['evt_5']);
          expect(await store.unfannedEvents(10, [])).to.have.length(5);
        });

        it('lists other tenants\' oldest first, across tenants, up to the limit, when one tenant has several waiting', async () => {
          const tenants = ['acme', 'globex', 'acme', 'initech', 'globex', 'globex', 'acme'];
          const events = tenants.map((tenant, i) => {
            clock.advance(SECOND);
            return makeEvent(`evt_${i}`, tenant, clock.now());
          });
          await store.appendEvents(events);
          expect((await store.unfannedEvents(10, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_1', 'evt_3', 'evt_4', 'evt_5']);
          expect((await store.unfannedEvents(3, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_1', 'evt_3', 'evt_4']);
          expect((await store.unfannedEvents(2, ['initech'])).map((e) => e.id)).to.deep.equal(['evt_0', 'evt_1']);
        });

        it('counts those waiting to be fanned out, up to the cap, and no longer once fanned out', async () => {
          await addEndpoint('ep_1');
          const events = ['evt_a', 'evt_b', 'evt_c'].map((id) => makeEvent(id, 'acme', clock.now()));
          await store.appendEvents(events);
          expect(await store.countUnfannedEvents(100)).to.equal(3);
          expect(await store.countUnfannedEvents(2)).to.equal(2);
          expect(await store.countUnfannedEvents(0)).to.equal(0);
          await store.recordFanOuts([{ eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1'], clock.now()) }], clock.now());
          expect(await store.countUnfannedEvents(100)).to.equal(2);
        });
      });

      context('when an event is fanned out', () => {
        it('creates pending deliveries at attempt 0, round 0 and epoch 0, and the event is no longer unfanned', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const { event, deliveryIds } = await seed(['ep_1', 'ep_2']);
          expect(await store.unfannedEvents(10)).to.deep.equal([]);
          const delivery = await store.getDelivery(deliveryIds[0]!);
          expect(delivery).to.deep.equal({
            id: deliveryIdFor(event.id, 'ep_1', event.createdAt),
            eventId: event.id,
            endpointId: 'ep_1',
            tenantId: 'acme',
            eventType: 'invoice.paid',
            slot: slotOf('ep_1', SLOTS),
            status: 'pending',
            attempts: 0,
            round: 0,
            nextAttemptAt: clock.now(),
            leaseEpoch: 0,
            lastError: null,
            createdAt: clock.now(),
            updatedAt: clock.now(),
            deliveredAt: null,
            sequence: 1,
            orderingKey: null,
          });
          expect(await store.listDeliveries({ eventId: event.id })).to.have.length(2);
        });

        it('marks an event with no subscribers fanned out too', async () => {
          const event = makeEvent('evt_lonely', 'acme', clock.now());
          await store.appendEvents([event]);
          await store.recordFanOuts([{ eventId: event.id, deliveries: [] }], clock.now());
          expect(await store.unfannedEvents(10)).to.deep.equal([]);
        });
      });

      context('when several events are fanned out in one call', () => {
        it('records every one of them', async () => {
          await addEndpoint('ep_1');
          const events = [makeEvent('evt_a', 'acme', clock.now()), makeEvent('evt_b', 'acme', clock.now()), makeEvent('evt_c', 'acme', clock.now())];
          await store.appendEvents(events);
          await store.recordFanOuts([
            { eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1'], clock.now()) },
            { eventId: 'evt_b', deliveries: [] },
            { eventId: 'evt_c', deliveries: plan(events[2]!, ['ep_1'], clock.now()) },
          ], clock.now());
          expect(await store.unfannedEvents(10)).to.deep.equal([]);
          expect((await store.listDeliveries({ endpointId: 'ep_1' })).map((d) => d.eventId).sort()).to.deep.equal(['evt_a', 'evt_c']);
        });

        it('writes nothing when one of the events is not stored, and names it', async () => {
          await addEndpoint('ep_1');
          const stored = makeEvent('evt_here', 'acme', clock.now());
          await store.appendEvents([stored]);
          const error = await rejection(
            store.recordFanOuts([
              { eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) },
              { eventId: 'evt_gone', deliveries: [] },
            ], clock.now()),
          );
          expect(error.code).to.equal(ErrorCode.NOT_FOUND);
          expect(error.message).to.include('evt_gone');
          expect(await store.listDeliveries({ endpointId: 'ep_1' })).to.deep.equal([]);
          expect((await store.unfannedEvents(10)).map((e) => e.id)).to.deep.equal(['evt_here']);
        });
      });

      context('when fan-out claims some deliveries as it creates them', () => {
        it('inserts those in slots the owner holds in flight at the slot\'s epoch and returns them; the rest pending', async () => {
          const mine = endpointIdInSlot(1);
          const theirs = endpointIdInSlot(2);
          const unasked = endpointIdInSlot(3, 'quiet');
          for (const id of [mine, theirs, unasked]) await addEndpoint(id);
          const [held] = await lease('node-a', [1, 3]);
          const event = makeEvent('evt_claimed', 'acme', clock.now());
          await store.appendEvents([event]);
          const deliveries = plan(event, [mine, theirs, unasked], clock.now());
          const [toMine, toTheirs, toUnasked] = deliveries.map((d) => d.id);
          clock.advance(SECOND);
          const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries }], clock.now(), {
            owner: 'node-a',
            deliveryIds: new Set([toMine!, toTheirs!]),
          });
          expect(claimed).to.have.length(1);
          expect(claimed[0]).to.include({ id: toMine, status: 'in_flight', leaseEpoch: held!.epoch, attempts: 0, updatedAt: clock.now() });
          expect(await store.getDelivery(toMine!)).to.deep.equal(claimed[0]);
          expect(await store.getDelivery(toTheirs!)).to.include({ status: 'pending', leaseEpoch: 0 });
          expect(await store.getDelivery(toUnasked!)).to.include({ status: 'pending', leaseEpoch: 0 });
          // Claimed like claimDue claims: not claimed again, settled at that epoch.
          expect((await claim()).map((j) => j.delivery.id)).to.deep.equal([toUnasked]);
          const settled = await store.settle(
            [{ kind: 'delivered', deliveryId: toMine!, epoch: held!.epoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(settled.applied).to.deep.equal([toMine]);
        });

        it('returns nothing for a delivery that already existed (a rerun), and leaves it as it was', async () => {
          await addEndpoint('ep_1');
          const { event, deliveryIds } = await seed(['ep_1']);
          await lease();
          const before = await store.getDelivery(deliveryIds[0]!);
          const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) }], clock.now(), {
            owner: 'node-a',
            deliveryIds: new Set(deliveryIds),
          });
          expect(claimed).to.deep.equal([]);
          expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(before);
        });
      });

      context('when deliveries are numbered per endpoint', () => {
        const sequences = async (endpointId: string) =>
          (await store.listDeliveries({ endpointId, limit: 1000 })).map((d) => [d.eventId, d.sequence]).sort((a, b) => Number(a[1]) - Number(b[1]));

        it('numbers each endpoint 1, 2, 3, … in the order given, within a batch and across batches', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const events = ['evt_a', 'evt_b', 'evt_c', 'evt_d'].map((id) => makeEvent(id, 'acme', clock.now()));
          await store.appendEvents(events);
          await store.recordFanOuts([
            { eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1', 'ep_2'], clock.now()) },
            { eventId: 'evt_b', deliveries: plan(events[1]!, ['ep_2'], clock.now()) },
            { eventId: 'evt_c', deliveries: plan(events[2]!, ['ep_1', 'ep_2'], clock.now()) },
          ], clock.now());
          await store.recordFanOuts([{ eventId: 'evt_d', deliveries: plan(events[3]!, ['ep_2', 'ep_1'], clock.now()) }], clock.now());
          expect(await sequences('ep_1')).to.deep.equal([['evt_a', 1], ['evt_c', 2], ['evt_d', 3]]);
          expect(await sequences('ep_2')).to.deep.equal([['evt_a', 1], ['evt_b', 2], ['evt_c', 3], ['evt_d', 4]]);
        });

        it('gives a re-planned event\'s existing deliveries no new number, so none is burnt', async () => {
          await addEndpoint('ep_1');
          const { event } = await seed(['ep_1']);
          const next = makeEvent('evt_next', 'acme', clock.now());
          await store.appendEvents([next]);
          // The first event again (a rerun after a crash), beside a new one, in one call.
          await store.recordFanOuts([
            { eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) },
            { eventId: next.id, deliveries: plan(next, ['ep_1'], clock.now()) },
          ], clock.now());
          await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) }], clock.now());
          await seed(['ep_1'], { eventId: 'evt_last' });
          expect(await sequences('ep_1')).to.deep.equal([[event.id, 1], ['evt_next', 2], ['evt_last', 3]]);
        });

        it('takes no number in a fan-out that writes nothing (an event not stored)', async () => {
          await addEndpoint('ep_1');
          const stored = makeEvent('evt_here', 'acme', clock.now());
          await store.appendEvents([stored]);
          await rejection(store.recordFanOuts([
            { eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) },
            { eventId: 'evt_gone', deliveries: [] },
          ], clock.now()));
          await store.recordFanOuts([{ eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) }], clock.now());
          expect(await sequences('ep_1')).to.deep.equal([['evt_here', 1]]);
        });

        it('numbers the deliveries it claims as it creates them too', async () => {
          const id = endpointIdInSlot(1);
          await addEndpoint(id);
          await seed([id]);
          await lease('node-a', [1]);
          const event = makeEvent('evt_claimed', 'acme', clock.now());
          await store.appendEvents([event]);
          const deliveries = plan(event, [id], clock.now());
          const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries }], clock.now(), {
            owner: 'node-a',
            deliveryIds: new Set(deliveries.map((d) => d.id)),
          });
          expect(claimed.map((d) => d.sequence)).to.deep.equal([2]);
        });
      });

      context('when an endpoint\'s deliveries are listed after a sequence number', () => {
        it('lists those numbered after it, in sequence order, up to the limit, of that endpoint only', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          for (let i = 1; i <= 5; i++) await seed(['ep_1', 'ep_2'], { eventId: `evt_n${i}` });
          const page = await store.listDeliveriesAfterSequence('ep_1', 1, 3);
          expect(page.map((d) => [d.sequence, d.eventId, d.endpointId])).to.deep.equal([
            [2, 'evt_n2', 'ep_1'], [3, 'evt_n3', 'ep_1'], [4, 'evt_n4', 'ep_1'],
          ]);
          expect((await store.listDeliveriesAfterSequence('ep_1', 4, 10)).map((d) => d.sequence)).to.deep.equal([5]);
          expect(await store.listDeliveriesAfterSequence('ep_1', 5, 10)).to.deep.equal([]);
          expect((await store.listDeliveriesAfterSequence('ep_1', 0, 1000)).map((d) => d.sequence)).to.deep.equal([1, 2, 3, 4, 5]);
          expect(await store.listDeliveriesAfterSequence('ep_missing', 0, 10)).to.deep.equal([]);
          expect((await store.listDeliveriesAfterSequence('ep_1', 0, 1))[0]).to.deep.equal(await store.getDelivery(deliveryIdFor('evt_n1', 'ep_1', clock.now())));
        });

        it('keeps a delivery\'s number through its death, its replay and a resume', async () => {
          await addEndpoint('ep_1');
          await seed(['ep_1']);
          const { delivery } = await claimedDelivery('ep_1');
          expect(delivery.sequence).to.equal(2);
          await store.settle([{ kind: 'dead', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), { kind: 'timeout', timeoutMs: 10 }, 'timeout'), deadLetterId: 'dl_seq', reason: 'exhausted' }], clock.now());
          expect(await store.replayDeadLetters({ ids: ['dl_seq'] }, clock.now())).to.deep.equal(['dl_seq']);
          expect(await store.getDelivery(delivery.id)).to.include({ status: 'pending', sequence: 2 });
          // Re-enabling an endpoint makes its waiting deliveries due, numbers unchanged.
          await store.resumeDeliveries('ep_1', clock.now());
          expect((await store.listDeliveriesAfterSequence('ep_1', 1, 10)).map((d) => [d.id, d.sequence, d.status])).to.deep.equal([[delivery.id, 2, 'pending']]);
        });
      });

      context('when an event has an ordering key', () => {
        it('keeps it on the event and copies it onto every delivery; an event without one has null', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const keyed = makeEvent('evt_keyed', 'acme', clock.now(), { orderingKey: 'customer/42 – ünïcode' });
          const plain = makeEvent('evt_plain', 'acme', clock.now());
          await store.appendEvents([keyed, plain]);
          expect(await store.getEvent('evt_keyed')).to.deep.equal(keyed);
          expect((await store.unfannedEvents(10)).map((e) => e.orderingKey)).to.deep.equal(['customer/42 – ünïcode', null]);
          await store.recordFanOuts([
            { eventId: keyed.id, deliveries: plan(keyed, ['ep_1', 'ep_2'], clock.now()) },
            { eventId: plain.id, deliveries: plan(plain, ['ep_1'], clock.now()) },
          ], clock.now());
          const keyedDeliveries = await store.listDeliveries({ eventId: keyed.id });
          expect(keyedDeliveries.map((d) => d.orderingKey)).to.deep.equal(['customer/42 – ünïcode', 'customer/42 – ünïcode']);
          expect((await store.listDeliveries({ eventId: plain.id })).map((d) => d.orderingKey)).to.deep.equal([null]);
          await lease();
          const jobs = await claim({ endpointId: 'ep_1' });
          const job = jobs.find((j) => j.event.id === keyed.id);
          expect(job?.event.orderingKey).to.equal('customer/42 – ünïcode');
          expect(job?.delivery.orderingKey).to.equal('customer/42 – ünïcode');
        });
      });

      context('when fan-out runs twice for one event (a crash in between)', () => {
        it('creates nothing twice and leaves the first deliveries untouched', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const { event, deliveryIds } = await seed(['ep_1', 'ep_2']);
          const before = await store.getDelivery(deliveryIds[0]!);
          clock.advance(MINUTE);
          await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1', 'ep_2'], clock.now()) }], clock.now());
          expect(await store.listDeliveries({ eventId: event.id })).to.have.length(2);
          expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(before);
          expect((await store.countDeliveries()).pending).to.equal(2);
          expect(await store.unfannedEvents(10)).to.deep.equal([]);
        });
      });
    });

    describe('membership', () => {
      /** A heartbeat with no requests in flight and no clock offset. */
      const beat = (id: string, startedAt: number, now: number) => ({ id, startedAt, now, inFlight: 0, clockOffsetMs: 0 });

      context('when nodes heartbeat', () => {
        it('lists those seen since a time, by id, and forgets a removed one', async () => {
          const startedAt = clock.now();
          await store.heartbeat(beat('node-b', startedAt, clock.now()));
          await store.heartbeat(beat('node-a', startedAt, clock.now()));
          clock.advance(5 * SECOND);
          await store.heartbeat(beat('node-b', startedAt, clock.now()));
          expect(await store.listNodes(clock.now() - 10 * SECOND)).to.deep.equal([
            { id: 'node-a', startedAt, seenAt: startedAt, inFlight: 0, clockOffsetMs: 0 },
            { id: 'node-b', startedAt, seenAt: clock.now(), inFlight: 0, clockOffsetMs: 0 },
          ]);
          expect((await store.listNodes(clock.now() - SECOND)).map((n) => n.id)).to.deep.equal(['node-b']);
          await store.removeNode('node-b');
          expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['node-a']);
        });

        it('never moves a node\'s last heartbeat backwards', async () => {
          await store.heartbeat(beat('node-a', clock.now(), clock.now() + SECOND));
          await store.heartbeat(beat('node-a', clock.now(), clock.now()));
          expect((await store.listNodes(0))[0]?.seenAt).to.equal(clock.now() + SECOND);
        });
      });

      context('when a heartbeat carries the node\'s figures', () => {
        it('lists each node with those of its last heartbeat, written even when its time is older (a corrected clock)', async () => {
          const startedAt = clock.now();
          await store.heartbeat({ id: 'node-a', startedAt, now: clock.now(), inFlight: 7, clockOffsetMs: -30_012 });
          await store.heartbeat({ id: 'node-b', startedAt, now: clock.now(), inFlight: 0, clockOffsetMs: 4 });
          clock.advance(SECOND);
          await store.heartbeat({ id: 'node-a', startedAt, now: clock.now(), inFlight: 12, clockOffsetMs: -30_010 });
          // Its clock was corrected backwards by a few ms: the time stays, the figures are the new ones.
          await store.heartbeat({ id: 'node-a', startedAt, now: clock.now() - 3, inFlight: 3, clockOffsetMs: -30_013 });
          expect(await store.listNodes(0)).to.deep.equal([
            { id: 'node-a', startedAt, seenAt: clock.now(), inFlight: 3, clockOffsetMs: -30_013 },
            { id: 'node-b', startedAt, seenAt: startedAt, inFlight: 0, clockOffsetMs: 4 },
          ]);
        });
      });

      context('when asked for its own time', () => {
        it('answers its clock in epoch ms, or undefined when it has none apart from this host\'s', async () => {
          const before = Date.now();
          const time = await store.serverTime();
          const after = Date.now();
          if (time === undefined) return;
          // The server of the specs runs on this machine: its clock is this one, to within the read.
          expect(time).to.be.within(before - SECOND, after + SECOND);
        });
      });
    });

    describe('leases', () => {
      context('when slots are free', () => {
        it('takes them at epoch 1 until now + leaseMs', async () => {
          const leases = await lease('node-a', [0, 1]);
          expect(leases).to.deep.equal([
            { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
            { slot: 1, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
          ]);
          expect(await store.listLeases()).to.deep.equal(leases);
        });
      });

      context('when the owner renews before expiry', () => {
        it('extends the lease and keeps the epoch', async () => {
          await lease('node-a', [0]);
          clock.advance(10 * SECOND);
          expect(await lease('node-a', [0])).to.deep.equal([
            { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
          ]);
        });
      });

      context('when another owner holds a live lease', () => {
        it('does not take it, and returns only the slots it holds', async () => {
          await lease('node-a', [0, 1]);
          clock.advance(10 * SECOND);
          const got = await lease('node-b', [1, 2]);
          expect(got).to.deep.equal([{ slot: 2, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 1 }]);
          const slot1 = (await store.listLeases()).find((l) => l.slot === 1);
          expect(slot1?.owner).to.equal('node-a');
        });
      });

      context('when a lease has expired', () => {
        it('lets another owner take it with the next epoch (until = now counts as expired)', async () => {
          await lease('node-a', [0]);
          clock.advance(LEASE_MS);
          expect(await lease('node-b', [0])).to.deep.equal([
            { slot: 0, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 2 },
          ]);
        });

        it('lets the same owner renew it at the same epoch when nobody took it meanwhile', async () => {
          // Nobody else claimed in the slot, so the owner's claims are still the only ones: no fencing needed.
          await lease('node-a', [0]);
          clock.advance(LEASE_MS + SECOND);
          expect(await lease('node-a', [0])).to.deep.equal([
            { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
          ]);
        });

        it('gives it back to its earlier owner only after the taker\'s lease ends, at the epoch after the taker\'s', async () => {
          await lease('node-a', [0]);
          clock.advance(LEASE_MS);
          await lease('node-b', [0]);
          expect(await lease('node-a', [0]), 'no renewal of a lease someone else took').to.deep.equal([]);
          clock.advance(LEASE_MS);
          expect(await lease('node-a', [0])).to.deep.equal([
            { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 3 },
          ]);
        });
      });

      context('when released', () => {
        it('frees the slots at once; the next taker gets the next epoch', async () => {
          await lease('node-a', [0, 1]);
          await store.releaseLeases('node-a', [0]);
          expect((await store.listLeases()).map((l) => l.slot)).to.deep.equal([1]);
          expect(await lease('node-b', [0])).to.deep.equal([
            { slot: 0, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 2 },
          ]);
        });

        it('gives the next epoch to its last owner too when it takes the slot again', async () => {
          await lease('node-a', [0]);
          await store.releaseLeases('node-a', [0]);
          expect(await lease('node-a', [0])).to.deep.equal([
            { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 2 },
          ]);
        });

        it('does not release another owner\'s lease', async () => {
          await lease('node-a', [0]);
          await store.releaseLeases('node-b', [0]);
          expect((await store.listLeases())[0]?.owner).to.equal('node-a');
        });
      });
    });

    describe('slot weights', () => {
      context('when deliveries are open in some slots', () => {
        it('counts per slot those pending and due or in flight, leaving out the rest and the empty slots', async () => {
          const one = endpointIdInSlot(1);
          const two = endpointIdInSlot(2);
          const three = endpointIdInSlot(3);
          for (const id of [one, two, three]) await addEndpoint(id);
          await seed([one]);
          await seed([one]);
          const { deliveryIds } = await seed([two]);
          await seed([two], { dueAt: clock.now() + MINUTE });
          await seed([three]);
          await lease('node-a', [2, 3]);
          const jobs = await claim();
          expect(jobs.map((j) => j.delivery.endpointId).sort()).to.deep.equal([two, three].sort());
          const done = jobs.find((j) => j.delivery.endpointId === three)!.delivery;
          await store.settle([{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }], clock.now());
          expect(jobs.find((j) => j.delivery.id === deliveryIds[0])).to.not.equal(undefined);
          // Slot 1: two pending and due; slot 2: one in flight (the other not due yet); slot 3: delivered.
          expect(await store.countOpenBySlot(clock.now())).to.deep.equal([
            { slot: 1, open: 2 },
            { slot: 2, open: 1 },
          ]);
          expect(await store.countOpenBySlot(clock.now() + MINUTE)).to.deep.equal([
            { slot: 1, open: 2 },
            { slot: 2, open: 2 },
          ]);
        });
      });

      context('when weights are stored', () => {
        it('has none before the first, then answers the last written', async () => {
          expect(await store.getSlotWeights()).to.equal(undefined);
          const first = { weights: allSlots.map((slot) => (slot % 5 === 0 ? 3 : 0)), by: 'node-a', at: clock.now() };
          await store.putSlotWeights(first);
          expect(await store.getSlotWeights()).to.deep.equal(first);
          const second = { weights: allSlots.map(() => 1), by: 'node-b', at: clock.now() + SECOND };
          await store.putSlotWeights(second);
          expect(await store.getSlotWeights()).to.deep.equal(second);
        });
      });
    });

    describe('claimDue', () => {
      context('when the owner holds no lease', () => {
        it('claims nothing', async () => {
          await addEndpoint('ep_1');
          await seed(['ep_1']);
          expect(await claim()).to.deep.equal([]);
          await lease('node-b');
          expect(await claim()).to.deep.equal([]);
        });
      });

      context('when the owner\'s lease has expired', () => {
        it('claims nothing', async () => {
          await addEndpoint('ep_1');
          await seed(['ep_1']);
          await lease();
          clock.advance(LEASE_MS);
          expect(await claim()).to.deep.equal([]);
        });
      });

      context('when the owner leases only some slots', () => {
        it('claims only deliveries in those slots', async () => {
          const mine = endpointIdInSlot(1);
          const theirs = endpointIdInSlot(2);
          await addEndpoint(mine);
          await addEndpoint(theirs);
          await seed([mine, theirs]);
          await lease('node-a', [1]);
          const jobs = await claim();
          expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal([mine]);
        });
      });

      context('when deliveries are due', () => {
        it('marks them in flight at the slot\'s epoch and returns them with their events', async () => {
          await addEndpoint('ep_1');
          const { event, deliveryIds } = await seed(['ep_1']);
          clock.advance(SECOND);
          const [held] = await lease('node-a', [slotOf('ep_1', SLOTS)]);
          const jobs = await claim();
          expect(jobs).to.have.length(1);
          expect(jobs[0]!.event).to.deep.equal(event);
          expect(jobs[0]!.delivery).to.include({
            id: deliveryIds[0],
            status: 'in_flight',
            leaseEpoch: held!.epoch,
            attempts: 0,
            updatedAt: clock.now(),
          });
          expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(jobs[0]!.delivery);
        });

        it('does not claim them again while the claim stands', async () => {
          await addEndpoint('ep_1');
          await seed(['ep_1']);
          await lease();
          expect(await claim()).to.have.length(1);
          expect(await claim()).to.deep.equal([]);
        });

        it('claims at most `limit`, earliest due first', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const late = await seed(['ep_1'], { dueAt: clock.now() - SECOND });
          const early = await seed(['ep_2'], { dueAt: clock.now() - HOUR });
          const middle = await seed(['ep_1'], { dueAt: clock.now() - MINUTE });
          await lease();
          const jobs = await claim({ limit: 2 });
          expect(jobs.map((j) => j.delivery.id)).to.deep.equal([early.deliveryIds[0], middle.deliveryIds[0]]);
          expect((await claim()).map((j) => j.delivery.id)).to.deep.equal(late.deliveryIds);
        });
      });

      context('when a delivery is not yet due', () => {
        it('claims it only once its time has come', async () => {
          await addEndpoint('ep_1');
          await seed(['ep_1'], { dueAt: clock.now() + MINUTE });
          await lease('node-a', allSlots, HOUR);
          expect(await claim()).to.deep.equal([]);
          clock.advance(MINUTE);
          expect(await claim()).to.have.length(1);
        });
      });

      context('when one endpoint has a large backlog', () => {
        it('caps each endpoint at perEndpointLimit so the others are in the first claim', async () => {
          await addEndpoint('ep_a');
          await addEndpoint('ep_b');
          for (let i = 0; i < 50; i++) await seed(['ep_a'], { dueAt: clock.now() - HOUR + i });
          await seed(['ep_b'], { dueAt: clock.now() });
          await lease();
          const jobs = await claim({ limit: 10, perEndpointLimit: 5 });
          const perEndpoint = (id: string) => jobs.filter((j) => j.delivery.endpointId === id).length;
          expect(perEndpoint('ep_a')).to.equal(5);
          expect(perEndpoint('ep_b')).to.equal(1);
          // The backlog's earliest go first.
          const aDue = jobs.filter((j) => j.delivery.endpointId === 'ep_a').map((j) => j.delivery.nextAttemptAt);
          expect(aDue).to.deep.equal([0, 1, 2, 3, 4].map((i) => clock.now() - HOUR + i));
        });
      });

      context('when endpoints are skipped, chosen or disabled', () => {
        it('leaves the skipped endpoints\' deliveries pending', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          await seed(['ep_1', 'ep_2']);
          await lease();
          const jobs = await claim({ skipEndpointIds: ['ep_1'] });
          expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal(['ep_2']);
        });

        it('claims for one endpoint only when endpointId is given', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          await seed(['ep_1', 'ep_2']);
          await lease();
          const jobs = await claim({ endpointId: 'ep_2' });
          expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal(['ep_2']);
        });

        it('does not claim for a disabled endpoint until it is enabled again', async () => {
          await addEndpoint('ep_1', 'acme', { status: 'disabled', disabledReason: 'operator' });
          await seed(['ep_1']);
          await lease();
          expect(await claim()).to.deep.equal([]);
          await store.updateEndpoint('ep_1', { status: 'enabled', disabledReason: null }, clock.now());
          expect(await claim()).to.have.length(1);
        });
      });
    });

    describe('claimForEndpoints', () => {
      async function claimFor(endpoints: ReadonlyArray<{ endpointId: string; limit: number }>, owner = 'node-a') {
        return store.claimForEndpoints({ owner, now: clock.now(), endpoints });
      }

      context('when the named endpoints have due deliveries', () => {
        it('claims each one\'s earliest up to its own limit, at the slot\'s epoch, earliest due first, with events', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          await addEndpoint('ep_3');
          const ones = [];
          for (let i = 0; i < 5; i++) ones.push(await seed(['ep_1'], { dueAt: clock.now() - MINUTE + i }));
          const two = await seed(['ep_2'], { dueAt: clock.now() - HOUR });
          await seed(['ep_3']);
          const leases = await lease();
          const jobs = await claimFor([{ endpointId: 'ep_1', limit: 3 }, { endpointId: 'ep_2', limit: 3 }]);
          expect(jobs.map((j) => j.delivery.id)).to.deep.equal([
            two.deliveryIds[0],
            ...ones.slice(0, 3).map((o) => o.deliveryIds[0]),
          ]);
          expect(jobs[0]!.event).to.deep.equal(two.event);
          const epochOf = (endpointId: string) => leases.find((l) => l.slot === slotOf(endpointId, SLOTS))!.epoch;
          for (const job of jobs) {
            expect(job.delivery).to.include({ status: 'in_flight', leaseEpoch: epochOf(job.delivery.endpointId), updatedAt: clock.now() });
          }
          // ep_3 was not named; what was claimed is not claimed again.
          expect((await claimFor([{ endpointId: 'ep_1', limit: 10 }])).map((j) => j.delivery.id)).to.deep.equal(
            ones.slice(3).map((o) => o.deliveryIds[0]),
          );
          expect((await claim()).map((j) => j.delivery.endpointId)).to.deep.equal(['ep_3']);
        });
      });

      context('when an endpoint is not claimable', () => {
        it('claims nothing for a slot the owner does not hold, a disabled endpoint, work not yet due, or a limit of 0', async () => {
          const mine = endpointIdInSlot(1);
          const theirs = endpointIdInSlot(2);
          const off = endpointIdInSlot(3, 'off');
          const later = endpointIdInSlot(4, 'later');
          await addEndpoint(mine);
          await addEndpoint(theirs);
          await addEndpoint(off, 'acme', { status: 'disabled', disabledReason: 'operator' });
          await addEndpoint(later);
          await seed([mine, theirs, off]);
          await seed([later], { dueAt: clock.now() + MINUTE });
          await lease('node-a', [1, 3, 4]);
          const none = await claimFor([
            { endpointId: theirs, limit: 5 },
            { endpointId: off, limit: 5 },
            { endpointId: later, limit: 5 },
            { endpointId: mine, limit: 0 },
          ]);
          expect(none).to.deep.equal([]);
          expect((await claimFor([{ endpointId: mine, limit: 5 }])).map((j) => j.delivery.endpointId)).to.deep.equal([mine]);
        });
      });

      context('when the slot changed owner while a delivery was in flight', () => {
        it('leaves the orphan to claimDue, which claims it at the new epoch', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          clock.advance(LEASE_MS + SECOND);
          await lease('node-b');
          expect(await claimFor([{ endpointId: 'ep_1', limit: 5 }], 'node-b')).to.deep.equal([]);
          const jobs = await claim({ owner: 'node-b' });
          expect(jobs.map((j) => j.delivery.id)).to.deep.equal([delivery.id]);
          expect(jobs[0]!.delivery).to.include({ status: 'in_flight', leaseEpoch: 2 });
        });

        it('says the orphan was taken over (resumed), and a fresh claim beside it was not', async () => {
          await addEndpoint('ep_1');
          const { delivery: orphan } = await claimedDelivery('ep_1');
          const { deliveryIds: [fresh] } = await seed(['ep_1']);
          clock.advance(LEASE_MS + SECOND);
          await lease('node-b');
          const jobs = await claim({ owner: 'node-b' });
          expect(jobs.map((j) => [j.delivery.id, j.resumed ?? false]).sort()).to.deep.equal([[orphan.id, true], [fresh!, false]].sort());
          // Claimed again after a give-back, it is a fresh claim.
          const taken = jobs.find((j) => j.delivery.id === orphan.id)!;
          await store.settle([{ kind: 'release', deliveryId: orphan.id, epoch: taken.delivery.leaseEpoch, nextAttemptAt: clock.now() }], clock.now());
          const again = await claim({ owner: 'node-b' });
          expect(again.map((j) => [j.delivery.id, j.resumed ?? false])).to.deep.equal([[orphan.id, false]]);
        });
      });
    });

    describe('settle', () => {
      context('when an attempt succeeds', () => {
        it('marks the delivery delivered, records the attempt and clears failingSince', async () => {
          await addEndpoint('ep_1', 'acme', { failingSince: clock.now() - DAY });
          const { delivery } = await claimedDelivery('ep_1');
          const startedAt = clock.now();
          clock.advance(SECOND);
          const result = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(startedAt, OK, null) }],
            clock.now(),
          );
          expect(result).to.deep.equal({ applied: [delivery.id], fenced: [] });
          const stored = await store.getDelivery(delivery.id);
          expect(stored).to.include({ status: 'delivered', attempts: 1, deliveredAt: clock.now(), updatedAt: clock.now() });
          expect(await store.listAttempts(delivery.id)).to.deep.equal([
            { deliveryId: delivery.id, number: 1, round: 0, startedAt, durationMs: 120, outcome: OK, error: null },
          ]);
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
        });
      });

      context('when an attempt fails and will be retried', () => {
        it('puts the delivery back to pending at the next time, records the attempt and the failure start', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          const firstFailure = clock.now();
          const next = clock.now() + 30 * SECOND;
          await store.settle(
            [{ kind: 'retry', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(firstFailure, BUSY, 'HTTP 503'), nextAttemptAt: next }],
            clock.now(),
          );
          expect(await store.getDelivery(delivery.id)).to.include({
            status: 'pending',
            attempts: 1,
            nextAttemptAt: next,
            lastError: 'HTTP 503',
            deliveredAt: null,
          });
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(firstFailure);

          // A second failure keeps the start of the run of failures.
          clock.advanceTo(next);
          await lease();
          const [job] = await claim();
          await store.settle(
            [{ kind: 'retry', deliveryId: delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), TIMEOUT, 'timeout after 10 s', 2), nextAttemptAt: clock.now() + MINUTE }],
            clock.now(),
          );
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(firstFailure);
          const attempts = await store.listAttempts(delivery.id);
          expect(attempts.map((a) => [a.number, a.round, a.error])).to.deep.equal([
            [1, 0, 'HTTP 503'],
            [2, 0, 'timeout after 10 s'],
          ]);
          expect(attempts[1]!.outcome).to.deep.equal(TIMEOUT);

          // Success ends the run.
          clock.advance(MINUTE);
          await lease();
          const [again] = await claim();
          await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: again!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null, 3) }],
            clock.now(),
          );
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
          expect(await store.getDelivery(delivery.id)).to.include({ status: 'delivered', attempts: 3 });
        });
      });

      context('when an attempt fails for good', () => {
        it('marks the delivery dead and writes a dead letter with payload, attempts, last outcome and reason', async () => {
          await addEndpoint('ep_1');
          const { delivery, event } = await claimedDelivery('ep_1');
          const first = clock.now();
          await store.settle(
            [{ kind: 'retry', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(first, BUSY, 'HTTP 503'), nextAttemptAt: first + MINUTE }],
            clock.now(),
          );
          clock.advance(MINUTE);
          await lease();
          const [job] = await claim();
          const gone: Outcome = { kind: 'response', status: 410, location: null, retryAfter: null, body: 'gone' };
          const second = clock.now();
          clock.advance(SECOND);
          const result = await store.settle(
            [{ kind: 'dead', deliveryId: delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(second, gone, 'HTTP 410', 2), deadLetterId: 'dl_1', reason: 'permanent: HTTP 410' }],
            clock.now(),
          );
          expect(result.applied).to.deep.equal([delivery.id]);
          expect(await store.getDelivery(delivery.id)).to.include({ status: 'dead', attempts: 2, lastError: 'HTTP 410' });
          expect(await store.getDeadLetter('dl_1')).to.deep.equal({
            id: 'dl_1',
            deliveryId: delivery.id,
            eventId: event.id,
            endpointId: 'ep_1',
            tenantId: 'acme',
            eventType: 'invoice.paid',
            payload: event.payload,
            reason: 'permanent: HTTP 410',
            lastOutcome: gone,
            attempts: [
              { deliveryId: delivery.id, number: 1, round: 0, startedAt: first, durationMs: 120, outcome: BUSY, error: 'HTTP 503' },
              { deliveryId: delivery.id, number: 2, round: 0, startedAt: second, durationMs: 120, outcome: gone, error: 'HTTP 410' },
            ],
            createdAt: clock.now(),
            replayedAt: null,
            triage: { state: 'new', note: null, by: null, at: clock.now() },
          });
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(first);
          expect(await store.getDeadLetter('dl_missing')).to.equal(undefined);
        });
      });

      context('when a claim is released', () => {
        it('puts the delivery back to pending without spending an attempt', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          const later = clock.now() + MINUTE;
          const result = await store.settle(
            [{ kind: 'release', deliveryId: delivery.id, epoch: delivery.leaseEpoch, nextAttemptAt: later }],
            clock.now(),
          );
          expect(result.applied).to.deep.equal([delivery.id]);
          expect(await store.getDelivery(delivery.id)).to.include({ status: 'pending', attempts: 0, nextAttemptAt: later });
          expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
          expect(await claim()).to.deep.equal([]);
          clock.advance(MINUTE);
          await lease();
          expect(await claim()).to.have.length(1);
        });
      });

      context('when a batch mixes current and stale claims', () => {
        it('applies the current ones and reports the others as fenced', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const { delivery: claimed } = await claimedDelivery('ep_1');
          const { deliveryIds: [pendingId] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
          const result = await store.settle(
            [
              { kind: 'delivered', deliveryId: claimed.id, epoch: claimed.leaseEpoch, attempt: attempt(clock.now(), OK, null) },
              { kind: 'delivered', deliveryId: pendingId!, epoch: 1, attempt: attempt(clock.now(), OK, null) },
              { kind: 'delivered', deliveryId: claimed.id, epoch: claimed.leaseEpoch, attempt: attempt(clock.now(), OK, null) },
            ],
            clock.now(),
          );
          expect(result).to.deep.equal({ applied: [claimed.id], fenced: [pendingId, claimed.id] });
          expect(await store.listAttempts(claimed.id)).to.have.length(1);
          expect(await store.listAttempts(pendingId!)).to.deep.equal([]);
          expect((await store.getDelivery(pendingId!))?.status).to.equal('pending');
        });
      });

      context('when the owner renewed its lease in time', () => {
        it('still applies its settlements', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          clock.advance(LEASE_MS / 2);
          await lease();
          const result = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(result.applied).to.deep.equal([delivery.id]);
        });
      });

      context('when the claimer\'s lease lapsed and nobody took the slot', () => {
        it('still applies its settlement: the claim\'s epoch is still the slot\'s', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          clock.advance(LEASE_MS + SECOND);
          const result = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(result).to.deep.equal({ applied: [delivery.id], fenced: [] });
        });
      });

      context('when the claimer released the slot and took it again', () => {
        it('fences the claim of the earlier epoch, which a claim at the new epoch takes again', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          await store.releaseLeases('node-a', [delivery.slot]);
          expect((await lease('node-a', [delivery.slot]))[0]?.epoch).to.equal(delivery.leaseEpoch + 1);
          const stale = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(stale).to.deep.equal({ applied: [], fenced: [delivery.id] });
          expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
          const jobs = await claim();
          expect(jobs.map((j) => [j.delivery.id, j.delivery.leaseEpoch])).to.deep.equal([[delivery.id, delivery.leaseEpoch + 1]]);
        });
      });

      context('when another owner took the slot after the lease expired', () => {
        it('fences the old claimer\'s settlement and writes nothing', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          clock.advance(LEASE_MS + SECOND);
          await lease('node-b');
          const before = await store.getDelivery(delivery.id);
          const result = await store.settle(
            [
              { kind: 'dead', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_x', reason: 'exhausted' },
            ],
            clock.now(),
          );
          expect(result).to.deep.equal({ applied: [], fenced: [delivery.id] });
          expect(await store.getDelivery(delivery.id)).to.deep.equal(before);
          expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
          expect(await store.getDeadLetter('dl_x')).to.equal(undefined);
          expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
        });
      });

      context('when a claimer crashes with deliveries in flight', () => {
        it('lets the next owner of the slot claim them again at the new epoch, and fences the old claim', async () => {
          await addEndpoint('ep_1');
          const { delivery } = await claimedDelivery('ep_1');
          expect(delivery.leaseEpoch).to.equal(1);
          clock.advance(LEASE_MS + SECOND);
          const leases = await lease('node-b');
          expect(leases.find((l) => l.slot === delivery.slot)?.epoch).to.equal(2);
          const jobs = await claim({ owner: 'node-b' });
          expect(jobs.map((j) => j.delivery.id)).to.deep.equal([delivery.id]);
          expect(jobs[0]!.delivery).to.include({ status: 'in_flight', leaseEpoch: 2, attempts: 0 });

          const stale = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: 1, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(stale.fenced).to.deep.equal([delivery.id]);
          const fresh = await store.settle(
            [{ kind: 'delivered', deliveryId: delivery.id, epoch: 2, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          expect(fresh.applied).to.deep.equal([delivery.id]);
          expect(await store.listAttempts(delivery.id)).to.have.length(1);
        });
      });
    });

    describe('FIFO endpoints', () => {
      const ids = (jobs: readonly { delivery: { id: string } }[]) => jobs.map((j) => j.delivery.id);
      /** Seeds `keys.length` events to `endpointId`, one per key (null: the default line), due in that order. */
      async function line(endpointId: string, keys: ReadonlyArray<string | null>): Promise<string[]> {
        const out: string[] = [];
        for (const key of keys) {
          clock.advance(1);
          out.push((await seed([endpointId], key === null ? {} : { orderingKey: key })).deliveryIds[0]!);
        }
        return out;
      }
      async function settleAs(kind: 'delivered' | 'dead', job: { delivery: { id: string; leaseEpoch: number } }) {
        const base = { deliveryId: job.delivery.id, epoch: job.delivery.leaseEpoch };
        const settlement = kind === 'delivered'
          ? { kind, ...base, attempt: attempt(clock.now(), OK, null) }
          : { kind, ...base, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: `dl_${job.delivery.id}`, reason: 'exhausted' };
        expect((await store.settle([settlement], clock.now())).applied).to.deep.equal([job.delivery.id]);
      }

      context('when a FIFO endpoint has several lines', () => {
        it('claims only the head of each line (by claimDue and by claimForEndpoints), and all of an endpoint without ordering', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          await addEndpoint('ep_any');
          const [a1, b1, a2, n1, b2, n2] = await line('ep_fifo', ['a', 'b', 'a', null, 'b', null]);
          const any = await line('ep_any', ['a', 'a', 'a']);
          await lease();
          const viaEndpoints = await store.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_fifo', limit: 10 }] });
          expect(ids(viaEndpoints)).to.deep.equal([a1, b1, n1]);
          expect(ids(await claim())).to.deep.equal(any);
          // Heads in flight hold their lines: nothing more, either way.
          expect(await claim({ endpointId: 'ep_fifo' })).to.deep.equal([]);
          expect(await store.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_fifo', limit: 10 }] })).to.deep.equal([]);
          expect([a2, b2, n2]).to.have.length(3);
        });

        it('never hands out two of one line in one claim', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          const [first] = await line('ep_fifo', ['k', 'k', 'k', 'k']);
          await lease();
          expect(ids(await claim({ perEndpointLimit: 10 }))).to.deep.equal([first]);
        });
      });

      context('when the head of a line settles', () => {
        it('holds the line while the head waits for a retry, then claims the next after it is delivered, or dead', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          const [d1, d2, d3] = await line('ep_fifo', ['k', 'k', 'k']);
          await lease();
          const [job1] = await claim();
          expect(job1?.delivery.id).to.equal(d1);
          await store.settle(
            [{ kind: 'retry', deliveryId: d1!, epoch: job1!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), nextAttemptAt: clock.now() + MINUTE }],
            clock.now(),
          );
          // The head is pending, not due: the line waits behind it.
          expect(await claim()).to.deep.equal([]);
          clock.advance(MINUTE);
          await lease();
          const [again] = await claim();
          expect(again?.delivery.id).to.equal(d1);
          await settleAs('delivered', again!);
          const [job2] = await claim();
          expect(job2?.delivery.id).to.equal(d2);
          await settleAs('dead', job2!);
          expect(ids(await claim())).to.deep.equal([d3]);
        });

        it('keeps a released head the head (breaker open, pause, shutdown)', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          const [d1] = await line('ep_fifo', ['k', 'k']);
          await lease();
          const [job] = await claim();
          await store.settle([{ kind: 'release', deliveryId: d1!, epoch: job!.delivery.leaseEpoch, nextAttemptAt: clock.now() + SECOND }], clock.now());
          expect(await claim()).to.deep.equal([]);
          clock.advance(SECOND);
          expect(ids(await claim())).to.deep.equal([d1]);
        });
      });

      context('when the slot changes owner while a head is in flight', () => {
        it('lets the next owner claim the orphaned head again, and only it', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          const [d1] = await line('ep_fifo', ['k', 'k', 'k']);
          await lease();
          expect(ids(await claim())).to.deep.equal([d1]);
          clock.advance(LEASE_MS + SECOND);
          await lease('node-b');
          expect(ids(await claim({ owner: 'node-b' }))).to.deep.equal([d1]);
          expect(await claim({ owner: 'node-b' })).to.deep.equal([]);
        });
      });

      context('when fan-out claims deliveries as it creates them', () => {
        it('inserts in flight at most the head of a line; the others of the line go in pending', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          await lease();
          const events = ['evt_f1', 'evt_f2'].map((id) => makeEvent(id, 'acme', clock.now(), { orderingKey: 'k' }));
          await store.appendEvents(events);
          const fanOuts = events.map((event) => ({ eventId: event.id, deliveries: plan(event, ['ep_fifo'], clock.now()) }));
          const [first, second] = fanOuts.map((f) => f.deliveries[0]!.id);
          const claimed = await store.recordFanOuts(fanOuts, clock.now(), { owner: 'node-a', deliveryIds: new Set([first!, second!]) });
          // A store may also leave the head pending, for the claim to decide (PostgreSQL does).
          expect(claimed.map((d) => d.id)).to.satisfy((got: string[]) => got.length === 0 || (got.length === 1 && got[0] === first));
          expect(await store.getDelivery(second!)).to.include({ status: 'pending' });
          const heads = claimed.length === 0 ? ids(await claim()) : [];
          expect([...ids(claimed.map((delivery) => ({ delivery }))), ...heads]).to.deep.equal([first]);

          // A later event of a line with an open delivery never goes in flight.
          const third = makeEvent('evt_f3', 'acme', clock.now(), { orderingKey: 'k' });
          await store.appendEvents([third]);
          const deliveries = plan(third, ['ep_fifo'], clock.now());
          expect(await store.recordFanOuts([{ eventId: third.id, deliveries }], clock.now(), { owner: 'node-a', deliveryIds: new Set([deliveries[0]!.id]) })).to.deep.equal([]);
          expect(await store.getDelivery(deliveries[0]!.id)).to.include({ status: 'pending' });
        });
      });

      context('when a dead letter of a line is replayed', () => {
        it('re-enters its line at its own sequence: it goes before the later ones still pending', async () => {
          await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
          const [d1, d2, d3] = await line('ep_fifo', ['k', 'k', 'k']);
          await lease();
          await settleAs('dead', (await claim())[0]!);
          const [job2] = await claim();
          expect(job2?.delivery.id).to.equal(d2);
          await settleAs('delivered', job2!);
          expect(await store.replayDeadLetters({ ids: [`dl_${d1}`] }, clock.now())).to.have.length(1);
          expect(ids(await claim())).to.deep.equal([d1]);
          expect(d3).to.be.a('string');
        });
      });

      context('when an endpoint is switched to FIFO and back', () => {
        it('stores the ordering and claims accordingly', async () => {
          await addEndpoint('ep_1');
          const [d1, d2] = await line('ep_1', ['k', 'k']);
          expect((await store.updateEndpoint('ep_1', { ordering: 'fifo' }, clock.now()))?.ordering).to.equal('fifo');
          expect((await store.getEndpoint('ep_1'))?.ordering).to.equal('fifo');
          await lease();
          expect(ids(await claim())).to.deep.equal([d1]);
          await store.updateEndpoint('ep_1', { ordering: 'none' }, clock.now());
          expect(ids(await claim())).to.deep.equal([d2]);
        });
      });
    });

    describe('replay jobs', () => {
      function job(id: string, overrides: Partial<ReplayJobRecord> = {}): ReplayJobRecord {
        return {
          id,
          filter: { endpointId: 'ep_1', until: clock.now() + 1 },
          state: 'running',
          total: 10,
          replayed: 0,
          waiting: 0,
          cursor: null,
          chunkSize: 100,
          createdAt: clock.now(),
          finishedAt: null,
          error: null,
          owner: 'node-a',
          leaseUntil: clock.now() + LEASE_MS,
          ...overrides,
        };
      }

      it('keeps a job as written and lists the newest first; a second with the same id is a conflict', async () => {
        const first = job('rpl_1');
        await store.createReplayJob(first);
        clock.advance(SECOND);
        await store.createReplayJob(job('rpl_2', { filter: { tenantId: 'acme', since: 5 }, owner: null, leaseUntil: 0 }));
        expect(await store.getReplayJob('rpl_1')).to.deep.equal(first);
        expect(await store.getReplayJob('rpl_missing')).to.equal(undefined);
        expect((await store.listReplayJobs(10)).map((j) => j.id)).to.deep.equal(['rpl_2', 'rpl_1']);
        expect((await store.listReplayJobs(1)).map((j) => j.id)).to.deep.equal(['rpl_2']);
        expect((await store.getReplayJob('rpl_2'))?.filter).to.deep.equal({ tenantId: 'acme', since: 5 });
        expect((await rejection(store.createReplayJob(first))).code).to.equal(ErrorCode.CONFLICT);
      });

      it('leases running jobs to one node at a time: its own renewed, free or lapsed ones taken, finished ones never', async () => {
        await store.createReplayJob(job('rpl_a', { owner: 'node-a' }));
        await store.createReplayJob(job('rpl_free', { owner: null, leaseUntil: 0 }));
        await store.createReplayJob(job('rpl_done', { owner: null, leaseUntil: 0, state: 'done', finishedAt: clock.now() }));
        const now = clock.now();
        expect((await store.leaseReplayJobs('node-b', now, now + LEASE_MS)).map((j) => j.id), 'b takes the free one only').to.deep.equal(['rpl_free']);
        const renewed = await store.leaseReplayJobs('node-a', now, now + 2 * LEASE_MS);
        expect(renewed.map((j) => [j.id, j.owner, j.leaseUntil])).to.deep.equal([['rpl_a', 'node-a', now + 2 * LEASE_MS]]);
        // node-a stops renewing (it crashed): once its lease ends, node-b takes its job.
        clock.advance(2 * LEASE_MS);
        const later = clock.now();
        expect((await store.leaseReplayJobs('node-b', later, later + LEASE_MS)).map((j) => j.id)).to.deep.equal(['rpl_a', 'rpl_free']);
        expect(await store.leaseReplayJobs('node-a', later, later + LEASE_MS)).to.deep.equal([]);
        expect(await store.saveReplayJobProgress('rpl_a', 'node-a', { cursor: 'dl_9', replayed: 9, waiting: 1 }), 'a lost it').to.equal(false);
        expect(await store.saveReplayJobProgress('rpl_a', 'node-b', { cursor: 'dl_3', replayed: 3, waiting: 2 })).to.equal(true);
        expect(await store.getReplayJob('rpl_a')).to.include({ cursor: 'dl_3', replayed: 3, waiting: 2, owner: 'node-b' });

        // A node closing gives its jobs back: any node takes them at once.
        await store.releaseReplayJobs('node-b');
        expect(await store.getReplayJob('rpl_a')).to.include({ owner: null, leaseUntil: 0, state: 'running' });
        expect((await store.leaseReplayJobs('node-a', later, later + LEASE_MS)).map((j) => j.id)).to.deep.equal(['rpl_a', 'rpl_free']);
      });

      it('ends a running job once: by its owner, or cancelled by any node; a finished job takes no more writes', async () => {
        await store.createReplayJob(job('rpl_1'));
        await store.createReplayJob(job('rpl_2'));
        const at = clock.now();
        expect(await store.endReplayJob('rpl_1', 'node-b', { state: 'done', finishedAt: at, error: null }), 'not its owner').to.equal(undefined);
        expect(await store.endReplayJob('rpl_1', null, { state: 'cancelled', finishedAt: at, error: null })).to.include({
          id: 'rpl_1',
          state: 'cancelled',
          finishedAt: at,
          owner: null,
        });
        expect(await store.endReplayJob('rpl_1', 'node-a', { state: 'done', finishedAt: at, error: null }), 'ended already').to.equal(undefined);
        expect(await store.saveReplayJobProgress('rpl_1', 'node-a', { cursor: 'dl_1', replayed: 1, waiting: 0 })).to.equal(false);
        expect(await store.leaseReplayJobs('node-a', at, at + LEASE_MS)).to.have.length(1);
        expect(await store.endReplayJob('rpl_2', 'node-a', { state: 'failed', finishedAt: at, error: 'store down' })).to.include({
          state: 'failed',
          error: 'store down',
        });
        expect((await store.getReplayJob('rpl_1'))?.state).to.equal('cancelled');
      });

      it('purge deletes the jobs that ended before the horizon, never a running one', async () => {
        await store.createReplayJob(job('rpl_old_done'));
        await store.createReplayJob(job('rpl_old_failed'));
        await store.createReplayJob(job('rpl_old_running'));
        await store.endReplayJob('rpl_old_done', 'node-a', { state: 'done', finishedAt: clock.now(), error: null });
        await store.endReplayJob('rpl_old_failed', 'node-a', { state: 'failed', finishedAt: clock.now(), error: 'store down' });
        clock.advance(20 * DAY);
        await store.createReplayJob(job('rpl_recent'));
        await store.endReplayJob('rpl_recent', null, { state: 'cancelled', finishedAt: clock.now(), error: null });
        clock.advance(20 * DAY);

        expect((await store.purge(clock.now() - 30 * DAY)).replayJobs).to.equal(2);
        expect((await store.listReplayJobs(10)).map((j) => j.id).sort()).to.deep.equal(['rpl_old_running', 'rpl_recent']);
      });
    });

    describe('dead letters and replay', () => {
      /** A dead delivery to `endpointId` at the current time; returns its ids. */
      async function deadDelivery(endpointId: string, deadLetterId: string, tenantId = 'acme') {
        const { deliveryIds: [deliveryId], event } = await seed([endpointId], { tenantId });
        await lease();
        const [job] = await claim({ endpointId });
        if (job === undefined || job.delivery.id !== deliveryId) throw new Error('not claimed');
        await store.settle(
          [{ kind: 'dead', deliveryId, epoch: job.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId, reason: 'exhausted' }],
          clock.now(),
        );
        return { deliveryId, event, deadLetterId };
      }

      context('when a dead letter is replayed by id', () => {
        it('puts its delivery back to pending, due now, in a new round, with the same event id', async () => {
          await addEndpoint('ep_1');
          const dead = await deadDelivery('ep_1', 'dl_1');
          clock.advance(HOUR);
          expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
          expect(await store.getDelivery(dead.deliveryId)).to.include({
            status: 'pending',
            attempts: 0,
            nextAttemptAt: clock.now(),
            lastError: null,
            eventId: dead.event.id,
          });
          expect((await store.getDeadLetter('dl_1'))?.replayedAt).to.equal(clock.now());

          await lease();
          const [job] = await claim();
          expect(job?.event.id).to.equal(dead.event.id);
          await store.settle(
            [{ kind: 'retry', deliveryId: dead.deliveryId, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), nextAttemptAt: clock.now() + MINUTE }],
            clock.now(),
          );
          const attempts = await store.listAttempts(dead.deliveryId);
          expect(attempts.map((a) => [a.round, a.number])).to.deep.equal([[0, 1], [1, 1]]);
        });

        it('replays nothing the second time', async () => {
          await addEndpoint('ep_1');
          await deadDelivery('ep_1', 'dl_1');
          expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
          expect(await store.replayDeadLetters({ ids: ['dl_1', 'dl_missing'] }, clock.now())).to.deep.equal([]);
        });
      });

      context('when dead letters are replayed by filter', () => {
        it('replays every unreplayed match of endpoint, tenant and time range', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'acme');
          await addEndpoint('ep_3', 'globex');
          const t0 = clock.now();
          await deadDelivery('ep_1', 'dl_1');
          clock.advance(HOUR);
          await deadDelivery('ep_2', 'dl_2');
          clock.advance(HOUR);
          await deadDelivery('ep_3', 'dl_3', 'globex');
          clock.advance(HOUR);
          await deadDelivery('ep_1', 'dl_4');

          const now = clock.now();
          expect(await store.replayDeadLetters({ endpointId: 'ep_1', until: t0 + HOUR }, now)).to.deep.equal(['dl_1']);
          expect((await store.replayDeadLetters({ tenantId: 'acme' }, now)).sort()).to.deep.equal(['dl_2', 'dl_4']);
          expect(await store.replayDeadLetters({ since: t0 + 2 * HOUR, until: t0 + 3 * HOUR }, now)).to.deep.equal(['dl_3']);
          expect(await store.replayDeadLetters({}, now)).to.deep.equal([]);
          expect((await store.countDeliveries()).pending).to.equal(4);
        });

        it('counts what a replay by the same filter would replay, changing nothing', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'acme');
          await addEndpoint('ep_gone', 'acme');
          const t0 = clock.now();
          await deadDelivery('ep_1', 'dl_1');
          clock.advance(HOUR);
          await deadDelivery('ep_1', 'dl_2');
          const thrown = await deadDelivery('ep_1', 'dl_discarded');
          await deadDelivery('ep_2', 'dl_3');
          await deadDelivery('ep_gone', 'dl_orphan');
          await store.triageDeadLetters({ ids: ['dl_discarded'], state: 'discarded', note: 'test event', by: 'bob' }, clock.now());
          expect(await store.deleteEndpoint('ep_gone', clock.now())).to.equal(true);

          expect(await store.countReplayableDeadLetters({ tenantId: 'acme' })).to.equal(3);
          expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1' })).to.equal(2);
          expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1', since: t0 + HOUR })).to.equal(1);
          expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1', state: 'discarded' })).to.equal(0);
          expect(await store.countReplayableDeadLetters({ endpointId: 'ep_gone' })).to.equal(0);
          expect((await store.countDeliveries()).pending).to.equal(0);
          expect((await store.getDelivery(thrown.deliveryId))?.status).to.equal('dead');

          expect((await store.replayDeadLetters({ tenantId: 'acme' }, clock.now())).length).to.equal(3);
          expect(await store.countReplayableDeadLetters({ tenantId: 'acme' })).to.equal(0);
        });

        it('pages the open matches oldest first after a dead-letter cursor, with their deliveries', async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          const deliveries = new Map<string, string>();
          for (let i = 0; i < 5; i++) deliveries.set(`dl_${i}`, (await deadDelivery('ep_1', `dl_${i}`)).deliveryId);
          clock.advance(MINUTE);
          await deadDelivery('ep_2', 'dl_other');
          await store.triageDeadLetters({ ids: ['dl_1'], state: 'discarded', note: 'test event', by: 'bob' }, clock.now());

          const first = await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, null, 2);
          expect(first).to.deep.equal([
            { id: 'dl_0', deliveryId: deliveries.get('dl_0'), endpointId: 'ep_1' },
            { id: 'dl_2', deliveryId: deliveries.get('dl_2'), endpointId: 'ep_1' },
          ]);
          await store.replayDeadLetters({ ids: ['dl_0', 'dl_2'] }, clock.now());
          expect((await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, 'dl_2', 10)).map((d) => d.id)).to.deep.equal(['dl_3', 'dl_4']);
          expect((await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, 'dl_4', 10))).to.deep.equal([]);
          expect((await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10)).map((d) => d.id)).to.deep.equal(['dl_3', 'dl_4', 'dl_other']);
          expect((await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10, ['ep_1'])).map((d) => d.id), 'ep_1 skipped').to.deep.equal([
            'dl_other',
          ]);
          expect(await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10, ['ep_1', 'ep_2'])).to.deep.equal([]);
        });

        it("counts each endpoint's replayed deliveries still pending or in flight, in one read", async () => {
          await addEndpoint('ep_1');
          await addEndpoint('ep_2');
          for (let i = 0; i < 3; i++) await deadDelivery('ep_1', `dl_a${i}`);
          await deadDelivery('ep_2', 'dl_b0');
          expect(await store.countLiveReplays(['ep_1', 'ep_2']), 'dead, not replayed: none live').to.deep.equal({});
          await store.replayDeadLetters({ ids: ['dl_a0', 'dl_a1', 'dl_b0'] }, clock.now());
          expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 2, 'ep_2': 1 });
          expect(await store.countLiveReplays(['ep_2'])).to.deep.equal({ 'ep_2': 1 });
          expect(await store.countLiveReplays([])).to.deep.equal({});
          // Claimed (in flight) still counts; delivered no longer does.
          const replayed = (await claim()).filter((job) => job.delivery.round > 0);
          expect(replayed.map((job) => job.delivery.endpointId).sort()).to.deep.equal(['ep_1', 'ep_1', 'ep_2']);
          expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 2, 'ep_2': 1 });
          const [first] = replayed.filter((job) => job.delivery.endpointId === 'ep_1');
          await store.settle([{ kind: 'delivered', deliveryId: first!.delivery.id, epoch: first!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }], clock.now());
          expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 1, 'ep_2': 1 });
        });

        it('replays all matches, ignoring limit', async () => {
          await addEndpoint('ep_1');
          for (let i = 0; i < 3; i++) await deadDelivery('ep_1', `dl_${i}`);
          expect((await store.replayDeadLetters({ endpointId: 'ep_1', limit: 1 }, clock.now())).sort()).to.deep.equal([
            'dl_0',
            'dl_1',
            'dl_2',
          ]);
        });
      });

      context('when listing dead letters', () => {
        it('lists newest first, filtered, hiding replayed ones unless asked', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'globex');
          const t0 = clock.now();
          await deadDelivery('ep_1', 'dl_1');
          clock.advance(MINUTE);
          await deadDelivery('ep_2', 'dl_2', 'globex');
          clock.advance(MINUTE);
          await deadDelivery('ep_1', 'dl_3');
          await store.replayDeadLetters({ ids: ['dl_3'] }, clock.now());

          const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) =>
            (await store.listDeadLetters(filter)).map((d) => d.id);
          expect(await ids({})).to.deep.equal(['dl_2', 'dl_1']);
          expect(await ids({ includeReplayed: true })).to.deep.equal(['dl_3', 'dl_2', 'dl_1']);
          expect(await ids({ endpointId: 'ep_1', includeReplayed: true })).to.deep.equal(['dl_3', 'dl_1']);
          expect(await ids({ tenantId: 'globex' })).to.deep.equal(['dl_2']);
          expect(await ids({ since: t0 + MINUTE })).to.deep.equal(['dl_2']);
          expect(await ids({ until: t0 + MINUTE })).to.deep.equal(['dl_1']);
          expect(await ids({ includeReplayed: true, limit: 2 })).to.deep.equal(['dl_3', 'dl_2']);
          const [listed] = await store.listDeadLetters({ tenantId: 'globex' });
          expect(listed).to.deep.equal(await store.getDeadLetter('dl_2'));
          expect(listed?.attempts).to.have.length(1);
        });
      });

      context('when listing dead letters page by page (after the last of a page)', () => {
        it('walks the listing in its order, ties the later inserted first, each dead letter once', async () => {
          await addEndpoint('ep_1');
          const t0 = clock.now();
          // Inserted e then c in one millisecond, a then d in the next: ids in neither order.
          await deadDelivery('ep_1', 'dl_e');
          await deadDelivery('ep_1', 'dl_c');
          clock.advance(MINUTE);
          await deadDelivery('ep_1', 'dl_a');
          await deadDelivery('ep_1', 'dl_d');
          clock.advance(MINUTE);
          await deadDelivery('ep_1', 'dl_b');

          const walked: string[][] = [];
          let after: { createdAt: number; id: string } | undefined;
          for (let page = 0; page < 5; page++) {
            const rows = await store.listDeadLetters({ endpointId: 'ep_1', limit: 2, ...(after === undefined ? {} : { after }) });
            if (rows.length === 0) break;
            walked.push(rows.map((d) => d.id));
            const last = rows.at(-1)!;
            after = { createdAt: last.createdAt, id: last.id };
          }
          expect(walked).to.deep.equal([['dl_b', 'dl_d'], ['dl_a', 'dl_c'], ['dl_e']]);
          const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) => (await store.listDeadLetters(filter)).map((d) => d.id);
          expect(await ids({ after: { createdAt: t0 + MINUTE, id: 'dl_d' } })).to.deep.equal(['dl_a', 'dl_c', 'dl_e']);
          expect(await ids({ after: { createdAt: t0 + MINUTE, id: 'dl_gone' } }), 'after one purged: the older ones').to.deep.equal(['dl_c', 'dl_e']);
          expect(await ids({ tenantId: 'globex', after: { createdAt: t0 + 2 * MINUTE, id: 'dl_b' } })).to.deep.equal([]);
        });
      });

      context('when operators triage dead letters', () => {
        const ack = (ids: string[], note = 'consumer fixed, replay tomorrow', by = 'alice') =>
          store.triageDeadLetters({ ids, state: 'acknowledged', note, by }, clock.now());
        const discard = (ids: string[], note = 'test event, never to be delivered', by = 'bob') =>
          store.triageDeadLetters({ ids, state: 'discarded', note, by }, clock.now());
        const triageOf = async (id: string) => (await store.getDeadLetter(id))?.triage;

        it('acknowledges and discards open ones with the note, who and when; a second acknowledgement replaces the note', async () => {
          await addEndpoint('ep_1');
          const born = clock.now();
          await deadDelivery('ep_1', 'dl_1');
          await deadDelivery('ep_1', 'dl_2');
          clock.advance(HOUR);
          expect(await ack(['dl_1', 'dl_1'])).to.deep.equal({ applied: ['dl_1'], skipped: [] });
          expect(await triageOf('dl_1')).to.deep.equal({ state: 'acknowledged', note: 'consumer fixed, replay tomorrow', by: 'alice', at: born + HOUR });
          expect(await triageOf('dl_2')).to.deep.equal({ state: 'new', note: null, by: null, at: born });

          clock.advance(MINUTE);
          expect(await ack(['dl_1'], 'still waiting for the consumer', 'carol')).to.deep.equal({ applied: ['dl_1'], skipped: [] });
          expect(await triageOf('dl_1')).to.deep.equal({ state: 'acknowledged', note: 'still waiting for the consumer', by: 'carol', at: clock.now() });
          expect(await discard(['dl_2', 'dl_1'])).to.deep.equal({ applied: ['dl_2', 'dl_1'], skipped: [] });
          expect(await triageOf('dl_1')).to.deep.equal({ state: 'discarded', note: 'test event, never to be delivered', by: 'bob', at: clock.now() });
          expect((await store.getDeadLetter('dl_1'))?.replayedAt).to.equal(null);
        });

        it('skips unknown and closed ones (replayed, discarded), naming why, and changes nothing of them', async () => {
          await addEndpoint('ep_1');
          await deadDelivery('ep_1', 'dl_open');
          await deadDelivery('ep_1', 'dl_replayed');
          await deadDelivery('ep_1', 'dl_discarded');
          await store.replayDeadLetters({ ids: ['dl_replayed'] }, clock.now());
          await discard(['dl_discarded']);
          const before = await triageOf('dl_replayed');
          clock.advance(MINUTE);

          expect(await ack(['dl_missing', 'dl_replayed', 'dl_open', 'dl_discarded'])).to.deep.equal({
            applied: ['dl_open'],
            skipped: [
              { id: 'dl_missing', reason: 'unknown' },
              { id: 'dl_replayed', reason: 'replayed' },
              { id: 'dl_discarded', reason: 'discarded' },
            ],
          });
          expect(await discard(['dl_replayed'])).to.deep.equal({ applied: [], skipped: [{ id: 'dl_replayed', reason: 'replayed' }] });
          expect(await triageOf('dl_replayed')).to.deep.equal(before);
          expect((await triageOf('dl_discarded'))?.state).to.equal('discarded');
        });

        it('replays an acknowledged one by id or by filter, keeping its note and who, marked replayed at the replay', async () => {
          await addEndpoint('ep_1');
          const dead = await deadDelivery('ep_1', 'dl_1');
          await deadDelivery('ep_1', 'dl_2');
          await ack(['dl_1', 'dl_2']);
          clock.advance(HOUR);
          expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
          expect(await store.getDeadLetter('dl_1')).to.deep.include({
            replayedAt: clock.now(),
            triage: { state: 'replayed', note: 'consumer fixed, replay tomorrow', by: 'alice', at: clock.now() },
          });
          expect((await store.getDelivery(dead.deliveryId))?.status).to.equal('pending');
          expect(await store.replayDeadLetters({ endpointId: 'ep_1' }, clock.now())).to.deep.equal(['dl_2']);
          expect((await triageOf('dl_2'))?.state).to.equal('replayed');
        });

        it('keeps a discarded one out of every replay by filter; a replay naming it by id replays it', async () => {
          await addEndpoint('ep_1');
          await deadDelivery('ep_1', 'dl_1');
          const kept = await deadDelivery('ep_1', 'dl_2');
          await discard(['dl_2']);
          expect(await store.replayDeadLetters({ endpointId: 'ep_1' }, clock.now())).to.deep.equal(['dl_1']);
          expect(await store.replayDeadLetters({ tenantId: 'acme', state: 'discarded' }, clock.now())).to.deep.equal([]);
          expect((await store.getDelivery(kept.deliveryId))?.status).to.equal('dead');

          clock.advance(MINUTE);
          expect(await store.replayDeadLetters({ ids: ['dl_2'] }, clock.now())).to.deep.equal(['dl_2']);
          expect(await triageOf('dl_2')).to.deep.equal({ state: 'replayed', note: 'test event, never to be delivered', by: 'bob', at: clock.now() });
          expect((await store.getDelivery(kept.deliveryId))?.status).to.equal('pending');
        });

        it('replays by filter only the state asked for, among the open ones', async () => {
          await addEndpoint('ep_1');
          await deadDelivery('ep_1', 'dl_new');
          await deadDelivery('ep_1', 'dl_ack');
          await ack(['dl_ack']);
          expect(await store.replayDeadLetters({ endpointId: 'ep_1', state: 'acknowledged' }, clock.now())).to.deep.equal(['dl_ack']);
          expect((await triageOf('dl_new'))?.state).to.equal('new');
        });

        it('lists by triage state; by default the open ones (new, acknowledged); with includeReplayed every one', async () => {
          await addEndpoint('ep_1');
          for (const id of ['dl_new', 'dl_ack', 'dl_replayed', 'dl_discarded']) {
            await deadDelivery('ep_1', id);
            clock.advance(SECOND);
          }
          await ack(['dl_ack']);
          await discard(['dl_discarded']);
          await store.replayDeadLetters({ ids: ['dl_replayed'] }, clock.now());
          const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) => (await store.listDeadLetters(filter)).map((d) => d.id);
          expect(await ids({})).to.deep.equal(['dl_ack', 'dl_new']);
          expect(await ids({ includeReplayed: true })).to.deep.equal(['dl_discarded', 'dl_replayed', 'dl_ack', 'dl_new']);
          expect(await ids({ state: 'new' })).to.deep.equal(['dl_new']);
          expect(await ids({ state: 'acknowledged' })).to.deep.equal(['dl_ack']);
          expect(await ids({ state: 'replayed', includeReplayed: false })).to.deep.equal(['dl_replayed']);
          expect(await ids({ state: 'discarded', endpointId: 'ep_1' })).to.deep.equal(['dl_discarded']);
          expect(await ids({ state: 'discarded', endpointId: 'ep_2' })).to.deep.equal([]);
          const [acknowledged] = await store.listDeadLetters({ state: 'acknowledged' });
          expect(acknowledged).to.deep.equal(await store.getDeadLetter('dl_ack'));
        });
      });

      context('when asking for the unreviewed dead letters', () => {
        it('counts those in state new, up to the cap, with the oldest one\'s time; none gives 0 and null', async () => {
          await addEndpoint('ep_1');
          expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 0, oldestAt: null });
          const t0 = clock.now();
          await deadDelivery('ep_1', 'dl_1');
          clock.advance(HOUR);
          await deadDelivery('ep_1', 'dl_2');
          clock.advance(HOUR);
          await deadDelivery('ep_1', 'dl_3');
          expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 3, oldestAt: t0 });
          expect(await store.unreviewedDeadLetters(2)).to.deep.equal({ count: 2, oldestAt: t0 });

          await store.triageDeadLetters({ ids: ['dl_1'], state: 'acknowledged', note: 'looking', by: 'alice' }, clock.now());
          expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 2, oldestAt: t0 + HOUR });
          await store.replayDeadLetters({ ids: ['dl_2'] }, clock.now());
          await store.triageDeadLetters({ ids: ['dl_3'], state: 'discarded', note: 'noise', by: 'bob' }, clock.now());
          expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 0, oldestAt: null });
        });
      });
    });

    describe('failure groups', () => {
      const REFUSED: Outcome = { kind: 'network', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 203.0.113.5:443' };

      /** Claims the deliveries named (seeded already) and returns their claim epochs. */
      async function claimAll(deliveryIds: readonly string[]): Promise<Map<string, number>> {
        await lease();
        const jobs = await claim();
        const epochs = new Map(jobs.map((job) => [job.delivery.id, job.delivery.leaseEpoch]));
        for (const id of deliveryIds) if (!epochs.has(id)) throw new Error(`${id} was not claimed`);
        return epochs;
      }

      /** Settles one claimed delivery as a failure at the clock's time: retried an hour later, or dead. */
      async function fail(deliveryId: string, epoch: number, outcome: Outcome, deadLetterId?: string): Promise<void> {
        const record = attempt(clock.now(), outcome, 'failed');
        const settlement =
          deadLetterId === undefined
            ? { kind: 'retry' as const, deliveryId, epoch, attempt: record, nextAttemptAt: clock.now() + HOUR }
            : { kind: 'dead' as const, deliveryId, epoch, attempt: record, deadLetterId, reason: 'exhausted' };
        const result = await store.settle([settlement], clock.now());
        expect(result.applied).to.deep.equal([deliveryId]);
      }

      /**
       * At t0: ep_1's delivery a fails with a 503 (retrying); t0+1min: its b times out (retrying);
       * t0+2min: its c dies of a 503; t0+3min: globex's ep_2's d dies of a refused connection.
       * Its e is delivered and its f released (no attempt): neither is a failure.
       */
      async function seedFailures() {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'globex');
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push((await seed(['ep_1'])).deliveryIds[0]!);
        ids.push((await seed(['ep_2'], { tenantId: 'globex' })).deliveryIds[0]!);
        const [a, b, c, e, f, d] = ids as [string, string, string, string, string, string];
        const epochs = await claimAll(ids);
        const t0 = clock.now();
        await fail(a, epochs.get(a)!, BUSY);
        clock.advance(MINUTE);
        await fail(b, epochs.get(b)!, TIMEOUT);
        clock.advance(MINUTE);
        await fail(c, epochs.get(c)!, BUSY, 'dl_c');
        clock.advance(MINUTE);
        await fail(d, epochs.get(d)!, REFUSED, 'dl_d');
        await store.settle(
          [
            { kind: 'delivered', deliveryId: e, epoch: epochs.get(e)!, attempt: attempt(clock.now(), OK, null) },
            { kind: 'release', deliveryId: f, epoch: epochs.get(f)!, nextAttemptAt: clock.now() + 2 * HOUR },
          ],
          clock.now(),
        );
        return { t0, a, b, c, d, epochs };
      }

      context('when deliveries wait for a retry and dead letters are open', () => {
        it('groups them by endpoint and failure kind, the largest first, with counts, times and a sample', async () => {
          const { t0 } = await seedFailures();
          expect(await store.failureGroups({})).to.deep.equal([
            {
              endpointId: 'ep_1',
              tenantId: 'acme',
              kind: 'http-503',
              count: { retrying: 1, dead: 1, total: 2 },
              firstSeen: t0,
              lastSeen: t0 + 2 * MINUTE,
              sample: { summary: 'HTTP 503', status: 503, body: 'busy' },
            },
            {
              endpointId: 'ep_2',
              tenantId: 'globex',
              kind: 'refused',
              count: { retrying: 0, dead: 1, total: 1 },
              firstSeen: t0 + 3 * MINUTE,
              lastSeen: t0 + 3 * MINUTE,
              sample: { summary: 'ECONNREFUSED: connect ECONNREFUSED 203.0.113.5:443', status: null, body: null },
            },
            {
              endpointId: 'ep_1',
              tenantId: 'acme',
              kind: 'timeout',
              count: { retrying: 1, dead: 0, total: 1 },
              firstSeen: t0 + MINUTE,
              lastSeen: t0 + MINUTE,
              sample: { summary: 'timeout after 10 s', status: null, body: null },
            },
          ]);
        });

        it('filters by endpoint and tenant, and caps the groups returned', async () => {
          await seedFailures();
          const key = (g: { endpointId: string; kind: string }) => `${g.endpointId}/${g.kind}`;
          expect((await store.failureGroups({ endpointId: 'ep_1' })).map(key)).to.deep.equal(['ep_1/http-503', 'ep_1/timeout']);
          expect((await store.failureGroups({ tenantId: 'globex' })).map(key)).to.deep.equal(['ep_2/refused']);
          expect((await store.failureGroups({ limit: 1 })).map(key)).to.deep.equal(['ep_1/http-503']);
        });

        it('lists dead letters of one failure kind', async () => {
          await seedFailures();
          expect((await store.listDeadLetters({ failureKind: 'http-503' })).map((dl) => dl.id)).to.deep.equal(['dl_c']);
          expect((await store.listDeadLetters({ failureKind: 'timeout' })).map((dl) => dl.id)).to.deep.equal([]);
        });
      });

      context('when failures end', () => {
        it('leaves out a delivery once delivered, a replayed or discarded dead letter, but keeps an acknowledged one', async () => {
          const { a, b } = await seedFailures();
          clock.advance(HOUR);
          await lease();
          const jobs = await claim({ endpointId: 'ep_1' });
          const epochOf = (id: string) => jobs.find((job) => job.delivery.id === id)!.delivery.leaseEpoch;
          expect(jobs.map((job) => job.delivery.id).sort()).to.deep.equal([a, b].sort());
          // b (timed out) is claimed, then released untouched: waiting again, it keeps its failure.
          await store.settle(
            [
              { kind: 'delivered', deliveryId: a, epoch: epochOf(a), attempt: attempt(clock.now(), OK, null) },
              { kind: 'release', deliveryId: b, epoch: epochOf(b), nextAttemptAt: clock.now() + HOUR },
            ],
            clock.now(),
          );
          await store.replayDeadLetters({ ids: ['dl_c'] }, clock.now());
          await store.triageDeadLetters({ ids: ['dl_d'], state: 'acknowledged', note: 'their firewall', by: 'ops' }, clock.now());
          const key = (g: { endpointId: string; kind: string }) => `${g.endpointId}/${g.kind}`;
          expect((await store.failureGroups({})).map(key)).to.deep.equal(['ep_2/refused', 'ep_1/timeout']);
          await store.triageDeadLetters({ ids: ['dl_d'], state: 'discarded', note: 'gone for good', by: 'ops' }, clock.now());
          expect((await store.failureGroups({})).map(key)).to.deep.equal(['ep_1/timeout']);
        });
      });

      context('when a group is replayed', () => {
        it('makes its retrying deliveries due now and replays its open dead letters, leaving other groups alone', async () => {
          const { a, b, c } = await seedFailures();
          clock.advance(MINUTE);
          const now = clock.now();
          expect(await store.replayFailureGroup({ endpointId: 'ep_1', kind: 'http-503' }, now)).to.deep.equal({ deadLetters: 1, retrying: 1 });
          expect(await store.getDelivery(a)).to.include({ status: 'pending', nextAttemptAt: now, attempts: 1 });
          expect(await store.getDelivery(c)).to.include({ status: 'pending', nextAttemptAt: now, attempts: 0 });
          expect((await store.getDeadLetter('dl_c'))?.triage.state).to.equal('replayed');
          expect((await store.getDelivery(b))?.nextAttemptAt).to.be.greaterThan(now);
          // The same size now: the latest failure first (the replayed dead letter no longer counts).
          const groups = await store.failureGroups({ endpointId: 'ep_1' });
          expect(groups.map((g) => [g.kind, g.count, g.lastSeen])).to.deep.equal([
            ['timeout', { retrying: 1, dead: 0, total: 1 }, now - 3 * MINUTE],
            ['http-503', { retrying: 1, dead: 0, total: 1 }, now - 4 * MINUTE],
          ]);
          expect(await store.replayFailureGroup({ endpointId: 'ep_1', kind: 'dns' }, now)).to.deep.equal({ deadLetters: 0, retrying: 0 });
        });
      });
    });

    describe('delivery log and counts', () => {
      context('when listing deliveries', () => {
        it('lists newest first with each filter', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'acme');
          await addEndpoint('ep_3', 'globex');
          const t0 = clock.now();
          const a = await seed(['ep_1', 'ep_2']);
          clock.advance(MINUTE);
          const b = await seed(['ep_3'], { tenantId: 'globex' });
          clock.advance(MINUTE);
          const c = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
          await lease();
          const [claimed] = await claim({ endpointId: 'ep_3' });

          const ids = async (filter: Parameters<Store['listDeliveries']>[0]) =>
            (await store.listDeliveries(filter)).map((d) => d.id);
          const [a1, a2] = a.deliveryIds;
          const all = await ids({});
          expect(all.slice(0, 2)).to.deep.equal([c.deliveryIds[0], b.deliveryIds[0]]);
          expect(all.slice(2).sort()).to.deep.equal([a1, a2].sort());
          expect(await ids({ endpointId: 'ep_1' })).to.deep.equal([c.deliveryIds[0], a1]);
          expect(await ids({ tenantId: 'globex' })).to.deep.equal(b.deliveryIds);
          expect((await ids({ eventId: a.event.id })).sort()).to.deep.equal([a1, a2].sort());
          expect(await ids({ status: 'in_flight' })).to.deep.equal([claimed!.delivery.id]);
          expect(await ids({ since: t0 + MINUTE })).to.deep.equal([c.deliveryIds[0], b.deliveryIds[0]]);
          expect(await ids({ since: t0, until: t0 + MINUTE, endpointId: 'ep_2' })).to.deep.equal([a2]);
          expect(await ids({ limit: 1 })).to.deep.equal([c.deliveryIds[0]]);
          expect(await store.getDelivery('dlv_missing')).to.equal(undefined);
        });

        it('filters by event type and pages with a cursor, ties broken by id', async () => {
          await addEndpoint('ep_1', 'acme');
          await addEndpoint('ep_2', 'acme');
          await addEndpoint('ep_3', 'acme');
          await seed(['ep_1', 'ep_2', 'ep_3'], { type: 'order.placed' });
          clock.advance(MINUTE);
          await seed(['ep_1', 'ep_2'], { type: 'invoice.paid' });
          const all = await store.listDeliveries({});
          expect(all.map((d) => d.createdAt)).to.deep.equal([...all.map((d) => d.createdAt)].sort((x, y) => y - x));
          const sameTime = all.filter((d) => d.createdAt === all[all.length - 1]?.createdAt).map((d) => d.id);
          expect(sameTime).to.deep.equal([...sameTime].sort().reverse());

          expect((await store.listDeliveries({ eventType: 'order.placed' })).map((d) => d.eventType)).to.deep.equal([
            'order.placed',
            'order.placed',
            'order.placed',
          ]);
          const pages: string[][] = [];
          let after: { createdAt: number; id: string } | undefined;
          for (;;) {
            const page = await store.listDeliveries({ limit: 2, ...(after === undefined ? {} : { after }) });
            if (page.length === 0) break;
            pages.push(page.map((d) => d.id));
            const last = page[page.length - 1]!;
            after = { createdAt: last.createdAt, id: last.id };
          }
          expect(pages.map((p) => p.length)).to.deep.equal([2, 2, 1]);
          expect(pages.flat()).to.deep.equal(all.map((d) => d.id));
        });
      });

      context('when counting deliveries', () => {
        it('counts every status, zeros included', async () => {
          await addEndpoint('ep_1');
          expect(await store.countDeliveries()).to.deep.equal({ pending: 0, in_flight: 0, delivered: 0, dead: 0, cancelled: 0 });
          await seed(['ep_1']);
          await seed(['ep_1']);
          await lease();
          const [job] = await claim({ limit: 1 });
          await store.settle(
            [{ kind: 'delivered', deliveryId: job!.delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          await seed(['ep_1']);
          await claim({ limit: 1 });
          expect(await store.countDeliveries()).to.deep.equal({ pending: 1, in_flight: 1, delivered: 1, dead: 0, cancelled: 0 });
        });
      });

      context('when asking for the next due time', () => {
        it('gives the earliest pending delivery of an enabled endpoint, or undefined', async () => {
          expect(await store.nextDueAt()).to.equal(undefined);
          await addEndpoint('ep_on');
          await addEndpoint('ep_off', 'acme', { status: 'disabled', disabledReason: 'failing' });
          const now = clock.now();
          await seed(['ep_off'], { dueAt: now - HOUR });
          await seed(['ep_on'], { dueAt: now + MINUTE });
          await seed(['ep_on'], { dueAt: now + HOUR });
          expect(await store.nextDueAt()).to.equal(now + MINUTE);
          clock.advance(MINUTE);
          await lease();
          await claim();
          expect(await store.nextDueAt()).to.equal(now + HOUR);
        });
      });
    });

    describe('tenant tokens', () => {
      function token(id: string, tenantId: string, overrides: Partial<TenantToken> = {}): TenantToken {
        return { id, tenantId, name: `token ${id}`, secretHash: 'ab'.repeat(32), createdAt: clock.now(), expiresAt: null, ...overrides };
      }

      it('keeps a token as given and finds it by id, whatever its tenant', async () => {
        const expiring = token('htk_1', 'acme', { expiresAt: clock.now() + DAY, name: 'ci — déploiement' });
        await store.createTenantToken(expiring);
        await store.createTenantToken(token('htk_2', 'globex'));
        expect(await store.getTenantToken('htk_1')).to.deep.equal(expiring);
        expect((await store.getTenantToken('htk_2'))?.tenantId).to.equal('globex');
        expect(await store.getTenantToken('htk_unknown')).to.equal(undefined);
      });

      it('refuses a second token with the same id with HERALD_CONFLICT, keeping the first', async () => {
        await store.createTenantToken(token('htk_1', 'acme'));
        const error = await rejection(store.createTenantToken(token('htk_1', 'globex', { secretHash: 'cd'.repeat(32) })));
        expect(error.code).to.equal(ErrorCode.CONFLICT);
        expect((await store.getTenantToken('htk_1'))?.tenantId).to.equal('acme');
      });

      it("lists a tenant's tokens only, oldest first, ties by id", async () => {
        await store.createTenantToken(token('htk_b', 'acme'));
        await store.createTenantToken(token('htk_a', 'acme'));
        await store.createTenantToken(token('htk_other', 'globex'));
        clock.advance(SECOND);
        await store.createTenantToken(token('htk_0', 'acme'));
        expect((await store.listTenantTokens('acme')).map((t) => t.id)).to.deep.equal(['htk_a', 'htk_b', 'htk_0']);
        expect((await store.listTenantTokens('globex')).map((t) => t.id)).to.deep.equal(['htk_other']);
        expect(await store.listTenantTokens('initech')).to.deep.equal([]);
      });

      it("deletes a token only for its own tenant: another tenant's id is left alone and answers false", async () => {
        await store.createTenantToken(token('htk_1', 'acme'));
        await store.createTenantToken(token('htk_2', 'globex'));
        expect(await store.deleteTenantToken('acme', 'htk_2')).to.equal(false);
        expect(await store.getTenantToken('htk_2')).to.not.equal(undefined);
        expect(await store.deleteTenantToken('acme', 'htk_1')).to.equal(true);
        expect(await store.getTenantToken('htk_1')).to.equal(undefined);
        expect(await store.deleteTenantToken('acme', 'htk_1'), 'deleted already').to.equal(false);
        expect((await store.listTenantTokens('acme'))).to.deep.equal([]);
      });
    });

    describe('delivery minutes', () => {
      const T0 = Date.UTC(2026, 0, 1, 12, 0);

      /** An increment with every count `n` (first-attempt successes `n - 1`) and `n` attempts in latency bucket `bucket`. */
      function increment(endpointId: string, tenantId: string, minute: number, n: number, bucket = 3): DeliveryMinuteIncrement {
        const latency = new Array<number>(LATENCY_BUCKETS).fill(0);
        latency[bucket] = n;
        return { endpointId, tenantId, minute, attempts: n, delivered: n, retriesScheduled: n, deadLettered: n, firstAttempts: n, firstAttemptSuccesses: n - 1, latency };
      }

      context('when increments of the same rows are added several times (several flushes, several nodes)', () => {
        it('adds them field by field, and sums the endpoints of a scope per minute, oldest first', async () => {
          await store.addDeliveryMinutes([increment('ep_a', 'acme', T0, 2), increment('ep_b', 'acme', T0, 3, 0)]);
          await store.addDeliveryMinutes([increment('ep_a', 'acme', T0, 5, LATENCY_BUCKETS - 1), increment('ep_a', 'acme', T0 + MINUTE, 1)]);
          await store.addDeliveryMinutes([increment('ep_c', 'globex', T0, 7)]);

          const one = await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: ['ep_a'] }, from: T0, to: T0 + HOUR });
          expect(one.map((m) => m.minute)).to.deep.equal([T0, T0 + MINUTE]);
          expect(one[0]).to.include({ attempts: 7, delivered: 7, retriesScheduled: 7, deadLettered: 7, firstAttempts: 7, firstAttemptSuccesses: 5 });
          expect(one[0]?.latency[3]).to.equal(2);
          expect(one[0]?.latency[LATENCY_BUCKETS - 1]).to.equal(5);
          expect(one[0]?.latency).to.have.length(LATENCY_BUCKETS);

          const all = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0, to: T0 + HOUR });
          expect(all.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 17], [T0 + MINUTE, 1]]);
          expect(all[0]?.latency[0]).to.equal(3);
          expect(all[0]?.latency[3]).to.equal(9);

          const tenant = await store.deliveryMinutes({ scope: { kind: 'tenant', tenantId: 'acme' }, from: T0, to: T0 + HOUR });
          expect(tenant.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 10], [T0 + MINUTE, 1]]);
          const named = await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: ['ep_b', 'ep_c'] }, from: T0, to: T0 + HOUR });
          expect(named.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 10]]);
          expect(await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: [] }, from: T0, to: T0 + HOUR })).to.deep.equal([]);
        });
      });

      context('when the minutes are summed per endpoint (deliveryTotals)', () => {
        it('adds every node\'s increments of each endpoint over the window, within the scope, by endpoint id', async () => {
          // Two nodes' flushes into the same rows, a minute outside the window on each side.
          await store.addDeliveryMinutes([increment('ep_b', 'acme', T0, 2), increment('ep_a', 'acme', T0, 3)]);
          await store.addDeliveryMinutes([increment('ep_b', 'acme', T0, 5), increment('ep_b', 'acme', T0 + MINUTE, 1)]);
          await store.addDeliveryMinutes([increment('ep_c', 'globex', T0 + 2 * MINUTE, 4)]);
          await store.addDeliveryMinutes([increment('ep_a', 'acme', T0 - MINUTE, 100), increment('ep_a', 'acme', T0 + HOUR, 100)]);
          const window = { from: T0, to: T0 + HOUR };

          const all = await store.deliveryTotals({ scope: { kind: 'all' }, ...window });
          expect(all).to.deep.equal([
            { endpointId: 'ep_a', attempts: 3, delivered: 3, retriesScheduled: 3, deadLettered: 3, firstAttempts: 3, firstAttemptSuccesses: 2 },
            { endpointId: 'ep_b', attempts: 8, delivered: 8, retriesScheduled: 8, deadLettered: 8, firstAttempts: 8, firstAttemptSuccesses: 5 },
            { endpointId: 'ep_c', attempts: 4, delivered: 4, retriesScheduled: 4, deadLettered: 4, firstAttempts: 4, firstAttemptSuccesses: 3 },
          ]);
          const tenant = await store.deliveryTotals({ scope: { kind: 'tenant', tenantId: 'acme' }, ...window });
          expect(tenant.map((t) => [t.endpointId, t.attempts])).to.deep.equal([['ep_a', 3], ['ep_b', 8]]);
          const named = await store.deliveryTotals({ scope: { kind: 'endpoints', endpointIds: ['ep_c', 'ep_b'] }, ...window });
          expect(named.map((t) => [t.endpointId, t.attempts])).to.deep.equal([['ep_b', 8], ['ep_c', 4]]);
          expect(await store.deliveryTotals({ scope: { kind: 'endpoints', endpointIds: [] }, ...window })).to.deep.equal([]);
          expect(await store.deliveryTotals({ scope: { kind: 'tenant', tenantId: 'initech' }, ...window })).to.deep.equal([]);
        });
      });

      context('when a window is asked for', () => {
        it('covers the minutes from its start, inclusive, to its end, exclusive', async () => {
          await store.addDeliveryMinutes([0, 1, 2, 3].map((i) => increment('ep_a', 'acme', T0 + i * MINUTE, i + 1)));
          const window = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0 + MINUTE, to: T0 + 3 * MINUTE });
          expect(window.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0 + MINUTE, 2], [T0 + 2 * MINUTE, 3]]);
        });
      });

      context('when minutes are older than their retention', () => {
        it('deletes them, in chunks, and keeps the newer ones', async () => {
          // More rows than one purge chunk (500), so the delete runs more than once.
          const old = Array.from({ length: 620 }, (_, i) => increment(`ep_${i}`, 'acme', T0 - 2 * DAY, 1));
          await store.addDeliveryMinutes(old);
          await store.addDeliveryMinutes([increment('ep_0', 'acme', T0, 4)]);
          expect(await store.purgeDeliveryMinutes(T0 - DAY)).to.equal(620);
          expect(await store.purgeDeliveryMinutes(T0 - DAY)).to.equal(0);
          const left = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0 - 3 * DAY, to: T0 + HOUR });
          expect(left.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 4]]);
        });
      });
    });

    describe('purge', () => {
      context('when records are older than the horizon', () => {
        it('deletes old attempts, old dead letters and finished events, and keeps the rest', async () => {
          await addEndpoint('ep_1');
          // Old and finished: delivered.
          const { delivery: done, event: doneEvent } = await claimedDelivery('ep_1');
          await store.settle(
            [{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
            clock.now(),
          );
          // Old and still pending.
          const waiting = await seed(['ep_1'], { dueAt: clock.now() + 40 * DAY });
          // Old, never fanned out.
          const unfanned = makeEvent('evt_unfanned', 'acme', clock.now());
          await store.appendEvents([unfanned]);
          // Old and dead, its dead letter old too.
          const { delivery: oldDead, event: oldDeadEvent } = await claimedDelivery('ep_1');
          await store.settle(
            [{ kind: 'dead', deliveryId: oldDead.id, epoch: oldDead.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_old', reason: 'exhausted' }],
            clock.now(),
          );
          // Old event whose delivery died recently: its dead letter must still be replayable.
          const { delivery: lateDead, event: lateDeadEvent } = await claimedDelivery('ep_1');
          await store.settle(
            [{ kind: 'release', deliveryId: lateDead.id, epoch: lateDead.leaseEpoch, nextAttemptAt: clock.now() + 20 * DAY }],
            clock.now(),
          );

          clock.advance(20 * DAY);
          await lease();
          const [late] = await claim();
          expect(late?.delivery.id).to.equal(lateDead.id);
          await store.settle(
            [{ kind: 'dead', deliveryId: lateDead.id, epoch: late!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_recent', reason: 'exhausted' }],
            clock.now(),
          );
          const recent = await seed(['ep_1']);

          clock.advance(20 * DAY);
          const result = await store.purge(clock.now() - 30 * DAY);
          expect(result).to.deep.equal({ attempts: 2, deadLetters: 1, events: 2, replayJobs: 0 });

          expect(await store.getEvent(doneEvent.id)).to.equal(undefined);
          expect(await store.getEvent(oldDeadEvent.id)).to.equal(undefined);
          expect(await store.getDeadLetter('dl_old')).to.equal(undefined);
          expect(await store.listAttempts(done.id)).to.deep.equal([]);

          expect(await store.getEvent(waiting.event.id)).to.not.equal(undefined);
          expect(await store.getEvent(unfanned.id)).to.not.equal(undefined);
          expect(await store.getEvent(lateDeadEvent.id)).to.not.equal(undefined);
          expect(await store.getEvent(recent.event.id)).to.not.equal(undefined);
          expect((await store.getDeadLetter('dl_recent'))?.attempts).to.have.length(1);
          expect(await store.replayDeadLetters({ ids: ['dl_recent'] }, clock.now())).to.deep.equal(['dl_recent']);
        });
      });
    });
  });
}
