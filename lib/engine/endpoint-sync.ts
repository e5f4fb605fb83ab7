/**
 * Endpoint sync: brings this node's actors to their endpoints' current versions, whichever node
 * the change was made through, by following the store's endpoint change log (`Store.endpointChangesAfter`).
 *
 *   idle ──start()──► following ──close()──► closed
 *
 * Following, one catch-up at a time, every `intervalMs` and at once when asked (`catchUp()`: a
 * change made through this node); a request during a catch-up makes it go round once more. A
 * catch-up reads the changes after its cursor, `PAGE` at a time; for each endpoint changed that has
 * an actor here (`tracked`), it reads the endpoint and hands it over (`apply`: the actor takes the
 * new version, or closes when the endpoint is gone); then the cursor moves past them. A catch-up
 * that fails keeps its cursor, so the next one reads the same changes again.
 *
 * The first catch-up starts from the newest change and refreshes every tracked actor: an actor made
 * before it read its endpoint before the cursor was known. Changes are numbered without gaps, so a
 * first change numbered past `cursor + 1` means some were purged while this node was away: every
 * tracked actor is refreshed then too.
 *
 * Cost: one indexed read of an empty range per interval while nothing changes (`intervalMs`, 250 ms
 * by default); one endpoint read per change of an endpoint this node works.
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { CoalescedRounds } from '../coalesced-rounds.ts';
import type { Endpoint } from '../model.ts';
import type { Store } from '../store/port.ts';

export interface EndpointSyncOptions {
  /** How often the change log is read. @default 250 */
  readonly intervalMs: number;
}

export interface EndpointSyncDeps {
  readonly store: Pick<Store, 'endpointChangesAfter' | 'lastEndpointChange' | 'getEndpoint'>;
  readonly clock: Clock;
  /** The endpoints that have an actor on this node now. */
  tracked(): Iterable<string>;
  /** Whether this one has. */
  isTracked(endpointId: string): boolean;
  /** The endpoint as it is now in the store; `undefined`: deleted. */
  apply(endpointId: string, endpoint: Endpoint | undefined): void;
  onError(error: unknown): void;
}

/** Changes read per store call. */
const PAGE = 500;

export class EndpointSync {
  readonly #options: EndpointSyncOptions;
  readonly #deps: EndpointSyncDeps;
  /** The newest change applied; `undefined` until the first catch-up has read where the log stands. */
  #cursor: number | undefined;
  #timer: TimerHandle | undefined;
  /** Catch-ups one at a time; one asked for during another runs right after it. */
  readonly #rounds: CoalescedRounds;
  #closed = false;

  constructor(options: EndpointSyncOptions, deps: EndpointSyncDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#rounds = new CoalescedRounds({ round: () => this.#round(), onError: (error) => deps.onError(error), goOn: () => !this.#closed });
  }

  /** The newest change this node has applied (for status and tests). */
  get cursor(): number | undefined {
    return this.#cursor;
  }

  start(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = this.#deps.clock.setInterval(() => void this.catchUp(), this.#options.intervalMs);
    void this.catchUp();
  }

  /**
   * Catches up with the log now; resolves once a catch-up that began after this call has ended, so
   * a change committed before the call is applied by then (unless the store failed meanwhile).
   */
  async catchUp(): Promise<void> {
    if (this.#closed) return;
    return this.#rounds.request();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#rounds.idle;
  }

  async #round(): Promise<void> {
    const { store } = this.#deps;
    if (this.#cursor === undefined) {
      const last = await store.lastEndpointChange();
      await this.#refresh([...this.#deps.tracked()]);
      this.#cursor = last;
    }
    for (;;) {
      const cursor = this.#cursor;
      const changes = await store.endpointChangesAfter(cursor, PAGE);
      const first = changes[0];
      if (first === undefined) return;
      if (first.version > cursor + 1) {
        await this.#refresh([...this.#deps.tracked()]);
      } else {
        await this.#refresh([...new Set(changes.map((change) => change.endpointId))].filter((id) => this.#deps.isTracked(id)));
      }
      this.#cursor = changes[changes.length - 1]!.version;
      if (changes.length < PAGE || this.#closed) return;
    }
  }

  /** Reads each endpoint and hands it over; an endpoint untracked meanwhile is left alone. */
  async #refresh(endpointIds: readonly string[]): Promise<void> {
    for (const id of endpointIds) {
      const endpoint = await this.#deps.store.getEndpoint(id);
      if (this.#closed) return;
      if (this.#deps.isTracked(id)) this.#deps.apply(id, endpoint);
    }
  }
}
