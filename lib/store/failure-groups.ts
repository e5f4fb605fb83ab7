/**
 * Failures grouped into issues: the deliveries waiting for a retry after a failed attempt and
 * the open dead letters, by endpoint and failure kind (`lib/policy/failure-kind.ts`). Each store
 * counts both sides with a GROUP BY over an index; the rules to put the two together, cap them
 * and pick each group's sample are here, pure and shared by every store.
 */
import type { Outcome } from '../model.ts';
import { describeOutcome } from '../policy/classify.ts';
import type { FailureKind } from '../policy/failure-kind.ts';

/** `failureGroups`' filter. */
export interface FailureGroupFilter {
  readonly endpointId?: string;
  readonly tenantId?: string;
  /** The most groups returned, the largest first. @default 100 (at most 1 000) */
  readonly limit?: number;
}

/** One group: an endpoint and a failure kind. */
export interface FailureGroupKey {
  readonly endpointId: string;
  readonly kind: FailureKind | string;
}

/** One side of a group, as a store counts it. */
export interface FailureGroupCount extends FailureGroupKey {
  readonly tenantId: string;
  readonly count: number;
  /** The earliest of the failures' times (a retrying delivery's last failed attempt, a dead letter's creation). */
  readonly firstSeen: number;
  /** The latest of them. */
  readonly lastSeen: number;
}

/** The outcome of a group's latest failure, shortened. */
export interface FailureSample {
  /** `HTTP 503`, `timeout after 10 s`, `ECONNREFUSED: …` */
  readonly summary: string;
  /** The HTTP status, for a response. */
  readonly status: number | null;
  /** The first {@link SAMPLE_BODY_CHARS} characters of the response body, for a response. */
  readonly body: string | null;
}

export interface FailureGroup extends FailureGroupKey {
  readonly tenantId: string;
  /** Deliveries waiting for a retry (`retrying`), open dead letters (`dead`), and both. */
  readonly count: { readonly retrying: number; readonly dead: number; readonly total: number };
  readonly firstSeen: number;
  readonly lastSeen: number;
  /** The latest failure's outcome; `null` when it could not be read (purged meanwhile). */
  readonly sample: FailureSample | null;
}

/** What replaying a group did. */
export interface FailureGroupReplay {
  /** Open dead letters replayed (their deliveries pending again, due now, a new round). */
  readonly deadLetters: number;
  /** Retrying deliveries made due now. */
  readonly retrying: number;
}

/** Where a group's latest failure is: a retrying delivery's last attempt, or a dead letter. */
export type SampleSource = 'retrying' | 'dead';

/** A group before its sample is read. */
export interface UnsampledGroup extends Omit<FailureGroup, 'sample'> {
  readonly sampleFrom: SampleSource;
}

export const DEFAULT_FAILURE_GROUPS_LIMIT = 100;
export const MAX_FAILURE_GROUPS_LIMIT = 1_000;
/** How much of a response body a sample keeps. */
export const SAMPLE_BODY_CHARS = 200;

/** The filter's limit, whole, within 1 and {@link MAX_FAILURE_GROUPS_LIMIT}. */
export function failureGroupsLimit(filter: FailureGroupFilter): number {
  const limit = Math.floor(filter.limit ?? DEFAULT_FAILURE_GROUPS_LIMIT);
  return Number.isFinite(limit) ? Math.min(MAX_FAILURE_GROUPS_LIMIT, Math.max(1, limit)) : DEFAULT_FAILURE_GROUPS_LIMIT;
}

/**
 * Puts the two sides together by (endpoint, kind) and keeps the `limit` largest groups: the most
 * failures first, then the latest, then by endpoint and kind (a stable order).
 */
export function mergeFailureGroups(
  retrying: readonly FailureGroupCount[],
  dead: readonly FailureGroupCount[],
  limit: number,
): UnsampledGroup[] {
  const groups = new Map<string, UnsampledGroup>();
  const add = (side: SampleSource, row: FailureGroupCount): void => {
    const key = `${row.endpointId}\0${row.kind}`;
    const count = Number(row.count);
    const firstSeen = Number(row.firstSeen);
    const lastSeen = Number(row.lastSeen);
    const found = groups.get(key);
    if (found === undefined) {
      groups.set(key, {
        endpointId: row.endpointId,
        tenantId: row.tenantId,
        kind: row.kind,
        count: { retrying: side === 'retrying' ? count : 0, dead: side === 'dead' ? count : 0, total: count },
        firstSeen,
        lastSeen,
        sampleFrom: side,
      });
      return;
    }
    groups.set(key, {
      ...found,
      count: {
        retrying: found.count.retrying + (side === 'retrying' ? count : 0),
        dead: found.count.dead + (side === 'dead' ? count : 0),
        total: found.count.total + count,
      },
      firstSeen: Math.min(found.firstSeen, firstSeen),
      lastSeen: Math.max(found.lastSeen, lastSeen),
      sampleFrom: lastSeen > found.lastSeen ? side : found.sampleFrom,
    });
  };
  for (const row of retrying) add('retrying', row);
  for (const row of dead) add('dead', row);
  return [...groups.values()].sort(largestFirst).slice(0, limit);
}

function largestFirst(a: UnsampledGroup, b: UnsampledGroup): number {
  return (
    b.count.total - a.count.total ||
    b.lastSeen - a.lastSeen ||
    (a.endpointId < b.endpointId ? -1 : a.endpointId > b.endpointId ? 1 : 0) ||
    (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0)
  );
}

/** An outcome as a group's sample. */
export function failureSample(outcome: Outcome): FailureSample {
  return outcome.kind === 'response'
    ? { summary: describeOutcome(outcome), status: outcome.status, body: outcome.body.slice(0, SAMPLE_BODY_CHARS) }
    : { summary: describeOutcome(outcome), status: null, body: null };
}

/**
 * Reads each group's sample (one indexed read a group, the groups being capped), through the
 * store's `latest`: the outcome of the group's latest failure on the side named.
 */
export async function withSamples(
  groups: readonly UnsampledGroup[],
  latest: (source: SampleSource, key: FailureGroupKey) => Promise<Outcome | undefined>,
): Promise<FailureGroup[]> {
  const sampled: FailureGroup[] = [];
  for (const group of groups) {
    sampled.push(sampledGroup(group, await latest(group.sampleFrom, { endpointId: group.endpointId, kind: group.kind })));
  }
  return sampled;
}

/** The group with its sample: the outcome of its latest failure, or none when it could not be read. */
export function sampledGroup({ sampleFrom: _source, ...group }: UnsampledGroup, outcome: Outcome | undefined): FailureGroup {
  return { ...group, sample: outcome === undefined ? null : failureSample(outcome) };
}
