/**
 * The PostgreSQL store's queries, each concern's in its module, built once for the schema
 * Herald's tables live in (their statements name it).
 */
import { ClaimQueries } from './claims.ts';
import { DeadLetterQueries } from './dead-letters.ts';
import { DeliveryLogQueries } from './delivery-log.ts';
import { DeliveryMinuteQueries } from './delivery-minutes.ts';
import { EndpointChangeQueries } from './endpoint-changes.ts';
import { EndpointQueries } from './endpoints.ts';
import { EventTypeQueries } from './event-types.ts';
import { FailureGroupQueries } from './failure-groups.ts';
import { FanOutQueries } from './fan-out.ts';
import { LeaseQueries } from './leases.ts';
import { ReplayJobQueries } from './replay-jobs.ts';
import { RetentionQueries } from './retention.ts';
import { SettleQueries } from './settle.ts';
import { TenantTokenQueries } from './tenant-tokens.ts';

export interface PostgresQueries {
  readonly endpoints: EndpointQueries;
  readonly endpointChanges: EndpointChangeQueries;
  readonly fanOut: FanOutQueries;
  readonly leases: LeaseQueries;
  readonly claims: ClaimQueries;
  readonly settle: SettleQueries;
  readonly log: DeliveryLogQueries;
  readonly deadLetters: DeadLetterQueries;
  readonly failures: FailureGroupQueries;
  readonly retention: RetentionQueries;
  readonly tenantTokens: TenantTokenQueries;
  readonly eventTypes: EventTypeQueries;
  readonly replayJobs: ReplayJobQueries;
  readonly minutes: DeliveryMinuteQueries;
}

export function queriesFor(schema: string): PostgresQueries {
  const endpointChanges = new EndpointChangeQueries(schema);
  return {
    endpoints: new EndpointQueries(schema, endpointChanges),
    endpointChanges,
    fanOut: new FanOutQueries(schema),
    leases: new LeaseQueries(schema),
    claims: new ClaimQueries(schema),
    settle: new SettleQueries(schema),
    log: new DeliveryLogQueries(schema),
    deadLetters: new DeadLetterQueries(schema),
    failures: new FailureGroupQueries(schema),
    retention: new RetentionQueries(schema),
    tenantTokens: new TenantTokenQueries(schema),
    eventTypes: new EventTypeQueries(schema),
    replayJobs: new ReplayJobQueries(schema),
    minutes: new DeliveryMinuteQueries(schema),
  };
}
