/**
 * Replay jobs: a bulk replay of dead letters released as each endpoint can
 * take them, so that a hundred thousand replays never sit as due deliveries
 * ahead of new events, and a job outlives the node that runs it.
 *
 * A job is a row in the store (`replay_jobs`). Its states:
 *
 *   running ──no open dead letter left──► done
 *      │ ────cancel (any node)───────────► cancelled   (what was released stays replayed, the rest stays dead)
 *      └─────5 looks failed in a row─────► failed      (the same; `error` says why)
 *
 * One node runs a running job at a time: the one holding its lease (`owner`,
 * `leaseUntil`). Every `pollMs` each node renews the leases of the jobs it
 * runs and takes the running jobs whose lease ended (their node crashed) or
 * that nobody holds (their node closed and gave them back). A node closing
 * gives its jobs back; a node that dies leaves them to be taken once the lease
 * ends. Cancel is a state write from any node: the runner reads the job's
 * state before each look and drops it; its writes are conditional on the state
 * and its lease too.
 *
 * A look at a job (after every poll, and when a delivery settles on this node,
 * at most once per `lookGapMs`): read the next `chunkSize` open dead letters
 * after the cursor, count each of their endpoints' replayed deliveries still
 * pending or in flight (one counting read), and release a dead letter only
 * while its endpoint has fewer than `PACE_FACTOR` × its replays' share of its
 * concurrency limit of them (`replaySlots`: the actor lets replays hold only
 * that share of its slots, and of its claims, so new events always find room
 * in both; the limit is the adaptive one of its actor on this node when it has
 * one). When
 * some are left behind (their endpoint has no room), a second read takes the
 * next ones past them, of the other endpoints only, so a slow endpoint holds
 * back only its own dead letters.
 *
 * A look repeats while it releases something, so the pace is that of the
 * settles, never a number of chunks per poll; it writes the job's progress
 * once, at its end.
 *
 * The cursor is the last dead letter before the first one left behind: every
 * dead letter up to it was released (or could not be). It is saved after the
 * releases; a node that dies in between leaves the cursor behind what it
 * released, and the next runner reads those dead letters again, but a replay
 * marks a dead letter and the reads take open ones only, so none is replayed
 * twice. Only the `replayed` count can then miss what was released in that
 * one look.
 */
import { randomUUID } from 'node:crypto';
import type { Clock, TimerHandle } from '../clock.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import { ReplayJobState, type Endpoint, type ReplayJobFilter, type ReplayJobRecord } from '../model.ts';
import type { ReplayableDeadLetter, Store } from '../store/port.ts';
import { replaySlots } from '../engine/replay-lane.ts';

export { ReplayJobState } from '../model.ts';

/** A replay job as the API shows it (the store's record less the runner's lease). */
export type ReplayJob = Omit<ReplayJobRecord, 'cursor' | 'owner' | 'leaseUntil'>;

export interface ReplayJobOptions {
  /**
   * Dead letters read per look (1 to 1000).
   * @default 100
   */
  readonly chunkSize?: number;
}

export interface ReplayJobsOptions {
  /**
   * How often a node renews its jobs' leases, takes lapsed jobs, and looks at its jobs when no
   * delivery settled meanwhile (a cancel from another node is seen by then).
   * @default 1000
   */
  readonly pollMs?: number;
  /**
   * How long a runner's lease lasts without a renewal: after a crash, its jobs resume on another
   * node (or the restarted one) this long after its last renewal at most.
   * @default 30 000
   */
  readonly leaseMs?: number;
  /**
   * The least time between two looks a settle asks for: settles come by the thousand per
   * second, and a look costs the store two writes, so they are gathered into one look per gap.
   * @default 25
   */
  readonly lookGapMs?: number;
}

const SECOND = 1_000;
const DEFAULTS = Object.freeze({ pollMs: SECOND, leaseMs: 30 * SECOND, lookGapMs: 25, chunkSize: 100 }) satisfies Required<
  ReplayJobsOptions & ReplayJobOptions
