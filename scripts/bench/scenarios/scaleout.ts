/**
 * Scale-out: do nodes add up when a node's rate is bounded by its consumers,
 * not its CPU? (issue 26, item 4)
 *
 * Each node allows `delivery.maxInFlight: 8` requests at once and the sink
 * (its own process) answers every request after 50 ms, so one node delivers
 * at most 8 / 50 ms = 160/s whatever the machine; two nodes should deliver
 * twice that, three nodes three times, unless one node ends up with most of
 * the work while the others idle. A fixed backlog of events, spread evenly
 * over (a) 400 and (b) 40 endpoints, is published once 1, 2 or 3 node
 * processes (scripts/bench/cluster-node.ts) share the slots on the bench's
 * PostgreSQL (a fresh database per run); delivered/s from the first publish
 * to the last delivery. With 40 endpoints a node's share of the *work* is
 * its share of 40 busy slots among 256: shared by count, they hash unevenly.
 *
 * The last node of each run is started once the others share the slots, and
 * the time from its `herald.start()` until it holds its share of the slots
 * (⌊256 / n⌋ − 2, the balance of the count cap) is reported, in
 * milliseconds and in heartbeats.
 *
 * Goals: 2 nodes ≥ 1.8× one and 3 nodes ≥ 2.6×, with 400 and with 40
 * endpoints, in the same run; a new node holds its share within two
 * heartbeats. The load average is recorded with each run: on a shared
 * 2-core machine the nodes, the server and the sink compete for the CPU.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { resolveConfig } from '../../../lib/config/config.ts';
import { Herald } from '../../../lib/herald.ts';
import { publish as publishPostgres } from '../../../lib/producer/postgres-publish.ts';
import { PostgresUnavailableError, startPostgresServer, type PostgresServer } from '../../../test-kit/postgres-server.ts';
import { backlogBatch, preciseNow, progress, round, sleep, startClusterNode, startSinkProcess, waitFor, type ClusterNode, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { Cleanup } from '../peers/peer-kit.ts';

/** Herald's default `engine.slotCount`. */
const SLOTS = 256;
const MAX_IN_FLIGHT = 8;
const SINK_DELAY_MS = 50;
const BODY_BYTES = 256;
const PUBLISH_BATCH = 1_000;
/** The cluster scenario's heartbeat: short, so a run of a few seconds spans many of them. */
const ENGINE = { renewIntervalMs: 250, leaseMs: 3_000 } as const;
const GOALS = { twoToOne: 1.8, threeToOne: 2.6, joinHeartbeats: 2 } as const;
/** A node holds its share once it has this many fewer slots than ⌊slots / nodes⌋ at most (the count cap's balance). */
const SHARE_SLACK = 2;

interface Plan {
  readonly events: number;
  readonly endpointCounts: readonly number[];
  readonly nodeCounts: readonly number[];
}

const FULL: Plan = { events: 3_200, endpointCounts: [400, 40], nodeCounts: [1, 2, 3] };
/** A smoke run under the runner's 60 s. */
const QUICK: Plan = { events: 640, endpointCounts: [40], nodeCounts: [1, 2] };

interface RunFigures {
  readonly endpoints: number;
  readonly nodes: number;
  readonly deliveredPerSec: number;
  readonly seconds: number;
  readonly deliveredPerNode: number[];
  readonly slotsPerNode: number[];
  readonly duplicates: number;
  /** Changes of a node's slot count between the first publish and the last delivery: slots that moved with the work. */
  readonly slotChangesDuringRun: number;
  /** The last node started: from its `herald.start()` until it held its share of the slots. */
  readonly joinMs?: number;
  readonly joinHeartbeats?: number;
  readonly loadAverage: readonly number[];
}

type Sink = Awaited<ReturnType<typeof startSinkProcess>>;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const plan = options.quick ? QUICK : FULL;
  const cleanup = new Cleanup();
  const sink = await startSinkProcess({ record: 'count', delayMs: SINK_DELAY_MS });
  try {
    let server: PostgresServer;
    try {
      server = await startPostgresServer({ cleanup });
    } catch (error) {
      if (error instanceof PostgresUnavailableError) return { skipped: error.message, met: false };
      throw error;
    }
    const version = await server.version();
    progress(`PostgreSQL ${version} on 127.0.0.1:${server.port}`);
    const runs: RunFigures[] = [];
    for (const endpoints of plan.endpointCounts) {
      for (const nodes of plan.nodeCounts) runs.push(await scaleRun(server, sink, endpoints, nodes, plan.events));
    }
    const byEndpoints: Record<string, Record<string, number | undefined>> = {};
    let met = true;
    for (const endpoints of plan.endpointCounts) {
      const rate = (nodes: number): number | undefined => runs.find((r) => r.endpoints === endpoints && r.nodes === nodes)?.deliveredPerSec;
      const one = rate(1) ?? Number.NaN;
      const ratio = (nodes: number): number | undefined => (rate(nodes) === undefined ? undefined : round(rate(nodes)! / one, 2));
      const twoToOne = ratio(2);
      const threeToOne = ratio(3);
      byEndpoints[endpoints] = { oneNodePerSec: rate(1), twoToOne, threeToOne };
      if (twoToOne !== undefined && !(twoToOne >= GOALS.twoToOne)) met = false;
      if (threeToOne !== undefined && !(threeToOne >= GOALS.threeToOne)) met = false;
    }
    const joins = runs.flatMap((r) => (r.joinHeartbeats === undefined ? [] : [r.joinHeartbeats]));
    const worstJoinHeartbeats = joins.length === 0 ? undefined : Math.max(...joins);
    if (worstJoinHeartbeats !== undefined && worstJoinHeartbeats > GOALS.joinHeartbeats) met = false;
    return {
      version,
      events: plan.events,
      maxInFlight: MAX_IN_FLIGHT,
      sinkDelayMs: SINK_DELAY_MS,
      renewIntervalMs: ENGINE.renewIntervalMs,
      byEndpoints,
      worstJoinMs: Math.max(...runs.flatMap((r) => (r.joinMs === undefined ? [] : [r.joinMs]))),
      worstJoinHeartbeats,
      runs,
      target: `2 nodes ≥ ${GOALS.twoToOne}× one, 3 nodes ≥ ${GOALS.threeToOne}×, with 400 and 40 endpoints; a new node holds its share within ${GOALS.joinHeartbeats} heartbeats`,
      met,
    };
  } finally {
    await sink.close();
    await cleanup.run();
    cleanup.dispose();
  }
}

