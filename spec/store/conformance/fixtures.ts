/**
 * What every part of the Store conformance suite is written in: the constants,
 * record builders and outcomes, and {@link ConformanceSuite}, which holds the
 * store and clock of the running test and the steps most tests begin with
 * (add an endpoint, seed a delivery, take the leases, claim).
 */
import { ManualClock } from '../../../lib/clock.ts';
import { isHeraldError } from '../../../lib/errors.ts';
import type { HeraldError } from '../../../lib/errors.ts';
import { deliveryIdFor, slotOf } from '../../../lib/ids.ts';
import type { Endpoint, OutboxEvent, Outcome } from '../../../lib/model.ts';
import type { AttemptRecord, ClaimRequest, NewDelivery, Store } from '../../../lib/store/port.ts';

export interface StoreHarness {
  readonly store: Store;
  readonly clock: ManualClock;
  close(): Promise<void>;
}

export const SLOTS = 8;
export const SECOND = 1_000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const LEASE_MS = 30 * SECOND;

export const allSlots: readonly number[] = Array.from({ length: SLOTS }, (_, i) => i);

export const OK: Outcome = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' };
export const BUSY: Outcome = { kind: 'response', status: 503, location: null, retryAfter: '30', body: 'busy' };
export const TIMEOUT: Outcome = { kind: 'timeout', timeoutMs: 10_000 };

/** An endpoint id that hashes into `slot`, so tests can place work in chosen slots. */
export function endpointIdInSlot(slot: number, prefix = 'ep'): string {
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

export function makeEvent(id: string, tenantId: string, now: number, overrides: Partial<OutboxEvent> = {}): OutboxEvent {
  return {
    id,
    tenantId,
    type: 'invoice.paid',
    payload: JSON.stringify({ invoice: id, amount: 42, note: 'héllo' }),
    createdAt: now,
    endpointId: null,
    orderingKey: null,
    traceContext: null,
    ...overrides,
  };
}

export function attempt(startedAt: number, outcome: Outcome, error: string | null, number = 1): AttemptRecord {
  return { number, startedAt, durationMs: 120, outcome, error };
}

export async function rejection(promise: Promise<unknown>): Promise<HeraldError> {
  try {
    await promise;
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected the promise to reject');
}

/**
 * The running test's store: opened and initialised (`SLOTS` slots) before each test, closed
 * after it. Its steps are arrow functions, so a part of the suite can destructure them.
 */
export class ConformanceSuite {
  readonly #open: () => Promise<StoreHarness>;
  #harness: StoreHarness | undefined;
  #eventSeq = 0;

  constructor(open: () => Promise<StoreHarness>) {
    this.#open = open;
  }

  /** The store of the running test. */
  get store(): Store {
    return this.#current().store;
  }

  /** The running test's clock, which only the test moves. */
  get clock(): ManualClock {
    return this.#current().clock;
  }

  /** Opens a fresh, empty store and initialises it (a `beforeEach`). */
  async openStore(): Promise<void> {
    this.#harness = await this.#open();
    this.#eventSeq = 0;
    await this.#harness.store.init({ slotCount: SLOTS });
  }

  /** Closes the running test's store (an `afterEach`). */
  async closeStore(): Promise<void> {
    const harness = this.#harness;
    this.#harness = undefined;
    await harness?.close();
  }

  readonly addEndpoint = async (id: string, tenantId = 'acme', overrides: Partial<Endpoint> = {}): Promise<Endpoint> => {
    const endpoint = makeEndpoint(id, tenantId, this.clock.now(), overrides);
    await this.store.createEndpoint(endpoint);
    return endpoint;
  };

  /** Appends an event and fans it out to `endpointIds`; returns the event and its delivery ids. */
  readonly seed = async (
    endpointIds: readonly string[],
    options: { tenantId?: string; dueAt?: number; eventId?: string; type?: string; orderingKey?: string } = {},
  ): Promise<{ event: OutboxEvent; deliveryIds: string[] }> => {
    const now = this.clock.now();
    const event = makeEvent(options.eventId ?? `evt_${++this.#eventSeq}`, options.tenantId ?? 'acme', now, {
      type: options.type ?? 'invoice.paid',
      orderingKey: options.orderingKey ?? null,
    });
    await this.store.appendEvents([event]);
    const deliveries = this.plan(event, endpointIds, options.dueAt ?? now);
    await this.store.recordFanOuts([{ eventId: event.id, deliveries }], this.clock.now());
    return { event, deliveryIds: deliveries.map((d) => d.id) };
  };

  readonly plan = (event: OutboxEvent, endpointIds: readonly string[], dueAt: number): NewDelivery[] =>
    endpointIds.map((endpointId) => ({
      id: deliveryIdFor(event.id, endpointId, event.createdAt),
      eventId: event.id,
      endpointId,
      tenantId: event.tenantId,
      eventType: event.type,
      slot: slotOf(endpointId, SLOTS),
      nextAttemptAt: dueAt,
      createdAt: this.clock.now(),
      orderingKey: event.orderingKey,
    }));

  readonly lease = async (owner = 'node-a', slots: readonly number[] = allSlots, leaseMs = LEASE_MS) =>
    this.store.acquireLeases({ owner, slots, now: this.clock.now(), leaseMs });

  readonly claim = async (overrides: Partial<ClaimRequest> = {}) =>
    this.store.claimDue({
      owner: 'node-a',
      now: this.clock.now(),
      limit: 100,
      perEndpointLimit: 100,
      skipEndpointIds: [],
      ...overrides,
    });

  /** Seeds one delivery to `endpointId` and claims it as node-a; returns the claimed delivery. */
  readonly claimedDelivery = async (endpointId: string) => {
    const { deliveryIds, event } = await this.seed([endpointId]);
    await this.lease();
    const jobs = await this.claim({ endpointId });
    const job = jobs.find((j) => j.delivery.id === deliveryIds[0]);
    if (job === undefined) throw new Error('the seeded delivery was not claimed');
    return { delivery: job.delivery, event };
  };

  #current(): StoreHarness {
    if (this.#harness === undefined) throw new Error('no store open: the suite reads it only inside a test or a hook');
    return this.#harness;
  }
}
