/**
 * The node-wide cap on requests in flight, shared round-robin between the
 * actors that are waiting: when a permit frees up it goes to the next actor in
 * turn, not to whoever queued most, so one endpoint's 50 000-event backlog
 * cannot delay another endpoint's first attempt.
 *
 * State: `#inFlight` permits out; `#waiting` maps an actor key to its FIFO of
 * waiters; `#turns` is the round-robin order of keys that have waiters.
 */
import { ConfigError } from '../errors.ts';

export type ReleasePermit = () => void;

export class InFlightLimiter {
  readonly #max: number;
  #inFlight = 0;
  readonly #waiting = new Map<string, Array<(release: ReleasePermit) => void>>();
  readonly #turns: string[] = [];

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new ConfigError('delivery.maxInFlight', max, 'must be an integer >= 1');
    this.#max = max;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get waiting(): number {
    let n = 0;
    for (const queue of this.#waiting.values()) n += queue.length;
    return n;
  }

  /** Resolves with a release function once a permit is free for `key`. */
  acquire(key: string): Promise<ReleasePermit> {
    if (this.#inFlight < this.#max && this.#turns.length === 0) {
      this.#inFlight++;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve) => {
      let queue = this.#waiting.get(key);
      if (queue === undefined) {
        queue = [];
        this.#waiting.set(key, queue);
        this.#turns.push(key);
      }
      queue.push(resolve);
    });
  }

  #releaser(): ReleasePermit {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight--;
      this.#grantNext();
    };
  }

  #grantNext(): void {
    while (this.#inFlight < this.#max && this.#turns.length > 0) {
      const key = this.#turns.shift() as string;
      const queue = this.#waiting.get(key);
      const next = queue?.shift();
      if (queue !== undefined && queue.length > 0) this.#turns.push(key);
      else this.#waiting.delete(key);
      if (next !== undefined) {
        this.#inFlight++;
        next(this.#releaser());
      }
    }
  }
}
