/**
 * Replay jobs: a bulk replay of dead letters released a chunk at a time, at
 * the pace the endpoints drain them, so that a hundred thousand replays never
 * sit as due deliveries ahead of new events.
 *
 * A job's states:
 *
 *   running ──no dead letter left──► done
 *      │ ────cancel()────────────► cancelled   (what was released stays replayed, the rest stays dead)
 *      └─────store error─────────► failed      (the same; `error` says why)
 *
 * While running, a job checks every `pollMs` how many of the deliveries it has
 * released are still pending or in flight. While more than `lowWater` are, it
 * waits; otherwise it reads the next `chunkSize` open dead letters after its
 * cursor (the last dead letter it released), replays them by id (a replay
 * marks them, so none is replayed twice) and tells the engine. So at most
 * `chunkSize + lowWater` of its deliveries wait at once, and a new event waits
 * behind that many at most, never behind the whole backlog.
 *
 * The jobs live in the memory of the node that started them: a restart (or a
 * crash) ends them, the dead letters not yet released stay dead, and a new job
 * with the same filter takes the rest (a dry run says how many).
 */
import { randomUUID } from 'node:crypto';
import type { Clock, TimerHandle } from '../clock.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import type { Delivery } from '../model.ts';
import type { DeadLetterFilter, ReplayableDeadLetter } from '../store/port.ts';

export const ReplayJobState = {
  RUNNING: 'running',
  DONE: 'done',
  CANCELLED: 'cancelled',
  FAILED: 'failed',
} as const;
export type ReplayJobState = (typeof ReplayJobState)[keyof typeof ReplayJobState];

/** A replay job as the API shows it. */
export interface ReplayJob {
  readonly id: string;
  readonly filter: DeadLetterFilter;
  readonly state: ReplayJobState;
  /** The dead letters the filter matched when the job started (a dry run's count). */
  readonly total: number;
  /** Released so far: their deliveries are live again. */
  readonly replayed: number;
  /** Of those, still pending or in flight at the last check. */
  readonly waiting: number;
  readonly chunkSize: number;
  readonly createdAt: number;
  readonly finishedAt: number | null;
  /** Why it failed; null otherwise. */
  readonly error: string | null;
}

export interface ReplayJobOptions {
  /**
   * Dead letters released at once (1 to 1000).
   * @default 100
   */
  readonly chunkSize?: number;
}

export interface ReplayJobsOptions {
  /**
   * How often a running job looks at its released deliveries.
   * @default 250
   */
  readonly pollMs?: number;
}

const DEFAULTS = Object.freeze({ pollMs: 250, chunkSize: 100 }) satisfies Required<ReplayJobsOptions & ReplayJobOptions>;
const MAX_CHUNK = 1000;
/** Finished jobs kept for `GET /v1/replays`, the newest. */
const KEPT_FINISHED = 100;

/** What the jobs need of the store and the engine. */
export interface ReplayJobsDeps {
  readonly clock: Clock;
  readonly countReplayable: (filter: DeadLetterFilter) => Promise<number>;
  readonly page: (filter: DeadLetterFilter, afterId: string | null, limit: number) => Promise<ReplayableDeadLetter[]>;
  readonly replay: (ids: readonly string[], now: number) => Promise<string[]>;
  readonly getDelivery: (id: string) => Promise<Delivery | undefined>;
  /** Tells the engine that deliveries became due. */
  readonly signal: () => void;
}

interface JobRecord {
  job: ReplayJob;
  cursor: string | null;
  /** Released deliveries not yet seen finished. */
  readonly waiting: Set<string>;
  timer: TimerHandle | undefined;
  /** A check is running (a cancel during it takes effect when it ends). */
  busy: boolean;
}

export class ReplayJobs {
  readonly #deps: ReplayJobsDeps;
  readonly #pollMs: number;
  readonly #jobs = new Map<string, JobRecord>();
  #closed = false;

  constructor(deps: ReplayJobsDeps, options: ReplayJobsOptions = {}) {
    this.#deps = deps;
    this.#pollMs = options.pollMs ?? DEFAULTS.pollMs;
  }

