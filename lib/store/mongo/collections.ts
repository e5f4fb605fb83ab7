/**
 * How the MongoDB store's concern modules reach the database: the open
 * store's collections, typed by their documents, and the store's way of
 * running work in one transaction (so every transaction is opened alike).
 */
import type { ClientSession, Collection } from 'mongodb';
import type {
  AttemptDoc,
  DeadLetterDoc,
  DeliveryDoc,
  DeliveryMinuteDoc,
  EndpointDoc,
  EndpointSequenceDoc,
  EventDoc,
  EventTypeDoc,
  LeaseDoc,
  MetaDoc,
  NodeDoc,
  ReplayJobDoc,
  EndpointChangeDoc,
  TenantTokenDoc,
} from './schema.ts';

/** Runs `fn` in a transaction (retried by the driver on transient errors); `fn` must pass the session on. */
export type InTransaction = <T>(fn: (session: ClientSession) => Promise<T>) => Promise<T>;

/** What the concern modules' functions take: the collections and the transaction runner. */
export interface StoreDb {
  readonly meta: Collection<MetaDoc>;
  readonly endpoints: Collection<EndpointDoc>;
  readonly events: Collection<EventDoc>;
  readonly deliveries: Collection<DeliveryDoc>;
  readonly attempts: Collection<AttemptDoc>;
  readonly deadLetters: Collection<DeadLetterDoc>;
  readonly leases: Collection<LeaseDoc>;
  readonly nodes: Collection<NodeDoc>;
  readonly tenantTokens: Collection<TenantTokenDoc>;
  readonly deliveryMinutes: Collection<DeliveryMinuteDoc>;
  readonly endpointSequences: Collection<EndpointSequenceDoc>;
  readonly replayJobs: Collection<ReplayJobDoc>;
  readonly endpointChanges: Collection<EndpointChangeDoc>;
  readonly eventTypes: Collection<EventTypeDoc>;
  readonly transaction: InTransaction;
  /** This store's mark on the events and deliveries it inserts: its change feed does not signal them back. */
  readonly origin: string;
}

/** Documents per transaction for bulk work (replay, purge). */
export const CHUNK = 500;