>;
const MAX_CHUNK = 1000;
/** An endpoint gets replays while fewer than this many times its replays' share of its concurrency limit are live. */
export const PACE_FACTOR = 2;
/** Looks failing one after another before the job ends failed (a store down for a moment is not fatal). */
const FAILED_LOOKS_TO_GIVE_UP = 5;
/**
 * Steps (a read, a count, a release) in one look at most: then its progress is saved and, when
 * there is more to release at once, another round follows straight away. A look that went on while the settles kept room coming
 * would otherwise save nothing and hold the round, so the other jobs and the lease renewal, for the
 * whole job.
 */
const STEPS_PER_LOOK = 10;
/** Jobs `GET /v1/replays` lists, the newest. */
const LISTED = 100;

/** What the jobs need of the store. */
export type ReplayJobStore = Pick<
  Store,
  | 'countReplayableDeadLetters'
  | 'replayableDeadLetterPage'
  | 'replayDeadLetters'
  | 'countLiveReplays'
  | 'getEndpoint'
  | 'createReplayJob'
  | 'getReplayJob'
  | 'listReplayJobs'
  | 'leaseReplayJobs'
  | 'saveReplayJobProgress'
  | 'endReplayJob'
  | 'releaseReplayJobs'
>;

/** What the jobs need of the node. */
export interface ReplayJobsDeps {
  readonly clock: Clock;
  readonly store: ReplayJobStore;
  /** This node's id: the owner of the jobs it runs. */
  readonly owner: string;
  /** The endpoint's concurrency limit on this node now (its actor's, adaptive or fixed); undefined without an actor here. */
  readonly concurrencyLimit: (endpointId: string) => number | undefined;
  /** Tells the engine that deliveries became due. */
  readonly signal: () => void;
  /** A look failed (the job stays running until it fails five times in a row). */
  readonly onError: (jobId: string, error: unknown) => void;
}

/** A job this node runs, and what it learnt of its endpoints. */
interface HeldJob {
  record: ReplayJobRecord;
  failedLooks: number;
  /** Looks finished (failed ones too): `create()` answers after the first. */
  looks: number;
  /**
   * The endpoints left out of the last read past the blocked ones that found nothing: nothing of
   * the job lies past the cursor but theirs. The cursor only moves on, so while every one of them
   * is still blocked, that read would find nothing again.
   */
  nothingPast?: ReadonlySet<string>;
}

export class ReplayJobs {
  readonly #deps: ReplayJobsDeps;
  readonly #pollMs: number;
  readonly #leaseMs: number;
  readonly #lookGapMs: number;
  readonly #held = new Map<string, HeldJob>();
  /** Fixed concurrency of endpoints without an actor on this node, read once. */
  readonly #fixedLimits = new Map<string, number>();
  #timer: TimerHandle | undefined;
  /** A look asked for by a settle, waiting for the gap since the last one to pass. */
  #gapTimer: TimerHandle | undefined;
  #lastLookAt = Number.NEGATIVE_INFINITY;
  /** The looks (or lease round) running now; one at a time. */
  #running: Promise<void> | undefined;
  /** Something changed during the looks: look again once they end. */
  #again = false;
  /** The poll came during the looks: renew the leases in the next round (never skipped by a busy node). */
  #leaseDue = false;
  #closed = false;

  constructor(deps: ReplayJobsDeps, options: ReplayJobsOptions = {}) {
    this.#deps = deps;
    this.#pollMs = positiveInteger('pollMs', options.pollMs ?? DEFAULTS.pollMs);
    this.#leaseMs = positiveInteger('leaseMs', options.leaseMs ?? DEFAULTS.leaseMs);
    const lookGapMs = options.lookGapMs ?? DEFAULTS.lookGapMs;
    if (!Number.isInteger(lookGapMs) || lookGapMs < 0) throw new ValidationError('lookGapMs', `must be an integer of 0 or more (got ${JSON.stringify(lookGapMs)})`);
    this.#lookGapMs = lookGapMs;
  }

  /** Starts the poll: leases renewed, lapsed jobs taken, held jobs looked at. */
  start(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = this.#deps.clock.setInterval(() => this.#kick(true), this.#pollMs);
    this.#kick(true);
  }