  /**
   * Starts a job over the open dead letters matching `filter`; its first chunk goes out at once.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) when `chunkSize` is not an integer from 1 to 1000.
   */
  async start(filter: DeadLetterFilter, options: ReplayJobOptions = {}): Promise<ReplayJob> {
    const chunkSize = options.chunkSize ?? DEFAULTS.chunkSize;
    if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_CHUNK) {
      throw new ValidationError('chunkSize', `must be an integer from 1 to ${MAX_CHUNK} (got ${JSON.stringify(chunkSize)})`);
    }
    const total = await this.#deps.countReplayable(filter);
    const job: ReplayJob = {
      id: `rpl_${randomUUID().replaceAll('-', '')}`,
      filter,
      state: ReplayJobState.RUNNING,
      total,
      replayed: 0,
      waiting: 0,
      chunkSize,
      createdAt: this.#deps.clock.now(),
      finishedAt: null,
      error: null,
    };
    const record: JobRecord = { job, cursor: null, waiting: new Set(), timer: undefined, busy: false };
    this.#jobs.set(job.id, record);
    this.#forgetOldFinished();
    await this.#check(record);
    return record.job;
  }

  /** @throws NotFoundError (`HERALD_NOT_FOUND`, field `replayId`). */
  get(id: string): ReplayJob {
    const record = this.#jobs.get(id);
    if (record === undefined) throw new NotFoundError('replay', id);
    return record.job;
  }

  /** The jobs of this node since it started (the last 100 finished ones), newest first. */
  list(): ReplayJob[] {
    return [...this.#jobs.values()].map((record) => record.job).reverse();
  }

  /**
   * Stops a running job: what it released stays replayed, the rest stays dead. A finished job is
   * answered as it is.
   * @throws NotFoundError (`HERALD_NOT_FOUND`, field `replayId`).
   */
  cancel(id: string): ReplayJob {
    const record = this.#jobs.get(id);
    if (record === undefined) throw new NotFoundError('replay', id);
    if (record.job.state === ReplayJobState.RUNNING) this.#finish(record, ReplayJobState.CANCELLED, null);
    return record.job;
  }

  /** How many jobs are running. */
  get running(): number {
    return [...this.#jobs.values()].filter((record) => record.job.state === ReplayJobState.RUNNING).length;
  }

  /** Stops every timer; running jobs end as cancelled (the node is going away). */
  close(): void {
    this.#closed = true;
    for (const record of this.#jobs.values()) {
      if (record.job.state === ReplayJobState.RUNNING) this.#finish(record, ReplayJobState.CANCELLED, null);
    }
  }

  /** Counts the released deliveries still waiting; releases the next chunk when few enough are. */
  async #check(record: JobRecord): Promise<void> {
    record.timer = undefined;
    if (record.job.state !== ReplayJobState.RUNNING || record.busy) return;
    record.busy = true;
    try {
      for (const deliveryId of [...record.waiting]) {
        const delivery = await this.#deps.getDelivery(deliveryId);
        if (delivery === undefined || (delivery.status !== 'pending' && delivery.status !== 'in_flight')) record.waiting.delete(deliveryId);
      }
      if (record.job.state !== ReplayJobState.RUNNING) return;
      // Half a chunk still waiting: the endpoints are behind, the next chunk would only queue.
      if (record.waiting.size <= Math.floor(record.job.chunkSize / 2)) await this.#release(record);
      record.job = { ...record.job, waiting: record.waiting.size };
    } catch (error) {
      if (record.job.state === ReplayJobState.RUNNING) this.#finish(record, ReplayJobState.FAILED, error instanceof Error ? error.message : String(error));
    } finally {
      record.busy = false;
    }
    if (record.job.state === ReplayJobState.RUNNING && !this.#closed) {
      record.timer = this.#deps.clock.setTimeout(() => void this.#check(record), this.#pollMs);
    }
  }

  async #release(record: JobRecord): Promise<void> {
    const page = await this.#deps.page(record.job.filter, record.cursor, record.job.chunkSize);
    if (record.job.state !== ReplayJobState.RUNNING) return;
    if (page.length === 0) {
      this.#finish(record, ReplayJobState.DONE, null);
      return;
    }
    const replayed = new Set(await this.#deps.replay(page.map((letter) => letter.id), this.#deps.clock.now()));
    for (const letter of page) if (replayed.has(letter.id)) record.waiting.add(letter.deliveryId);
    record.cursor = page.at(-1)?.id ?? record.cursor;
    record.job = { ...record.job, replayed: record.job.replayed + replayed.size };
    if (replayed.size > 0) this.#deps.signal();
  }

  #finish(record: JobRecord, state: ReplayJobState, error: string | null): void {
    record.timer?.cancel();
    record.timer = undefined;
    record.job = { ...record.job, state, error, waiting: record.waiting.size, finishedAt: this.#deps.clock.now() };
  }

  #forgetOldFinished(): void {
    const finished = [...this.#jobs.values()].filter((record) => record.job.state !== ReplayJobState.RUNNING);
    for (const record of finished.slice(0, Math.max(0, finished.length - KEPT_FINISHED))) this.#jobs.delete(record.job.id);
  }
}