async function scaleRun(server: PostgresServer, sink: Sink, endpointCount: number, nodeCount: number, events: number): Promise<RunFigures> {
  const name = `${endpointCount} endpoints, ${nodeCount} node${nodeCount === 1 ? '' : 's'}`;
  const url = await server.createDatabase(`herald_scaleout_${endpointCount}_${nodeCount}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-scaleout-'));
  const overrides = {
    store: url,
    dataDir,
    port: 0,
    allowNetworks: ['127.0.0.0/8'],
    logLevel: 'silent',
    delivery: { maxInFlight: MAX_IN_FLIGHT },
    engine: ENGINE,
  } as const;
  const nodes: ClusterNode[] = [];
  const producer = new pg.Client({ connectionString: url, application_name: 'bench producer' });
  try {
    // Endpoints first, by a Herald that is never started (it takes no slot).
    const setup = await Herald.open(resolveConfig(overrides));
    const endpointIds: string[] = [];
    for (let i = 0; i < endpointCount; i++) endpointIds.push((await setup.createEndpoint({ tenantId: 'bench', url: `${sink.url}/ep/${i}` })).endpoint.id);
    await setup.close();
    await producer.connect();

    const allShare = async (): Promise<void> => {
      const ok = await waitFor(() => nodes.every((n) => n.slots > 0) && nodes.reduce((sum, n) => sum + n.slots, 0) === SLOTS, 60_000, 20);
      if (!ok) throw new Error(`${name}: the nodes did not share the slots within 60 s (${nodes.map((n) => n.slots).join(' + ')})`);
    };
    for (let i = 0; i < nodeCount - 1; i++) nodes.push(startClusterNode(overrides));
    if (nodes.length > 0) await allShare();
    // The newcomer: how long from its start until it holds its share.
    const newcomer = startClusterNode(overrides);
    nodes.push(newcomer);
    const share = Math.floor(SLOTS / nodeCount) - SHARE_SLACK;
    const joined = await waitFor(() => newcomer.slots >= share, 60_000, 20);
    if (!joined) throw new Error(`${name}: the new node held ${newcomer.slots} slots after 60 s (its share ${share})`);
    const heldAt = newcomer.slotHistory.find((h) => h.slots >= share)!.at;
    const joinMs = round(heldAt - newcomer.startedAt, 0);
    await allShare();
    // Let a rebalance that is still settling finish before the clock starts.
    await sleep(1_000);
    const slotsPerNode = nodes.map((n) => n.slots);
    await sink.take();
    const loadBefore = loadavg();

    const started = preciseNow();
    for (let from = 0; from < events; from += PUBLISH_BATCH) {
      await publishPostgres(producer, backlogBatch(from, Math.min(events, from + PUBLISH_BATCH), endpointIds, BODY_BYTES));
    }
    const total = (): number => nodes.reduce((sum, n) => sum + n.delivered, 0);
    const done = await waitFor(() => total() >= events, 180_000, 20);
    if (!done) throw new Error(`${name}: ${total()}/${events} delivered within 180 s`);
    const seconds = (Math.max(...nodes.map((n) => n.deliveredAt)) - started) / 1000;
    const duplicates = (await sink.take()).count - events;
    const slotChangesDuringRun = nodes.reduce((sum, n) => sum + n.slotHistory.filter((h) => h.at > started).length, 0);
    const loadAfter = loadavg();
    const figures: RunFigures = {
      endpoints: endpointCount,
      nodes: nodeCount,
      deliveredPerSec: round(events / seconds, 0),
      seconds: round(seconds, 2),
      deliveredPerNode: nodes.map((n) => n.delivered),
      slotsPerNode,
      duplicates,
      slotChangesDuringRun,
      ...(nodeCount > 1 ? { joinMs, joinHeartbeats: round(joinMs / ENGINE.renewIntervalMs, 1) } : {}),
      loadAverage: [round(loadBefore[0]!, 2), round(loadAfter[0]!, 2)],
    };
    progress(
      `${name}: ${figures.deliveredPerSec}/s in ${figures.seconds} s, delivered per node ${figures.deliveredPerNode.join('/')}, slots ${slotsPerNode.join('/')}` +
        `${nodeCount > 1 ? `, newcomer's share after ${joinMs} ms` : ''}, slot count changes during the run ${slotChangesDuringRun}, duplicates ${duplicates}, load ${figures.loadAverage.join('→')}`,
    );
    return figures;
  } finally {
    await Promise.all(nodes.map((n) => n.close()));
    await producer.end().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