  /**
   * Starts a job over the open dead letters matching `filter` created until now; its first look
   * runs at once.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) when `chunkSize` is not an integer from 1 to 1000.
   */
  async create(filter: ReplayJobFilter, options: ReplayJobOptions = {}): Promise<ReplayJob> {
    const chunkSize = options.chunkSize ?? DEFAULTS.chunkSize;
    if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_CHUNK) {
      throw new ValidationError('chunkSize', `must be an integer from 1 to ${MAX_CHUNK} (got ${JSON.stringify(chunkSize)})`);
    }
    const now = this.#deps.clock.now();
    // A dead letter created later (a replay that died again) is not this job's: it would loop.
    const bounded: ReplayJobFilter = { ...filter, until: Math.min(filter.until ?? Number.MAX_SAFE_INTEGER, now + 1) };
    const record: ReplayJobRecord = {
      id: `rpl_${randomUUID().replaceAll('-', '')}`,
      filter: bounded,
      state: ReplayJobState.RUNNING,
      total: await this.#deps.store.countReplayableDeadLetters(bounded),
      replayed: 0,
      waiting: 0,
      cursor: null,
      chunkSize,
      createdAt: now,
      finishedAt: null,
      error: null,
      owner: this.#deps.owner,
      leaseUntil: now + this.#leaseMs,
    };
    await this.#deps.store.createReplayJob(record);
    if (!this.#closed) {
      const held: HeldJob = { record, failedLooks: 0, looks: 0 };
      this.#held.set(record.id, held);
      this.#kick(false);
      // Its first look only: rounds follow one another as long as deliveries settle.
      while (this.#running !== undefined && held.looks === 0 && this.#held.get(record.id) === held) await this.#running;
    }
    return this.get(record.id);
  }

  /** Read from the store: any node answers for any job. @throws NotFoundError (`HERALD_NOT_FOUND`, field `replayId`). */
  async get(id: string): Promise<ReplayJob> {
    const record = await this.#deps.store.getReplayJob(id);
    if (record === undefined) throw new NotFoundError('replay', id);
    return viewOf(record);
  }

  /** The newest 100 jobs of every node, newest first. */
  async list(): Promise<ReplayJob[]> {
    return (await this.#deps.store.listReplayJobs(LISTED)).map(viewOf);
  }

  /**
   * Stops a running job, whichever node runs it: what it released stays replayed, the rest stays
   * dead. A finished job is answered as it is.
   * @throws NotFoundError (`HERALD_NOT_FOUND`, field `replayId`).
   */
  async cancel(id: string): Promise<ReplayJob> {
    const now = this.#deps.clock.now();
    const ended = await this.#deps.store.endReplayJob(id, null, { state: ReplayJobState.CANCELLED, finishedAt: now, error: null });
    this.#held.delete(id);
    return ended === undefined ? this.get(id) : viewOf(ended);
  }

  /** A delivery settled: its endpoint may have room again. */
  nudge(): void {
    if (this.#held.size === 0 || this.#gapTimer !== undefined || this.#closed) return;
    const wait = this.#lastLookAt + this.#lookGapMs - this.#deps.clock.now();
    if (wait <= 0) {
      this.#kick(false);
      return;
    }
    this.#gapTimer = this.#deps.clock.setTimeout(() => {
      this.#gapTimer = undefined;
      this.#kick(false);
    }, wait);
  }

  /** How many jobs this node runs now. */
  get running(): number {
    return this.#held.size;
  }

