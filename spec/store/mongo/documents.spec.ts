import { expect } from 'chai';
import { ObjectId } from 'mongodb';
import type { Endpoint, OutboxEvent } from '../../../lib/model.ts';
import {
  attemptFromDoc,
  attemptToDoc,
  deadLetterFromDoc,
  deliveryFromDoc,
  endpointFromDoc,
  endpointToDoc,
  eventFromDoc,
  eventToDoc,
  leaseFromDoc,
  newDeliveryDoc,
  nodeFromDoc,
  triageFromDoc,
} from '../../../lib/store/mongo/documents.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';
import { legacyTriage } from '../../../lib/store/mongo/schema.ts';

const NOW = Date.UTC(2026, 0, 1);

describe('MongoDB documents', () => {
  // A new event's `ord` is an ObjectId of the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  it('maps an endpoint to a document and back exactly, nulls and nested values included', () => {
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: 'd', eventTypes: ['invoice.*'],
      retry: { schedule: ['PT1M'] }, timeoutMs: 5_000, mode: 'at-most-once', ordering: 'none', concurrency: 2, status: 'disabled',
      disabledReason: 'operator', failingSince: null,
      secrets: [{ secret: 'whsec_a', createdAt: NOW, expiresAt: null }, { secret: 'whsec_b', createdAt: NOW - 1, expiresAt: NOW + 1 }],
      createdAt: NOW, updatedAt: NOW + 5,
    };
    const doc = endpointToDoc(endpoint);
    expect(doc._id).to.equal('ep_1');
    expect(doc).to.not.have.property('id');
    expect(endpointFromDoc(doc)).to.deep.equal(endpoint);
    expect(endpointFromDoc(endpointToDoc({ ...endpoint, retry: { preset: 'relaxed' } })).retry).to.deep.equal({ preset: 'relaxed' });
  });

  it("maps an ed25519 key's public key both ways, and reads a secret stored without one as HMAC (no publicKey)", () => {
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null, failingSince: null,
      secrets: [{ secret: 'enc:v1:0badc0de:a:b', createdAt: NOW, expiresAt: null, publicKey: 'whpk_cHVi' }, { secret: 'whsec_b', createdAt: NOW - 1, expiresAt: NOW + 1 }],
      createdAt: NOW, updatedAt: NOW,
    };
    expect(endpointToDoc(endpoint).secrets[0]).to.have.property('publicKey', 'whpk_cHVi');
    expect(endpointToDoc(endpoint).secrets[1]).to.not.have.property('publicKey');
    expect(endpointFromDoc(endpointToDoc(endpoint))).to.deep.equal(endpoint);
  });

  it("maps an endpoint's rate limit both ways: a value, null when it has none, and none when a document predates it", () => {
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, rateLimit: { perSecond: 0.5, burst: 2 }, status: 'enabled',
      disabledReason: null, failingSince: null, secrets: [], createdAt: NOW, updatedAt: NOW,
    };
    expect(endpointToDoc(endpoint).rateLimit).to.deep.equal({ perSecond: 0.5, burst: 2 });
    expect(endpointFromDoc(endpointToDoc(endpoint))).to.deep.equal(endpoint);
    const { rateLimit: _, ...unlimited } = endpoint;
    expect(endpointToDoc(unlimited).rateLimit).to.equal(null);
    expect(endpointFromDoc(endpointToDoc(unlimited))).to.deep.equal(unlimited);
    const { rateLimit: __, ...older } = endpointToDoc(unlimited);
    expect(endpointFromDoc(older)).to.deep.equal(unlimited);
  });

  it("maps an endpoint's client certificate both ways: a value (key still sealed), null without one, and none when a document predates it", () => {
    const clientTls = { cert: 'PEM', key: 'enc:v1:aaaaaaaa:k', passphrase: null, subject: 'CN=c', issuer: 'CN=ca', fingerprint: 'AB:CD', notAfter: NOW + 1 };
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, clientTls, status: 'enabled',
      disabledReason: null, failingSince: null, secrets: [], createdAt: NOW, updatedAt: NOW,
    };
    expect(endpointToDoc(endpoint).clientTls).to.deep.equal(clientTls);
    expect(endpointFromDoc(endpointToDoc(endpoint))).to.deep.equal(endpoint);
    const { clientTls: _, ...plain } = endpoint;
    expect(endpointToDoc(plain).clientTls).to.equal(null);
    expect(endpointFromDoc(endpointToDoc(plain))).to.deep.equal(plain);
    const { clientTls: __, ...older } = endpointToDoc(plain);
    expect(endpointFromDoc(older)).to.deep.equal(plain);
  });

  it("maps an endpoint's adaptive concurrency both ways: a value, null when fixed, and fixed when a document predates it", () => {
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 64, adaptiveConcurrency: { initial: 2, targetLatencyMs: 750 }, status: 'enabled',
      disabledReason: null, failingSince: null, secrets: [], createdAt: NOW, updatedAt: NOW,
    };
    expect(endpointToDoc(endpoint).adaptiveConcurrency).to.deep.equal({ initial: 2, targetLatencyMs: 750 });
    expect(endpointFromDoc(endpointToDoc(endpoint))).to.deep.equal(endpoint);
    const { adaptiveConcurrency: _, ...fixed } = endpoint;
    expect(endpointToDoc(fixed).adaptiveConcurrency).to.equal(null);
    expect(endpointFromDoc(endpointToDoc(fixed))).to.deep.equal(fixed);
    const { adaptiveConcurrency: __, ...older } = endpointToDoc(fixed);
    expect(endpointFromDoc(older)).to.deep.equal(fixed);
  });

  it("maps an endpoint's headers and auth both ways: values, null when none, and none when a document predates them", () => {
    const endpoint: Endpoint = {
      id: 'ep_1', tenantId: 'acme', url: 'https://x.example/h', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null, failingSince: null,
      secrets: [], createdAt: NOW, updatedAt: NOW,
      headers: [{ name: 'X-Team', value: 'a', secret: false }, { name: 'X-Key', value: 'enc:v1:k', secret: true }],
      auth: { type: 'oauth2', tokenUrl: 'https://auth.example/t', clientId: 'c', clientSecret: 'enc:v1:s', audience: 'api' },
    };
    expect(endpointFromDoc(endpointToDoc(endpoint))).to.deep.equal(endpoint);
    for (const auth of [{ type: 'bearer', token: 'enc:v1:t' }, { type: 'basic', username: 'u', password: 'enc:v1:p' }] as const) {
      expect(endpointFromDoc(endpointToDoc({ ...endpoint, auth }))).to.deep.equal({ ...endpoint, auth });
    }
    const { headers: _, auth: __, ...plain } = endpoint;
    expect(endpointToDoc(plain)).to.include({ headers: null, auth: null });
    expect(endpointFromDoc(endpointToDoc(plain))).to.deep.equal(plain);
    const { headers: ___, auth: ____, ...older } = endpointToDoc(plain);
    expect(endpointFromDoc(older)).to.deep.equal(plain);
  });

  it('writes new events unfanned, in insertion order, and reads back only the model\'s fields', () => {
    const event: OutboxEvent = { id: 'evt_1', tenantId: 'acme', type: 't', payload: '{"a":1}', createdAt: NOW, endpointId: null, orderingKey: null };
    const first = eventToDoc(event);
    const second = eventToDoc({ ...event, id: 'evt_2' });
    expect(first).to.include({ _id: 'evt_1', fannedOut: false, fannedOutAt: null });
    expect(first.ord.toHexString() < second.ord.toHexString()).to.equal(true);
    expect(eventFromDoc(first)).to.deep.equal({ ...event, traceContext: null });
  });

  it('stores a trace context only when the event has one, and reads a missing one as none', () => {
    const event: OutboxEvent = { id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: NOW, endpointId: null, orderingKey: null, traceContext: null };
    expect(eventToDoc(event)).to.not.have.property('traceContext');
    expect(eventFromDoc(eventToDoc(event))).to.deep.equal(event);
    const traceContext = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=a1' };
    expect(eventToDoc({ ...event, traceContext }).traceContext).to.deep.equal(traceContext);
    expect(eventFromDoc(eventToDoc({ ...event, traceContext }))).to.deep.equal({ ...event, traceContext });
    const parentOnly = { traceparent: traceContext.traceparent };
    expect(eventFromDoc(eventToDoc({ ...event, traceContext: parentOnly }))).to.deep.equal({ ...event, traceContext: parentOnly });
  });

  it('creates deliveries pending at attempt 0, round 0, epoch 0, and reads them without driver fields', () => {
    const doc = newDeliveryDoc({
      id: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: 3, nextAttemptAt: NOW + 1, createdAt: NOW,
      orderingKey: 'order-7',
    }, 12);
    expect(doc).to.include({ status: 'pending', attempts: 0, round: 0, leaseEpoch: 0, updatedAt: NOW, lastError: null, deliveredAt: null });
    expect(deliveryFromDoc({ ...doc, claimId: new ObjectId(), wokeAt: NOW })).to.deep.equal({
      id: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: 3, status: 'pending',
      attempts: 0, round: 0, nextAttemptAt: NOW + 1, leaseEpoch: 0, lastError: null, createdAt: NOW, updatedAt: NOW, deliveredAt: null,
      sequence: 12, orderingKey: 'order-7',
    });
  });

  it('numbers attempts as the store says, dates them for the TTL index, and lists a dead letter\'s round', () => {
    const outcome = { kind: 'timeout', timeoutMs: 10 } as const;
    const doc = attemptToDoc('dlv_1', { number: 9, startedAt: NOW, durationMs: 10, outcome, error: 'timeout' }, 2, 1);
    expect(doc).to.include({ deliveryId: 'dlv_1', number: 2, round: 1 });
    expect(doc.at.getTime()).to.equal(NOW);
    const attempt = attemptFromDoc(doc);
    expect(attempt).to.deep.equal({ deliveryId: 'dlv_1', number: 2, round: 1, startedAt: NOW, durationMs: 10, outcome, error: 'timeout' });
    const dead = deadLetterFromDoc(
      {
        _id: 'dl_1', deliveryId: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', payload: '{}',
        reason: 'exhausted', lastOutcome: outcome, round: 1, createdAt: NOW, replayedAt: null, ord: new ObjectId(), at: new Date(NOW),
        triage: { state: 'acknowledged', note: 'looking', by: 'alice', at: NOW + 5 },
      },
      [doc],
    );
    expect(dead).to.deep.equal({
      id: 'dl_1', deliveryId: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', payload: '{}',
      reason: 'exhausted', lastOutcome: outcome, attempts: [attempt], createdAt: NOW, replayedAt: null,
      triage: { state: 'acknowledged', note: 'looking', by: 'alice', at: NOW + 5 },
    });
  });

  it('reads a dead letter written before triage existed as the migration will leave it: new, or replayed since its replay', () => {
    expect(triageFromDoc({ createdAt: NOW, replayedAt: null } as { createdAt: number; replayedAt: null; triage: never })).to.deep.equal({ state: 'new', note: null, by: null, at: NOW });
    expect(triageFromDoc({ createdAt: NOW, replayedAt: NOW + 9 } as { createdAt: number; replayedAt: number; triage: never })).to.deep.equal({ state: 'replayed', note: null, by: null, at: NOW + 9 });
    expect(legacyTriage({ createdAt: NOW, replayedAt: NOW + 9 })).to.deep.equal({ state: 'replayed', note: null, by: null, at: NOW + 9 });
  });

  it('maps leases and nodes', () => {
    expect(leaseFromDoc({ _id: 4, owner: 'a', until: NOW, epoch: 2 })).to.deep.equal({ slot: 4, owner: 'a', until: NOW, epoch: 2 });
    expect(nodeFromDoc({ _id: 'n', startedAt: 1, seenAt: 2, inFlight: 4, clockOffsetMs: -30_000 })).to.deep.equal({
      id: 'n', startedAt: 1, seenAt: 2, inFlight: 4, clockOffsetMs: -30_000,
    });
    // Written before schema 13: no figures, read as 0.
    expect(nodeFromDoc({ _id: 'n', startedAt: 1, seenAt: 2 })).to.deep.equal({ id: 'n', startedAt: 1, seenAt: 2, inFlight: 0, clockOffsetMs: 0 });
  });
});
