/**
 * Herald's public entry: everything a producer, a consumer or an embedding
 * application uses. Inside lib/, modules import from their defining files.
 */
export { Herald, type HeraldDeps } from './herald.ts';
export type { EndpointView, SigningKeyView } from './endpoints/endpoint-admin.ts';
export type { FilterTestResult } from './endpoints/subscription.ts';
export type { ClientTlsView } from './endpoints/client-tls-input.ts';
export type { EventTypeAdmin } from './event-types/event-type-admin.ts';
export type { EventType, EventTypeVersion, JsonSchemaObject } from './store/event-type-port.ts';
export type { ReencryptOutcome } from './endpoints/secret-admin.ts';
export type { DeadLetterView } from './dead-letters/dead-letter-desk.ts';
export type { ClusterNodeStatus, StatusSnapshot } from './status/node-status.ts';
export { SecretBox, keyIdOf } from './signing/secret-box.ts';
export { SecretKeyOrigin, type SecretKeys } from './signing/secret-key-source.ts';
export { publish, type SqliteConnection } from './producer/sqlite-publish.ts';
export { publish as publishMongo, type MongoPublishOptions, type MongoOutbox, type MongoSession, type MongoDatabase, type MongoDatabaseClient } from './producer/mongo-publish.ts';
export { publish as publishPg, type PostgresPublishOptions, type SqlRunner } from './producer/postgres-publish.ts';
export { MongoStore, type MongoStoreOptions } from './store/mongo/mongo-store.ts';
export type { ChangeFeedRestart, ChangeFeedRestartReason } from './store/mongo/change-feed.ts';
export { MAX_PAYLOAD_DEPTH, type EventInput } from './producer/validate-event.ts';
export { JsonText } from './producer/json-text.ts';
export { verify, WebhookHeader, WebhookVerificationError, type VerifiedWebhook, type VerifyOptions } from './signing/verify.ts';
export { resolveConfig, readConfigFile, configFromEnv, type HeraldConfig, type ConfigOverrides } from './config/config.ts';
export { StatusServer } from './api/status-server.ts';
export { systemClock, systemRandom, ManualClock, seededRandom, type Clock, type Random, type TimerHandle } from './clock.ts';
export {
  ErrorCode,
  HeraldError,
  ValidationError,
  PayloadTooLargeError,
  NotFoundError,
  ConflictError,
  ConfigError,
  StoreError,
  BlockedAddressError,
  ProxyError,
  ClosedError,
  UnauthorizedError,
  SecretUnreadableError,
  isHeraldError,
  hasCode,
} from './errors.ts';
export type { OutboxEvent, Endpoint, Delivery, Attempt, Outcome, DeadLetter, DeliveryMode, RetrySpec, RetryFormula, RateLimit, PayloadFilter, TraceContext } from './model.ts';
export { SignatureScheme, type SigningSecret } from './model.ts';
export { DisabledReason, JitterKind, TriageState, type Triage } from './model.ts';
export type { EndpointHeader, EndpointAuth, ClientTls } from './model.ts';
export { ReplayJobState, type ReplayJob, type ReplayJobOptions } from './dead-letters/replay-jobs.ts';
export type { Store } from './store/port.ts';
export type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals, SeriesScope } from './store/delivery-minutes.ts';
export type { ClusterStats } from './status/cluster-stats.ts';
export type { EndpointRecent } from './status/endpoint-stats.ts';
export type { DeliverySeries, SeriesPoint, SeriesRequest, SeriesWindow } from './status/delivery-series.ts';
export { OperationalEventType, type OperationalEvent, type EngineEvents } from './engine/engine-events.ts';