  /** Resolves when no look is running (tests). */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Stops the poll, waits for the look under way, and gives this node's jobs back: another node (or this one restarted) takes them at once. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#gapTimer?.cancel();
    this.#gapTimer = undefined;
    await this.settled();
    this.#held.clear();
    try {
      await this.#deps.store.releaseReplayJobs(this.#deps.owner);
    } catch (error) {
      // Not given back: they resume when their lease ends instead.
      this.#deps.onError('*', error);
    }
  }

  /** Runs a round (with the lease renewal when `lease`), or asks the running one to go again. */
  #kick(lease: boolean): void {
    if (this.#closed) return;
    if (this.#running !== undefined) {
      this.#again = true;
      this.#leaseDue ||= lease;
      return;
    }
    this.#running = this.#round(lease).finally(() => {
      this.#running = undefined;
      if (this.#again && !this.#closed) {
        const leaseDue = this.#leaseDue;
        this.#again = false;
        this.#leaseDue = false;
        this.#kick(leaseDue);
      }
    });
  }

  async #round(lease: boolean): Promise<void> {
    this.#lastLookAt = this.#deps.clock.now();
    if (lease) {
      try {
        await this.#renewLeases();
      } catch (error) {
        this.#deps.onError('*', error);
        return;
      }
    }
    for (const job of [...this.#held.values()]) {
      if (this.#closed) return;
      await this.#look(job);
    }
  }

  /** The jobs this node runs from now on: its own renewed, lapsed ones taken; any other dropped. */
  async #renewLeases(): Promise<void> {
    const now = this.#deps.clock.now();
    const held = await this.#deps.store.leaseReplayJobs(this.#deps.owner, now, now + this.#leaseMs);
    const ids = new Set(held.map((record) => record.id));
    for (const id of this.#held.keys()) if (!ids.has(id)) this.#held.delete(id);
    for (const record of held) {
      const known = this.#held.get(record.id);
      if (known === undefined) this.#held.set(record.id, { record, failedLooks: 0, looks: 0 });
      else known.record = { ...known.record, leaseUntil: record.leaseUntil };
    }
  }

  /** Releases what the endpoints have room for, again while that releases something; then saves where it got to. */
  async #look(job: HeldJob): Promise<void> {
    try {
      // A cancel from another node is a state write: seen here, before anything more is released.
      const stored = await this.#deps.store.getReplayJob(job.record.id);
      if (stored?.state !== ReplayJobState.RUNNING || stored.owner !== this.#deps.owner) {
        this.#held.delete(job.record.id);
        return;
      }
      const before = job.record;
      let step: 'again' | 'wait' | 'done' = 'again';
      for (let steps = 0; step === 'again' && steps < STEPS_PER_LOOK; steps++) {
        if (this.#closed || this.#held.get(job.record.id) !== job) return;
        step = await this.#step(job);
      }
      await this.#save(job, before);
      if (step === 'again') this.#again = true;
      if (step === 'done' && this.#held.get(job.record.id) === job) await this.#end(job, ReplayJobState.DONE, null);
      job.failedLooks = 0;
    } catch (error) {
      job.failedLooks++;
      this.#deps.onError(job.record.id, error);
      if (job.failedLooks >= FAILED_LOOKS_TO_GIVE_UP) {
        const message = error instanceof Error ? error.message : String(error);
        await this.#end(job, ReplayJobState.FAILED, message).catch((failure: unknown) => this.#deps.onError(job.record.id, failure));
      }
    } finally {
      job.looks++;
    }
  }

  /**
   * Writes the job's progress (one write per look, after its releases). A node that dies before
   * it leaves the cursor behind: the dead letters released since are read again and skipped.
   */
  async #save(job: HeldJob, before: ReplayJobRecord): Promise<void> {
    const { cursor, replayed, waiting } = job.record;
    if (cursor === before.cursor && replayed === before.replayed && waiting === before.waiting) return;
    if (!(await this.#deps.store.saveReplayJobProgress(job.record.id, this.#deps.owner, { cursor, replayed, waiting }))) {
      // Cancelled, or taken by another node after our lease ended: not ours any more.
      this.#held.delete(job.record.id);
    }
  }

  /** One read, one count, one release; answers whether to go on at once, or that nothing is left. */
  async #step(job: HeldJob): Promise<'again' | 'wait' | 'done'> {
    const { store } = this.#deps;
    const { record } = job;
    // The head: the next open dead letters after the cursor, whatever their endpoint.
    const head = await store.replayableDeadLetterPage(record.filter, record.cursor, record.chunkSize);
    if (head.length === 0) return 'done';
    const room = new Map<string, number>();
    const live = await this.#room(room, head);
    const released: string[] = [];
    const firstLeft = take(head, room, released);
    // Every dead letter before the first one left behind is released: the cursor moves up to it.
    const cursor = firstLeft === 0 ? record.cursor : (head[(firstLeft < 0 ? head.length : firstLeft) - 1]?.id ?? record.cursor);
    let waiting = live;
    const blocked = new Set([...room].filter(([, left]) => left <= 0).map(([endpointId]) => endpointId));
    // Past the endpoints without room, the others' next dead letters: a slow endpoint holds back
    // only its own. Not when it is known to find nothing: that read walks the rest of the backlog,
    // and it is the last step of most looks once every endpoint of the job is full.
    const knownEmpty = job.nothingPast !== undefined && [...job.nothingPast].every((endpointId) => blocked.has(endpointId));
    if (firstLeft >= 0 && !knownEmpty) {
      const past = await store.replayableDeadLetterPage(record.filter, cursor, record.chunkSize, [...blocked]);
      if (past.length === 0) job.nothingPast = blocked;
      // The head's letters after the first one left behind are read again: those taken already are not taken twice.
      const taken = new Set(released);
      const tail = past.filter((letter) => !taken.has(letter.id));
      waiting += await this.#room(room, tail);
      take(tail, room, released);
    }
    const replayed = released.length === 0 ? [] : await store.replayDeadLetters({ ids: released }, this.#deps.clock.now());
    job.record = { ...record, cursor, replayed: record.replayed + replayed.length, waiting: waiting + replayed.length };
    if (replayed.length > 0) this.#deps.signal();
    return replayed.length > 0 ? 'again' : 'wait';
  }

  /**
   * Adds to `room` what the endpoints of `letters` not in it yet may take (one counting read);
   * answers how many replays those endpoints have live.
   */
  async #room(room: Map<string, number>, letters: readonly ReplayableDeadLetter[]): Promise<number> {
    const endpointIds = [...new Set(letters.map((letter) => letter.endpointId))].filter((endpointId) => !room.has(endpointId));
    if (endpointIds.length === 0) return 0;
    const live = await this.#deps.store.countLiveReplays(endpointIds);
    let total = 0;
    for (const endpointId of endpointIds) {
      const count = live[endpointId] ?? 0;
      total += count;
      room.set(endpointId, PACE_FACTOR * replaySlots(await this.#limitOf(endpointId)) - count);
    }
    return total;
  }

  async #end(job: HeldJob, state: Exclude<ReplayJobState, 'running'>, error: string | null): Promise<void> {
    this.#held.delete(job.record.id);
    await this.#deps.store.endReplayJob(job.record.id, this.#deps.owner, { state, finishedAt: this.#deps.clock.now(), error });
  }

  /**
   * The endpoint's concurrency limit: its actor's here; else what its actor would start at (the
   * adaptive limit's `initial`, or the fixed `concurrency`), read once; 1 once it is gone.
   */
  async #limitOf(endpointId: string): Promise<number> {
    const limit = this.#deps.concurrencyLimit(endpointId);
    if (limit !== undefined) return limit;
    let fixed = this.#fixedLimits.get(endpointId);
    if (fixed === undefined) {
      const endpoint: Endpoint | undefined = await this.#deps.store.getEndpoint(endpointId);
      fixed = endpoint === undefined ? 1 : Math.min(endpoint.concurrency, endpoint.adaptiveConcurrency?.initial ?? endpoint.concurrency);
      this.#fixedLimits.set(endpointId, fixed);
    }
    return fixed;
  }
}

/**
 * Takes into `released` the dead letters whose endpoint has room, in order, using the room up;
 * answers the index of the first one left behind, -1 when none is.
 */
function take(letters: readonly ReplayableDeadLetter[], room: Map<string, number>, released: string[]): number {
  let firstLeft = -1;
  for (const [i, letter] of letters.entries()) {
    const left = room.get(letter.endpointId) ?? 0;
    if (left > 0) {
      released.push(letter.id);
      room.set(letter.endpointId, left - 1);
    } else if (firstLeft < 0) {
      firstLeft = i;
    }
  }
  return firstLeft;
}

function viewOf(record: ReplayJobRecord): ReplayJob {
  const { cursor: _cursor, owner: _owner, leaseUntil: _leaseUntil, ...view } = record;
  return view;
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new ValidationError(name, `must be a positive integer (got ${JSON.stringify(value)})`);
  return value;
}
