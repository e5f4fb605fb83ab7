/**
 * `npx tsx scripts/bench/payload-filter.ts [events]`: what payload filters cost fan-out, in
 * µs of `planDeliveries` per event (in process: no store, no HTTP), every case in the same run:
 *
 * - `before`: the `planDeliveries` of before filters (copied below), 5 endpoints, no filters;
 * - `none`: today's, the same 5 endpoints without filters (the hot path that must not change);
 * - `one`: one of the 5 with a typical filter (two conditions, `$gte` and `$in`);
 * - `all`: all 5 with one, each different;
 * - `all, 10 KB`: the same with a payload of 10 KB instead of 1 KB (the parse grows with it).
 *
 * The endpoints are loaded afresh (new objects) every 100 events, as fan-out reads them once per
 * batch: each filter is compiled once per batch, and that is counted. Rounds are interleaved and
 * the median of each kept; figures are this machine's, under tsx. `measurePayloadFilter` returns the
 * same figures (the bench's `features` scenario runs it).
 */
import { pathToFileURL } from 'node:url';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { matchesEventType } from '../../lib/endpoints/subscription.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { Endpoint, OutboxEvent, PayloadFilter } from '../../lib/model.ts';
import type { NewDelivery } from '../../lib/store/port.ts';

const BATCH = 100;
/** Events per case planned before any round counts, so the code is compiled. */
const WARM_UP = 20_000;
const SLOTS = 256;
const NOW = 1_700_000_000_000;

/** planDeliveries as it was before payload filters, to compare the unfiltered path with. */
function planDeliveriesBefore(event: OutboxEvent, tenantEndpoints: readonly Endpoint[], slotCount: number, now: number): NewDelivery[] {
  const targets = tenantEndpoints.filter((endpoint) =>
    endpoint.tenantId === event.tenantId &&
    (event.endpointId === null ? matchesEventType(endpoint.eventTypes, event.type) : endpoint.id === event.endpointId),
  );
  return targets.map((endpoint) => ({
    id: deliveryIdFor(event.id, endpoint.id, event.createdAt),
    eventId: event.id,
    endpointId: endpoint.id,
    tenantId: event.tenantId,
    eventType: event.type,
    slot: slotOf(endpoint.id, slotCount),
    nextAttemptAt: now,
    createdAt: now,
    orderingKey: event.orderingKey,
  }));
}

const FILTERS: readonly PayloadFilter[] = [
  { 'payload.amount': { $gte: 100 }, 'payload.country': { $in: ['BR', 'PT'] } },
  { 'payload.customer.tier': 'gold' },
  { $or: [{ 'payload.amount': { $gt: 1000 } }, { 'payload.flags.urgent': true }] },
  { 'payload.items.0.sku': { $exists: true }, 'payload.currency': { $ne: 'USD' } },
  { type: { $in: ['order.paid', 'order.refunded'] }, 'payload.country': { $nin: ['US'] } },
];

function endpoints(filtered: number): Endpoint[] {
  return FILTERS.map((filter, i) => ({
    id: `ep_${i}`, tenantId: 'acme', url: `https://hooks.example/${i}`, description: '', eventTypes: i === 4 ? ['order.*'] : [],
    retry: { preset: 'default' }, timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled',
    disabledReason: null, failingSince: null, secrets: [], createdAt: NOW, updatedAt: NOW,
    ...(i < filtered ? { filter: structuredClone(filter) } : {}),
  }));
}

function payloadOf(i: number, bytes: number): string {
  const base = {
    amount: (i * 37) % 2_000, country: ['BR', 'PT', 'US', 'DE'][i % 4], currency: i % 3 === 0 ? 'USD' : 'EUR',
    customer: { id: `cus_${i}`, tier: i % 5 === 0 ? 'gold' : 'silver', email: `buyer${i}@example.com` },
    flags: { urgent: i % 7 === 0 }, items: [{ sku: `SKU-${i % 100}`, qty: 1 + (i % 3), price: 19.9 }],
    note: '',
  };
  base.note = 'x'.repeat(Math.max(0, bytes - JSON.stringify(base).length));
  return JSON.stringify(base);
}

