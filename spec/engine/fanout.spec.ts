import { expect } from 'chai';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { Endpoint, OutboxEvent, PayloadFilter } from '../../lib/model.ts';

const NOW = 1_700_000_000_000;

function endpoint(id: string, overrides: Partial<Endpoint> = {}): Endpoint {
  return {
    id, tenantId: 'acme', url: `https://hooks.example/${id}`, description: '', eventTypes: [], retry: { preset: 'default' }, timeoutMs: 10_000,
    mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null, failingSince: null,
    secrets: [], createdAt: NOW, updatedAt: NOW, ...overrides,
  };
}

/** An event whose payload counts its reads: fan-out should read (and parse) it at most once. */
function countingEvent(payload: string, overrides: Partial<OutboxEvent> = {}): { event: OutboxEvent; reads: () => number } {
  let reads = 0;
  const event = { id: 'evt_1', tenantId: 'acme', type: 'order.paid', createdAt: NOW, endpointId: null, orderingKey: null, ...overrides } as OutboxEvent;
  Object.defineProperty(event, 'payload', { get: () => ((reads += 1), payload), enumerable: true });
  return { event, reads: () => reads };
}

const targets = (event: OutboxEvent, endpoints: readonly Endpoint[]): string[] => planDeliveries(event, endpoints, 16, NOW).map((d) => d.endpointId);

describe('planDeliveries with payload filters', () => {
  const big: PayloadFilter = { 'payload.amount': { $gte: 100 } };

  it('makes no delivery for an endpoint whose filter the event does not match, and one for each that matches', () => {
    const endpoints = [endpoint('ep_big', { filter: big }), endpoint('ep_small', { filter: { 'payload.amount': { $lt: 100 } } }), endpoint('ep_all')];
    expect(targets(countingEvent('{"amount":150}').event, endpoints)).to.deep.equal(['ep_big', 'ep_all']);
    expect(targets(countingEvent('{"amount":5}').event, endpoints)).to.deep.equal(['ep_small', 'ep_all']);
  });

  it('plans the same deliveries as before for endpoints without a filter, and never reads the payload for them', () => {
    const { event, reads } = countingEvent('{"amount":150}');
    const plain = [endpoint('ep_1'), endpoint('ep_2', { eventTypes: ['order.*'] }), endpoint('ep_3', { eventTypes: ['user.*'] })];
    const planned = planDeliveries(event, plain, 16, NOW);
    expect(reads()).to.equal(0);
    expect(planned).to.deep.equal(
      ['ep_1', 'ep_2'].map((id) => ({
        id: deliveryIdFor('evt_1', id, NOW), eventId: 'evt_1', endpointId: id, tenantId: 'acme', eventType: 'order.paid',
        slot: slotOf(id, 16), nextAttemptAt: NOW, createdAt: NOW, orderingKey: null,
      })),
    );
  });

  it('reads and parses the payload once per event however many filtered endpoints it reaches', () => {
    const { event, reads } = countingEvent('{"amount":150}');
    const endpoints = [1, 2, 3, 4].map((i) => endpoint(`ep_${i}`, { filter: { 'payload.amount': { $gte: i * 50 } } }));
    expect(targets(event, endpoints)).to.deep.equal(['ep_1', 'ep_2', 'ep_3']);
    expect(reads()).to.equal(1);
  });

  it('does not read the payload when the filtered endpoints are not targets (other types, other tenants)', () => {
    const { event, reads } = countingEvent('{"amount":150}');
    expect(targets(event, [endpoint('ep_1', { filter: big, eventTypes: ['user.*'] }), endpoint('ep_2', { filter: big, tenantId: 'globex' }), endpoint('ep_3')])).to.deep.equal(['ep_3']);
    expect(reads()).to.equal(0);
  });

  it('ignores the filter of the endpoint an event is addressed to', () => {
    const { event, reads } = countingEvent('{"amount":1}', { endpointId: 'ep_big' });
    expect(targets(event, [endpoint('ep_big', { filter: big }), endpoint('ep_all')])).to.deep.equal(['ep_big']);
    expect(reads()).to.equal(0);
  });

  it('does not throw on a payload that is not JSON: the payload is missing to the filter', () => {
    const endpoints = [endpoint('ep_big', { filter: big }), endpoint('ep_no_payload', { filter: { payload: { $exists: false } } }), endpoint('ep_all')];
    expect(targets(countingEvent('{broken').event, endpoints)).to.deep.equal(['ep_no_payload', 'ep_all']);
  });
});
