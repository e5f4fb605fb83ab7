/**
 * Cases where a Herald process is killed or frozen mid-delivery:
 *
 *   sigkill  5 000 events to 20 endpoints; SIGKILL 10 times at random points,
 *            restart on the same file each time; every event at least once
 *   sigstop  two processes on one file; one frozen (SIGSTOP) past its lease,
 *            then resumed: nothing lost, its late writes fenced
 */
import { join } from 'node:path';
import { pauseOutsideAWrite } from '../../test-kit/pause-outside-write.ts';
import {
  fmtMs,
  heraldNode,
  percentile,
  sleep,
  startSinkProcess,
  tally,
  waitSettled,
  type ChaosCase,
  waitArrived,
} from './harness.ts';

const LOOPBACK = ['127.0.0.0/8'];
const RESTART_GOAL_MS = 2_000;

const sigkillCase: ChaosCase = {
  name: 'sigkill',
  checks: '5 000 events, 20 endpoints, 10 SIGKILLs at random points + restarts on the same file: each event delivered at least once per endpoint; restart-to-ready ≤ 2 s (median), no lease waited out',
  limitMs: 200_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const ENDPOINTS = 20;
    const WAVES = 10;
    const PER_WAVE = 500;
    // 100 ms per answer: a wave of 500 takes ≈ 0.7 s at 4 requests per endpoint, so kills land mid-delivery.
    const sink = await startSinkProcess({ record: 'ids', delayMs: 100 });
    ctx.defer(() => sink.close());
    // Default engine settings (leaseMs 10 s): restart-to-ready is measured as an operator would see it.
    const node = await heraldNode({ dbPath: join(dir, 'herald.db'), dir, allowNetworks: LOOPBACK });
    ctx.figure('firstStartMs', Math.round(await node.start(ctx)));
    for (let e = 0; e < ENDPOINTS; e++) await node.createEndpoint({ tenantId: `k${e}`, url: `${sink.url}/e${e}`, retry: { schedule: ['PT0.5S', 'PT1S', 'PT2S', 'PT4S'] } });

    const endpointOf = new Map<string, number>();
    const seen: string[] = [];
    const restarts: number[] = [];
    const killAfter: number[] = [];
    for (let wave = 0; wave < WAVES; wave++) {
      const batch = Array.from({ length: PER_WAVE }, (_, i) => {
        const n = wave * PER_WAVE + i;
        return { tenantId: `k${n % ENDPOINTS}`, type: 'chaos.kill', payload: { n } };
      });
      const ids = await node.publish(batch);
      ids.forEach((id, i) => endpointOf.set(id, (wave * PER_WAVE + i) % ENDPOINTS));
      const waitMs = 100 + Math.round(Math.random() * 1_400);
      killAfter.push(waitMs);
      await ctx.sleep(waitMs);
      seen.push(...(await sink.take()).ids);
      await node.kill('SIGKILL');
      const arrived = new Set(seen).size;
      node.spawn();
      const ms = await node.waitReady(ctx, 60_000);
      restarts.push(ms);
      ctx.progress(`kill ${wave + 1}/${WAVES} ${waitMs} ms after wave ${wave + 1}; ${arrived} of ${endpointOf.size} distinct so far; ready again in ${fmtMs(ms)}`);
    }
    const all = [...endpointOf.keys()];
    const missing = await waitArrived(ctx, sink, seen, all, 60_000);
    await sleep(1_000); // let late duplicates arrive before counting them
    seen.push(...(await sink.take()).ids);
    const { distinct, duplicates } = tally(seen);
    const perEndpoint = new Array<number>(ENDPOINTS).fill(0);
    for (const id of distinct) {
      const e = endpointOf.get(id);
      if (e !== undefined) perEndpoint[e]! += 1;
    }
    const expectedPer = (WAVES * PER_WAVE) / ENDPOINTS;
    ctx.figure('events', all.length);
    ctx.figure('distinct delivered', [...distinct].filter((id) => endpointOf.has(id)).length);
    ctx.figure('duplicates', duplicates);
    ctx.figure('restart→ready median', fmtMs(percentile(restarts, 50)));
    ctx.figure('restart→ready max', fmtMs(Math.max(...restarts)));
    ctx.figure('restartsMs', restarts.map(Math.round));
    ctx.figure('killAfterMs', killAfter);
    ctx.check('every event delivered at least once', missing.length === 0, `${all.length - missing.length} of ${all.length} distinct webhook-ids at the sink`);
    ctx.check(`each endpoint got its ${expectedPer} distinct events`, perEndpoint.every((c) => c === expectedPer), `per endpoint: min ${Math.min(...perEndpoint)}, max ${Math.max(...perEndpoint)}`);
    const counts = await waitSettled(ctx, node, all.length, 15_000);
    ctx.check('the store counts 5 000 delivered, none dead or pending', counts?.delivered === all.length && (counts?.dead ?? 0) === 0, JSON.stringify(counts));
    // Spawn to ready includes the process's own start-up (≈ 1–2 s of loading under tsx on a busy machine):
    // the goal is judged on the median; the max must show that no restart waited out its predecessor's lease.
    ctx.check(
      `restart-to-ready ≤ ${RESTART_GOAL_MS / 1000} s (median), and none waited out the 10 s lease`,
      percentile(restarts, 50) <= RESTART_GOAL_MS && Math.max(...restarts) < 10_000,
      `median ${fmtMs(percentile(restarts, 50))}, max ${fmtMs(Math.max(...restarts))} over ${restarts.length} restarts`,
    );
  },
};

