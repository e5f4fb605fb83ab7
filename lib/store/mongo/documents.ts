/**
 * Documents ⇄ Herald's model. Pure: every field is copied by name, so a
 * document read back gives exactly the value written (nulls included) and no
 * driver field (`_id`, `ord`, `at`, `claimId`, …) leaks into the model.
 */
import type { ObjectId } from 'mongodb';
import type { Attempt, ClientTls, DeadLetter, Delivery, DeliveryStatus, Endpoint, EndpointAuth, EndpointHeader, OutboxEvent, PayloadFilter, SigningSecret, TraceContext, Triage } from '../../model.ts';
import { EndpointOrdering, EndpointStatus } from '../../model.ts';
import type { AttemptRecord, NewDelivery, NodeRecord, SlotLease } from '../port.ts';
import { newObjectId } from './driver.ts';
import { legacyTriage, type AttemptDoc, type AuthDoc, type HeaderDoc, type DeadLetterDoc, type DeliveryDoc, type EndpointDoc, type EventDoc, type LeaseDoc, type NodeDoc } from './schema.ts';

export function endpointToDoc(endpoint: Endpoint): EndpointDoc {
  return {
    _id: endpoint.id,
    tenantId: endpoint.tenantId,
    url: endpoint.url,
    description: endpoint.description,
    eventTypes: [...endpoint.eventTypes],
    retry: structuredClone(endpoint.retry),
    timeoutMs: endpoint.timeoutMs,
    mode: endpoint.mode,
    ordering: endpoint.ordering,
    concurrency: endpoint.concurrency,
    rateLimit: endpoint.rateLimit === undefined ? null : { perSecond: endpoint.rateLimit.perSecond, burst: endpoint.rateLimit.burst },
    adaptiveConcurrency:
      endpoint.adaptiveConcurrency === undefined
        ? null
        : { initial: endpoint.adaptiveConcurrency.initial, targetLatencyMs: endpoint.adaptiveConcurrency.targetLatencyMs },
    payloadFilter: endpoint.filter === undefined ? null : JSON.stringify(endpoint.filter),
    headers: headersToDoc(endpoint.headers ?? null),
    auth: authToDoc(endpoint.auth ?? null),
    clientTls: endpoint.clientTls === undefined ? null : clientTlsCopy(endpoint.clientTls),
    status: endpoint.status,
    disabledReason: endpoint.disabledReason,
    failingSince: endpoint.failingSince,
    secrets: endpoint.secrets.map(secretDoc),
    createdAt: endpoint.createdAt,
    updatedAt: endpoint.updatedAt,
  };
}

/** A signing secret as stored: the public key of an ed25519 key beside it, none for an HMAC one. */
export function secretDoc(s: SigningSecret): SigningSecret {
  return { secret: s.secret, createdAt: s.createdAt, expiresAt: s.expiresAt, ...(s.publicKey === undefined ? {} : { publicKey: s.publicKey }) };
}

export function endpointFromDoc(doc: EndpointDoc): Endpoint {
  return {
    id: doc._id,
    tenantId: doc.tenantId,
    url: doc.url,
    description: doc.description,
    eventTypes: [...doc.eventTypes],
    retry: structuredClone(doc.retry),
    timeoutMs: doc.timeoutMs,
    mode: doc.mode === 'at-most-once' ? 'at-most-once' : 'at-least-once',
    ordering: doc.ordering === EndpointOrdering.FIFO ? EndpointOrdering.FIFO : EndpointOrdering.NONE,
    concurrency: doc.concurrency,
    status: doc.status === EndpointStatus.ENABLED ? EndpointStatus.ENABLED : EndpointStatus.DISABLED,
    disabledReason: doc.disabledReason ?? null,
    failingSince: doc.failingSince ?? null,
    secrets: doc.secrets.map((s) => ({
      secret: s.secret,
      createdAt: s.createdAt,
      expiresAt: s.expiresAt ?? null,
      ...(typeof s.publicKey === 'string' ? { publicKey: s.publicKey } : {}),
    })),
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
    ...(doc.rateLimit === null || doc.rateLimit === undefined
      ? {}
      : { rateLimit: { perSecond: doc.rateLimit.perSecond, burst: doc.rateLimit.burst } }),
    ...(doc.adaptiveConcurrency === null || doc.adaptiveConcurrency === undefined
      ? {}
      : { adaptiveConcurrency: { initial: doc.adaptiveConcurrency.initial, targetLatencyMs: doc.adaptiveConcurrency.targetLatencyMs } }),
    ...(doc.payloadFilter === null || doc.payloadFilter === undefined ? {} : { filter: JSON.parse(doc.payloadFilter) as PayloadFilter }),
    ...(doc.headers === null || doc.headers === undefined ? {} : { headers: doc.headers.map((h) => ({ name: h.name, value: h.value, secret: h.secret })) }),
    ...(doc.auth === null || doc.auth === undefined ? {} : { auth: authFromDoc(doc.auth) }),
    ...(doc.clientTls === null || doc.clientTls === undefined ? {} : { clientTls: clientTlsCopy(doc.clientTls) }),
  };
}