function events(bytes: number): OutboxEvent[] {
  return Array.from({ length: 1_000 }, (_, i) => ({
    id: `evt_${i}`, tenantId: 'acme', type: 'order.paid', payload: payloadOf(i, bytes), createdAt: NOW + i, endpointId: null, orderingKey: null,
  }));
}

interface Case {
  readonly name: string;
  readonly plan: typeof planDeliveries;
  readonly filtered: number;
  readonly events: readonly OutboxEvent[];
}

/** µs per event over `count` events, endpoints loaded afresh every BATCH events (outside the timing). */
function measure(c: Case, count: number): { microsPerEvent: number; deliveries: number } {
  const loads = Array.from({ length: Math.ceil(count / BATCH) }, () => endpoints(c.filtered));
  let deliveries = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) {
    deliveries += c.plan(c.events[i % c.events.length]!, loads[Math.floor(i / BATCH)]!, SLOTS, NOW).length;
  }
  const elapsedNs = Number(process.hrtime.bigint() - started);
  return { microsPerEvent: elapsedNs / 1_000 / count, deliveries };
}

export interface PayloadFilterSizes {
  /** Events planned per case over all the rounds. */
  readonly events: number;
  /** Interleaved rounds; the median of each case is kept. */
  readonly rounds: number;
}

export interface PayloadFilterRow {
  readonly name: string;
  /** Median of the rounds, µs of `planDeliveries` per event. */
  readonly microsPerEvent: number;
  /** Against the `before` case's median. */
  readonly ratioToBefore: number;
  readonly deliveriesPerEvent: number;
}

export interface PayloadFilterResult extends PayloadFilterSizes {
  readonly endpoints: number;
  readonly rows: readonly PayloadFilterRow[];
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Every case in interleaved rounds of `events / rounds` events each, after a warm-up. */
export async function measurePayloadFilter({ events: count, rounds }: PayloadFilterSizes): Promise<PayloadFilterResult> {
  const small = events(1_024);
  const large = events(10 * 1_024);
  const cases: readonly Case[] = [
    { name: 'before', plan: planDeliveriesBefore, filtered: 0, events: small },
    { name: 'none', plan: planDeliveries, filtered: 0, events: small },
    { name: 'one', plan: planDeliveries, filtered: 1, events: small },
    { name: 'all', plan: planDeliveries, filtered: 5, events: small },
    { name: 'all, 10 KB', plan: planDeliveries, filtered: 5, events: large },
  ];
  const perRound = Math.ceil(count / rounds);
  for (const c of cases) measure(c, WARM_UP); // warm-up: the code compiled before any round counts
  const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const delivered = new Map<string, number>();
  for (let round = 0; round < rounds; round += 1) {
    for (const c of cases) {
      const { microsPerEvent, deliveries } = measure(c, perRound);
      samples.get(c.name)!.push(microsPerEvent);
      delivered.set(c.name, deliveries);
    }
  }
  const before = median(samples.get('before')!);
  const rows = cases.map((c) => {
    const us = median(samples.get(c.name)!);
    return { name: c.name, microsPerEvent: us, ratioToBefore: us / before, deliveriesPerEvent: delivered.get(c.name)! / perRound };
  });
  return { events: count, rounds, endpoints: FILTERS.length, rows };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await measurePayloadFilter({ events: Number(process.argv[2] ?? 200_000), rounds: 7 });
  console.log(`planDeliveries, ${result.endpoints} endpoints, ${result.events} events per case in ${result.rounds} interleaved rounds (median µs/event):`);
  for (const row of result.rows) {
    console.log(`  ${row.name.padEnd(11)} ${row.microsPerEvent.toFixed(3).padStart(7)} µs  ×${row.ratioToBefore.toFixed(2)} of before  (${row.deliveriesPerEvent.toFixed(2)} deliveries/event)`);
  }
}
