/**
 * The crash test every store runs with real processes: 5 000 events to 50
 * endpoints through a cluster of Herald nodes, one of them killed with SIGKILL
 * once 1 500 requests have arrived. Every event must be delivered, and a
 * request sent twice must be one the killed node had in flight (first sent
 * before the kill) or one whose settle a survivor saw fenced.
 */
import { expect } from 'chai';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { startServer, type TestServer } from './harness.ts';
import type { NodeProcess } from './node-process.ts';

const ENDPOINTS = 50;
const EVENTS = 5_000;
const BATCH = 500;

/** A sink answering 200 that records when each `webhook-id` arrived. */
export interface RecordingSink {
  readonly sink: TestServer;
  readonly seenAt: Map<string, number[]>;
}

export async function recordingSink(): Promise<RecordingSink> {
  const seenAt = new Map<string, number[]>();
  const sink = await startServer((request) => {
    const id = String(request.headers['webhook-id']);
    const times = seenAt.get(id) ?? [];
    times.push(Date.now());
    seenAt.set(id, times);
    return { status: 200 };
  });
  return { sink, seenAt };
}

/** Resolves once every id has reached the sink. */
export async function allSeen(sink: TestServer, seenAt: ReadonlyMap<string, unknown>, ids: readonly string[]): Promise<void> {
  for (let seen = sink.received.length; !ids.every((id) => seenAt.has(id)); seen++) await sink.requests(seen + 1);
}

/** Creates the endpoints (through a Herald that is never started) before the nodes start. */
export async function createEndpoints(overrides: ConfigOverrides, sink: TestServer): Promise<void> {
  const setup = await Herald.open(resolveConfig(overrides));
  try {
    for (let e = 0; e < ENDPOINTS; e++) await setup.createEndpoint({ tenantId: `t${e}`, url: `${sink.url}/e${e}` });
  } finally {
    await setup.close();
  }
}

export interface KillOutcome {
  readonly killedAt: number;
  /** Requests sent more than once, and those of them first sent before the kill. */
  readonly duplicates: number;
  readonly inFlightAtKill: number;
}

/**
 * Publishes the events, kills `nodes[0]` (removed from the list) with SIGKILL, runs `afterKill`
 * (e.g. waiting for the survivors to cover its slots), waits for every event, stops the survivors
 * (removed from the list) and checks what arrived.
 */
export async function deliverThroughAKill(
  overrides: ConfigOverrides,
  nodes: NodeProcess[],
  { sink, seenAt }: RecordingSink,
  afterKill: () => Promise<void> = async () => {},
): Promise<KillOutcome> {
  const publisher = await Herald.open(resolveConfig(overrides));
  const ids: string[] = [];
  try {
    for (let from = 0; from < EVENTS; from += BATCH) {
      const events = Array.from({ length: BATCH }, (_, i) => ({ tenantId: `t${(from + i) % ENDPOINTS}`, type: 'a.b', payload: { n: from + i } }));
      ids.push(...(await publisher.publish(events)).map((e) => e.id));
    }
  } finally {
    await publisher.close();
  }

  await sink.requests(1_500);
  const victim = nodes.shift() as NodeProcess;
  await victim.stop('SIGKILL');
  const killedAt = Date.now();
  await afterKill();

  await allSeen(sink, seenAt, ids);
  const survivors = nodes.splice(0);
  await Promise.all(survivors.map((n) => n.stop('SIGTERM')));

  const check = await Herald.open(resolveConfig(overrides));
  try {
    expect((await check.store.countDeliveries()).delivered).to.equal(EVENTS);
  } finally {
    await check.close();
  }
  const fenced = new Set(survivors.flatMap((n) => [...n.fenced]));
  const duplicates = [...seenAt].filter(([, times]) => times.length > 1);
  for (const [id, times] of duplicates) {
    expect((times[0] ?? 0) <= killedAt || fenced.has(id), `${id} sent twice for no reason`).to.equal(true);
  }
  const inFlightAtKill = duplicates.filter(([, times]) => (times[0] ?? 0) <= killedAt).length;
  return { killedAt, duplicates: duplicates.length, inFlightAtKill };
}