/** A client certificate copied field by field (its key stays sealed). */
export function clientTlsCopy(tls: ClientTls): ClientTls {
  return {
    cert: tls.cert,
    key: tls.key,
    passphrase: tls.passphrase ?? null,
    subject: tls.subject,
    issuer: tls.issuer,
    fingerprint: tls.fingerprint,
    notAfter: tls.notAfter,
  };
}

export function headersToDoc(headers: readonly EndpointHeader[] | null): HeaderDoc[] | null {
  return headers === null ? null : headers.map((h) => ({ name: h.name, value: h.value, secret: h.secret }));
}

export function authToDoc(auth: EndpointAuth | null): AuthDoc | null {
  if (auth === null) return null;
  const none = { token: null, username: null, password: null, tokenUrl: null, clientId: null, clientSecret: null, scope: null, audience: null };
  switch (auth.type) {
    case 'bearer':
      return { type: auth.type, ...none, token: auth.token };
    case 'basic':
      return { type: auth.type, ...none, username: auth.username, password: auth.password };
    case 'oauth2':
      return {
        type: auth.type,
        ...none,
        tokenUrl: auth.tokenUrl,
        clientId: auth.clientId,
        clientSecret: auth.clientSecret,
        scope: auth.scope ?? null,
        audience: auth.audience ?? null,
      };
  }
}

function authFromDoc(doc: AuthDoc): EndpointAuth {
  switch (doc.type) {
    case 'bearer':
      return { type: 'bearer', token: doc.token ?? '' };
    case 'basic':
      return { type: 'basic', username: doc.username ?? '', password: doc.password ?? '' };
    default:
      return {
        type: 'oauth2',
        tokenUrl: doc.tokenUrl ?? '',
        clientId: doc.clientId ?? '',
        clientSecret: doc.clientSecret ?? '',
        ...(doc.scope === null ? {} : { scope: doc.scope }),
        ...(doc.audience === null ? {} : { audience: doc.audience }),
      };
  }
}

/** A new outbox document; `ord` defaults to a fresh ObjectId (insertion order within this process). */
export function eventToDoc(event: OutboxEvent, ord: ObjectId = newObjectId()): EventDoc {
  return {
    _id: event.id,
    tenantId: event.tenantId,
    type: event.type,
    payload: event.payload,
    createdAt: event.createdAt,
    endpointId: event.endpointId,
    orderingKey: event.orderingKey,
    fannedOut: false,
    fannedOutAt: null,
    ord,
    ...(event.traceContext === null || event.traceContext === undefined ? {} : { traceContext: traceContextDoc(event.traceContext) }),
  };
}

