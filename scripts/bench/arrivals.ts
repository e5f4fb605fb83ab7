/**
 * What a sink recording ids (`record: 'ids'`) saw, gathered while a scenario
 * runs: each id's first arrival (machine clock, ms) and how many requests
 * carried it. Taken from the sink every `everyMs` so no one IPC message holds
 * a minute of arrivals.
 */
import { percentile, round, sleep, type SinkProcess } from './harness.ts';

export class Arrivals {
  readonly #sink: SinkProcess;
  readonly #first = new Map<string, number>();
  readonly #requests = new Map<string, number>();

  constructor(sink: SinkProcess) {
    this.#sink = sink;
  }

  /** Takes what the sink has recorded since the last take. */
  async take(): Promise<void> {
    const taken = await this.#sink.take();
    for (let i = 0; i < taken.ids.length; i++) {
      const id = taken.ids[i]!;
      const seen = this.#requests.get(id);
      this.#requests.set(id, (seen ?? 0) + 1);
      if (seen === undefined) this.#first.set(id, taken.times[i]!);
    }
  }

  /** Takes every `everyMs` until every id in `ids` has arrived or `timeoutMs` passed; resolves with whether all did. */
  async untilAll(ids: readonly string[], timeoutMs: number, everyMs = 250): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    let from = 0;
    for (;;) {
      await this.take();
      while (from < ids.length && this.#first.has(ids[from]!)) from++;
      if (from === ids.length) return true;
      if (performance.now() >= deadline) return false;
      await sleep(everyMs);
    }
  }

  /** Distinct ids whose first request arrived between `from` and `to` (machine clock, ms). */
  arrivedBetween(from: number, to: number): number {
    let count = 0;
    for (const at of this.#first.values()) if (at >= from && at <= to) count++;
    return count;
  }

  /**
   * Each id's first arrival less its commit time, for `ids[i]` committed at `committedAt[i]`;
   * missing: ids never seen; duplicates: requests for them past the first. Other ids (a
   * warm-up's) are ignored.
   */
  latencies(ids: readonly string[], committedAt: readonly number[]): Latencies {
    const ms: number[] = [];
    let missing = 0;
    let duplicates = 0;
    for (let i = 0; i < ids.length; i++) {
      const seen = this.#first.get(ids[i]!);
      if (seen === undefined) missing++;
      else {
        ms.push(seen - committedAt[i]!);
        duplicates += this.#requests.get(ids[i]!)! - 1;
      }
    }
    return {
      events: ids.length,
      p50Ms: round(percentile(ms, 50)),
      p90Ms: round(percentile(ms, 90)),
      p99Ms: round(percentile(ms, 99)),
      maxMs: round(ms.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY)),
      missing,
      duplicates,
    };
  }
}

export interface Latencies {
  readonly events: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly missing: number;
  readonly duplicates: number;
}
