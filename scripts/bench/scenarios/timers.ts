/**
 * Timers: 1 000 000 retries on Herald's timing wheel with delays from 1 s to
 * 24 h: how fast they are scheduled, the heap they hold, and advancing the
 * wheel through 24 h of fake time (100 ms ticks, as the ticker does, every
 * entry firing once). Baseline: one `setTimeout` each (unref'd, then cleared).
 * Run with --expose-gc (the runner does), so heap figures are after a full GC.
 */
import { TimerWheel } from '../../../lib/engine/timer-wheel.ts';
import { gc, MB, progress, round, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const SECOND = 1_000;
const HOUR = 3_600 * SECOND;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const count = 1_000_000;
  const delays = new Float64Array(count);
  let seed = 42;
  for (let i = 0; i < count; i++) {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    delays[i] = SECOND + (seed / 2_147_483_648) * (24 * HOUR - SECOND);
  }

  progress(`wheel: scheduling ${count}`);
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const start = 0;
  let fired = 0;
  const wheel = new TimerWheel<number>({ startAt: start, tickMs: 100, onExpire: () => void fired++ });
  let t0 = performance.now();
  for (let i = 0; i < count; i++) wheel.schedule(start + delays[i]!, i);
  const wheelScheduleMs = performance.now() - t0;
  gc();
  const wheelHeapMB = (process.memoryUsage().heapUsed - heap0) / MB;

  progress('wheel: advancing through 24 h of fake time in 100 ms ticks');
  t0 = performance.now();
  const ticks = (24 * HOUR + SECOND) / 100;
  for (let tick = 1; tick <= ticks; tick++) wheel.advance(start + tick * 100);
  const advanceMs = performance.now() - t0;
  wheel.close();

  const baselineCount = options.quick ? 250_000 : count;
  progress(`baseline: ${baselineCount} setTimeout`);
  gc();
  const heap1 = process.memoryUsage().heapUsed;
  const handles: NodeJS.Timeout[] = new Array(baselineCount);
  t0 = performance.now();
  for (let i = 0; i < baselineCount; i++) {
    const timer = setTimeout(noop, delays[i]!);
    timer.unref();
    handles[i] = timer;
  }
  const timeoutScheduleMs = performance.now() - t0;
  gc();
  const timeoutHeapMB = ((process.memoryUsage().heapUsed - heap1) / MB) * (count / baselineCount);
  for (const handle of handles) clearTimeout(handle);

  const schedulePerSec = count / (wheelScheduleMs / 1000);
  const baselinePerSec = baselineCount / (timeoutScheduleMs / 1000);
  return {
    count,
    schedulePerSec: round(schedulePerSec, 0),
    scheduleUs: round((wheelScheduleMs * 1000) / count, 3),
    heapMB: round(wheelHeapMB, 1),
    advance24hMs: round(advanceMs, 0),
    fired,
    baselineSchedulePerSec: round(baselinePerSec, 0),
    baselineHeapMB: round(timeoutHeapMB, 1),
    baselineCount,
    scheduleRatio: round(schedulePerSec / baselinePerSec, 2),
    heapRatio: round(wheelHeapMB / timeoutHeapMB, 3),
    target: 'heap <= 100 MB; schedule >= 2 M/s',
    met: wheelHeapMB <= 100 && schedulePerSec >= 2_000_000 && fired === count,
  };
}

function noop(): void {}
