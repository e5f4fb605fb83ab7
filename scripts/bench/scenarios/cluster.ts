/**
 * Cluster: the throughput scenario (100 endpoints, 1 KiB bodies, signing on,
 * sink answering 200 at once) delivered by 2 Herald processes sharing one
 * SQLite file, against 1 process on the same machine in the same run.
 * Delivered events/s from the first publish to the last delivery reported.
 *
 * Each node is a forked process (scripts/bench/cluster-node.ts) with a short
 * lease (renewal 250 ms), so the two share the slots before the events are
 * published; the events are then written by a producer connection in this
 * process, which the nodes see through the store's watch. Duplicates (requests
 * beyond one per event) are reported: a slot changing hands mid-run resends
 * what was in flight, by design.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { resolveConfig } from '../../../lib/config/config.ts';
import { Herald } from '../../../lib/herald.ts';
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { closeChild, payloadOf, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const ENDPOINTS = 100;
const BODY_BYTES = 1024;
const PUBLISH_BATCH = 1_000;
const NODE_FILE = fileURLToPath(new URL('../cluster-node.ts', import.meta.url));

interface ClusterNode {
  slots: number;
  delivered: number;
  readonly child: ChildProcess;
  close(): Promise<void>;
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const timeoutMs = options.quick ? 25_000 : 180_000;
  const sink = await startSinkProcess({ record: 'count' });
  try {
    const runs: Record<number, { eventsPerSec: number; seconds: number; sinkRequests: number; slotsPerNode: number[] }> = {};
    for (const nodes of [1, 2]) {
      progress(`${nodes} process${nodes === 1 ? '' : 'es'}: ${events} events over ${ENDPOINTS} endpoints`);
      const measured = await clusterRun(sink.url, nodes, events, timeoutMs);
      runs[nodes] = { ...measured, sinkRequests: (await sink.take()).count };
    }
    const one = runs[1]!;
    const two = runs[2]!;
    return {
      events,
      endpoints: ENDPOINTS,
      oneProcessPerSec: round(one.eventsPerSec, 0),
      twoProcessesPerSec: round(two.eventsPerSec, 0),
      ratio: round(two.eventsPerSec / one.eventsPerSec, 3),
      slotsPerNode: two.slotsPerNode,
      duplicates: { oneProcess: one.sinkRequests - events, twoProcesses: two.sinkRequests - events },
      runSeconds: { oneProcess: round(one.seconds, 2), twoProcesses: round(two.seconds, 2) },
      target: 'report (2 processes against 1)',
      met: null,
    };
  } finally {
    await sink.close();
  }
}

async function clusterRun(origin: string, nodeCount: number, events: number, timeoutMs: number) {
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-cluster-'));
  const dbPath = join(dataDir, 'herald.db');
  const overrides = {
    store: `sqlite:${dbPath}`,
    dataDir,
    port: 0,
    allowNetworks: ['127.0.0.0/8'],
    logLevel: 'silent',
    engine: { renewIntervalMs: 250, leaseMs: 3_000 },
  } as const;
  // Endpoints first, by a Herald that is never started (it takes no slot).
  const setup = await Herald.open(resolveConfig(overrides));
  const endpointIds: string[] = [];
  for (let i = 0; i < ENDPOINTS; i++) endpointIds.push((await setup.createEndpoint({ tenantId: 'bench', url: `${origin}/ep/${i}` })).endpoint.id);
  await setup.close();

  const nodes: ClusterNode[] = [];
  const producer = new Database(dbPath);
  producer.pragma('busy_timeout = 5000');
  try {
    for (let i = 0; i < nodeCount; i++) nodes.push(startNode(overrides));
    const shared = await waitFor(() => nodes.every((node) => node.slots > 0) && nodes.reduce((sum, node) => sum + node.slots, 0) === 256, 30_000, 50);
    if (!shared) throw new Error(`the nodes did not share the slots within 30 s (${nodes.map((n) => n.slots).join(' + ')})`);
    // Let a rebalance that is still settling finish before the clock starts.
    await sleep(1_000);
    const slotsPerNode = nodes.map((node) => node.slots);

    const started = performance.now();
    for (let from = 0; from < events; from += PUBLISH_BATCH) {
      const batch = [];
      for (let n = from; n < Math.min(events, from + PUBLISH_BATCH); n++) {
        batch.push({ tenantId: 'bench', type: 'bench.event', endpointId: endpointIds[n % ENDPOINTS]!, payload: payloadOf(BODY_BYTES, n) });
      }
      publish(producer, batch, {});
      await new Promise((resolve) => setImmediate(resolve));
    }
    let lastReport = 0;
    const total = (): number => nodes.reduce((sum, node) => sum + node.delivered, 0);
    const done = await waitFor(() => {
      if (total() - lastReport >= events / 5) {
        lastReport = total();
        progress(`${nodeCount} process${nodeCount === 1 ? '' : 'es'}: ${lastReport}/${events} delivered`);
      }
      return total() >= events;
    }, timeoutMs, 20);
    const seconds = (performance.now() - started) / 1000;
    if (!done) throw new Error(`${nodeCount} process(es) delivered ${total()}/${events} within ${timeoutMs / 1000} s`);
    return { eventsPerSec: events / seconds, seconds, slotsPerNode };
  } finally {
    await Promise.all(nodes.map((node) => node.close()));
    producer.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function startNode(overrides: object): ClusterNode {
  const child = fork(NODE_FILE, [JSON.stringify(overrides)], {
    execArgv: process.execArgv.filter((arg) => !arg.startsWith('--cpu-prof') && arg !== '--expose-gc'),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const node: ClusterNode = {
    slots: 0,
    delivered: 0,
    child,
    close: () => closeChild(child, 10_000),
  };
  child.on('message', (message: { type: string; count: number }) => {
    if (message.type === 'slots') node.slots = message.count;
    else if (message.type === 'delivered') node.delivered = message.count;
  });
  return node;
}