const sigstopCase: ChaosCase = {
  name: 'sigstop',
  checks: 'two processes on one file, one SIGSTOPped 3 × leaseMs (2 s) then SIGCONT: the other takes every slot, nothing lost, late writes fenced, no slot held by both',
  limitMs: 90_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const LEASE_MS = 2_000;
    const engine = { leaseMs: LEASE_MS, renewIntervalMs: 400, sweepIntervalMs: 200 };
    const sink = await startSinkProcess({ record: 'ids', delayMs: 300 });
    ctx.defer(() => sink.close());
    const dbPath = join(dir, 'herald.db');
    const a = await heraldNode({ dbPath, dir, allowNetworks: LOOPBACK, config: { engine }, label: 'a' });
    const b = await heraldNode({ dbPath, dir, allowNetworks: LOOPBACK, config: { engine }, label: 'b' });
    await a.start(ctx);
    await b.start(ctx);
    for (let e = 0; e < 20; e++) await b.createEndpoint({ tenantId: `s${e}`, url: `${sink.url}/e${e}`, retry: { schedule: ['PT0.5S', 'PT1S', 'PT2S', 'PT4S'] } });
    // Both hold a share before the events come.
    const deadline = performance.now() + 20_000;
    let split = '';
    while (performance.now() < deadline) {
      ctx.alive();
      const [sa, sb] = [await a.status(), await b.status()];
      split = `${sa?.slotsOwned}+${sb?.slotsOwned}`;
      if (sa !== undefined && sb !== undefined && sa.slotsOwned > 0 && sb.slotsOwned > 0 && sa.slotsOwned + sb.slotsOwned === sa.slotCount) break;
      await sleep(200);
    }
    ctx.figure('slots before', split);
    const ids = await b.publish(Array.from({ length: 1_000 }, (_, n) => ({ tenantId: `s${n % 20}`, type: 'chaos.stop', payload: { n } })));
    const seen: string[] = [];
    while (seen.length < 100) {
      ctx.alive();
      seen.push(...(await sink.take()).ids);
      await sleep(50);
    }
    // Frozen outside a write transaction: one frozen inside keeps SQLite's only write lock and
    // every process waits for it (the README's cluster notes), which is not this case's question.
    await pauseOutsideAWrite(a.pid, dbPath);
    const stoppedAt = performance.now();
    ctx.progress(`a stopped (pid ${a.pid}) with ${seen.length} requests arrived; b should take its slots after ${LEASE_MS} ms`);
    let takeoverMs: number | undefined;
    while (performance.now() - stoppedAt < 3 * LEASE_MS) {
      const sb = await b.status(2_000);
      if (takeoverMs === undefined && sb !== undefined && sb.slotsOwned === sb.slotCount) takeoverMs = performance.now() - stoppedAt;
      await sleep(100);
    }
    await a.kill('SIGCONT');
    ctx.progress('a resumed');
    ctx.figure('b took every slot after', takeoverMs === undefined ? 'never' : fmtMs(takeoverMs));
    ctx.check(`b took every slot while a was stopped (${(3 * LEASE_MS) / 1000} s)`, takeoverMs !== undefined, fmtMs(takeoverMs));

    // After the resume: never a slot in both nodes' lease lists.
    let overlapSeen = 0;
    let checks = 0;
    // a may be slow to answer right after SIGCONT (it catches up on its timers): compare for up to 12 s, at least 5 times.
    const until = performance.now() + 12_000;
    while (performance.now() < until && checks < 5) {
      const [sa, sb] = [await a.status(5_000), await b.status(5_000)];
      if (sa !== undefined && sb !== undefined) {
        checks++;
        const held = new Set(sb.cluster.leases.map((l) => l.slot));
        overlapSeen = Math.max(overlapSeen, sa.cluster.leases.filter((l) => held.has(l.slot)).length);
      }
      await sleep(200);
    }
    ctx.check('no slot reported held by both nodes after the resume', overlapSeen === 0 && checks > 0, `${checks} comparisons, max overlap ${overlapSeen}`);
    const missing = await waitArrived(ctx, sink, seen, ids, 40_000);
    const { duplicates } = tally(seen);
    ctx.figure('duplicates', duplicates);
    ctx.check('every event delivered at least once', missing.length === 0, `${ids.length - missing.length} of ${ids.length}`);
    const sa = await a.status();
    ctx.figure('a fencedWrites', sa?.fencedWrites ?? 'no answer');
    ctx.check("a's late writes were fenced (fencedWrites > 0)", (sa?.fencedWrites ?? 0) > 0, `fencedWrites ${sa?.fencedWrites ?? 'no answer'}`);
    const counts = await waitSettled(ctx, b, ids.length, 15_000);
    ctx.check('the store counts 1 000 delivered', counts?.delivered === ids.length, JSON.stringify(counts));
  },
};

export const PROCESS_FAULT_CASES: readonly ChaosCase[] = [sigkillCase, sigstopCase];