/** A trace context as stored: `tracestate` only when there is one. */
function traceContextDoc(traceContext: TraceContext): TraceContext {
  const { traceparent, tracestate } = traceContext;
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

export function eventFromDoc(doc: EventDoc): OutboxEvent {
  return {
    id: doc._id,
    tenantId: doc.tenantId,
    type: doc.type,
    payload: doc.payload,
    createdAt: doc.createdAt,
    endpointId: doc.endpointId ?? null,
    orderingKey: doc.orderingKey ?? null,
    traceContext: doc.traceContext === null || doc.traceContext === undefined ? null : traceContextDoc(doc.traceContext),
  };
}

/**
 * A delivery as fan-out creates it: pending, attempt 0, round 0, epoch 0; or,
 * claimed on creation, in flight at the slot's epoch since `claimed.now`.
 */
export function newDeliveryDoc(d: NewDelivery, sequence: number, claimed?: { readonly epoch: number; readonly now: number }): DeliveryDoc {
  return {
    _id: d.id,
    eventId: d.eventId,
    endpointId: d.endpointId,
    tenantId: d.tenantId,
    eventType: d.eventType,
    slot: d.slot,
    status: claimed === undefined ? 'pending' : 'in_flight',
    attempts: 0,
    round: 0,
    nextAttemptAt: d.nextAttemptAt,
    leaseEpoch: claimed?.epoch ?? 0,
    lastError: null,
    createdAt: d.createdAt,
    updatedAt: claimed?.now ?? d.createdAt,
    deliveredAt: null,
    sequence,
    orderingKey: d.orderingKey,
  };
}

export function deliveryFromDoc(doc: DeliveryDoc): Delivery {
  return {
    id: doc._id,
    eventId: doc.eventId,
    endpointId: doc.endpointId,
    tenantId: doc.tenantId,
    eventType: doc.eventType,
    slot: doc.slot,
    status: doc.status as DeliveryStatus,
    attempts: doc.attempts,
    round: doc.round,
    nextAttemptAt: doc.nextAttemptAt,
    leaseEpoch: doc.leaseEpoch,
    lastError: doc.lastError ?? null,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
    deliveredAt: doc.deliveredAt ?? null,
    sequence: doc.sequence ?? null,
    orderingKey: doc.orderingKey ?? null,
  };
}

/** The attempt a settle writes: numbered by the store, in the delivery's current round. */
export function attemptToDoc(deliveryId: string, attempt: AttemptRecord, number: number, round: number): AttemptDoc {
  return {
    deliveryId,
    number,
    round,
    startedAt: attempt.startedAt,
    durationMs: attempt.durationMs,
    outcome: attempt.outcome,
    error: attempt.error,
    at: new Date(attempt.startedAt),
  };
}

export function attemptFromDoc(doc: AttemptDoc): Attempt {
  return {
    deliveryId: doc.deliveryId,
    number: doc.number,
    round: doc.round,
    startedAt: doc.startedAt,
    durationMs: doc.durationMs,
    outcome: doc.outcome,
    error: doc.error ?? null,
  };
}

export function deadLetterFromDoc(doc: DeadLetterDoc, attempts: readonly AttemptDoc[]): DeadLetter {
  return {
    id: doc._id,
    deliveryId: doc.deliveryId,
    eventId: doc.eventId,
    endpointId: doc.endpointId,
    tenantId: doc.tenantId,
    eventType: doc.eventType,
    payload: doc.payload,
    reason: doc.reason,
    lastOutcome: doc.lastOutcome,
    attempts: attempts.map(attemptFromDoc),
    createdAt: doc.createdAt,
    replayedAt: doc.replayedAt ?? null,
    triage: triageFromDoc(doc),
  };
}

/** A dead letter's triage; one the version-2 migration has not reached yet reads as it will be migrated. */
export function triageFromDoc(doc: Pick<DeadLetterDoc, 'triage' | 'createdAt' | 'replayedAt'>): Triage {
  const triage = (doc.triage as DeadLetterDoc['triage'] | undefined) ?? legacyTriage(doc);
  return { state: triage.state, note: triage.note ?? null, by: triage.by ?? null, at: triage.at };
}

export function leaseFromDoc(doc: LeaseDoc): SlotLease {
  return { slot: doc._id, owner: doc.owner ?? '', until: doc.until, epoch: doc.epoch };
}

export function nodeFromDoc(doc: NodeDoc): NodeRecord {
  return { id: doc._id, startedAt: doc.startedAt, seenAt: doc.seenAt, inFlight: doc.inFlight ?? 0, clockOffsetMs: doc.clockOffsetMs ?? 0 };
}
