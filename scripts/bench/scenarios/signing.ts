/**
 * Signing: main-thread CPU per signature through the piscina signing pool, at
 * the batches Herald forms (every `sign()` of one event-loop turn is one
 * flush; the pool cuts it into tasks of ≤ 64 requests and ≤ 1 MiB), for
 * 1 KiB and 64 KiB bodies. Baseline: `createHmac` inline on the main thread.
 *
 * Main-thread CPU is the event loop's active time (`eventLoopUtilization`),
 * which leaves out the worker thread's own work. Bursts of 64 requests, 4
 * bursts in flight, so the worker stays busy and the main thread is never
 * waiting on it while counted.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SigningPool, type SigningPoolOptions } from '../../../lib/signing/signing-pool.ts';
import { progress, round, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const BURST = 64;
const IN_FLIGHT = 4;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const key = randomBytes(32);
  const sizes = [
    { name: '1KiB', bytes: 1024, count: options.quick ? 20_000 : 100_000, target: 1.0 },
    { name: '64KiB', bytes: 64 * 1024, count: options.quick ? 2_000 : 8_000, target: 0.25 },
  ];
  const result: Record<string, unknown> = {};
  let met = true;
  for (const size of sizes) {
    const body = 'x'.repeat(size.bytes);
    progress(`${size.name}: inline baseline, ${size.count} signatures`);
    inline(key, body, Math.min(2_000, size.count)); // warm-up
    const inlineUs = inline(key, body, size.count);
    progress(`${size.name}: through the signing pool (Herald's defaults)`);
    const pooled = await throughPool(key, body, size.count, {});
    const ratio = pooled.mainUs / inlineUs;
    met &&= ratio <= size.target;
    const entry: Record<string, unknown> = {
      inlineUsPerSignature: round(inlineUs, 2),
      poolMainThreadUsPerSignature: round(pooled.mainUs, 2),
      ratio: round(ratio, 3),
      requestsPerTask: round(pooled.perTask, 1),
      target: `<= ${size.target}x inline`,
      met: ratio <= size.target,
    };
    result[size.name] = entry;
  }
  return { ...result, target: '<= 1.0x inline at 1 KiB, <= 0.25x at 64 KiB', met };
}

function inline(key: Buffer, body: string, count: number): number {
  const started = performance.now();
  let sink = 0;
  for (let i = 0; i < count; i++) {
    const ts = 1_700_000_000 + i;
    sink += createHmac('sha256', key).update(`evt_${i}.${ts}.`).update(body).digest('base64').length;
  }
  if (sink === 0) throw new Error('unreachable');
  return ((performance.now() - started) * 1000) / count;
}

async function throughPool(key: Buffer, body: string, count: number, options: SigningPoolOptions): Promise<{ mainUs: number; perTask: number }> {
  const pool = new SigningPool({ threads: 1, ...options });
  try {
    const burst = async (from: number): Promise<void> => {
      const signing: Array<Promise<string>> = [];
      for (let i = 0; i < BURST; i++) signing.push(pool.sign({ keys: [key], id: `evt_${from + i}`, timestampSec: 1_700_000_000, body }));
      await Promise.all(signing);
    };
    // Warm-up: starts the worker and compiles both sides.
    await Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => burst(i * BURST)));
    const before = pool.stats;
    const elu = performance.eventLoopUtilization();
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < count) {
        const from = next;
        next += BURST;
        await burst(from);
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
    const used = performance.eventLoopUtilization(elu);
    const after = pool.stats;
    const signed = after.pooled + after.inline - before.pooled - before.inline;
    return { mainUs: (used.active * 1000) / signed, perTask: (after.pooled - before.pooled) / Math.max(1, after.tasks - before.tasks) };
  } finally {
    await pool.close();
  }
}
