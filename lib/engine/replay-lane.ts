/**
 * An endpoint's replayed deliveries (a round after the first), kept out of its mailbox beyond
 * their share of its concurrency, so a new event always finds a slot free and goes out at once.
 *
 * Why a share and not only a lower lane in the mailbox: a lane orders what waits, but a new event
 * that arrives while every slot is taken by a replay still waits for one of them to finish (its
 * whole send, and its wait for a place at a busy origin). The same share holds at the origin's
 * connections and the node's permits (send-permits.ts) and in a replay job's pacing: together
 * they cut a new event's median latency beside a paced replay to about a third
 * (`npm run bench -- --only=replay`).
 *
 *   offer ─► waiting (in order) ─► admitted into the mailbox while admitted < replaySlots(limit)
 *                                   └── finished ─► the next waiting one is admitted
 */
import type { DeliveryJob } from '../model.ts';

/**
 * The slots of a concurrency `limit` that replays may hold: all but a quarter of them (at least
 * one kept for new events), and at least one, so an endpoint at concurrency 1 still replays; there
 * a new event waits for at most the one replay out, then goes before the replays queued behind it.
 */
export function replaySlots(limit: number): number {
  return Math.max(1, limit - Math.max(1, Math.floor(limit / 4)));
}

export class ReplayLane {
  readonly #waiting: DeliveryJob[] = [];
  #admitted = 0;
  readonly #admit: (job: DeliveryJob, finished: () => void) => void;
  readonly #limit: () => number;

  /**
   * @param admit puts a job into the mailbox; it must call `finished` once, when the job leaves it.
   * @param limit the endpoint's concurrency now (it changes with an adaptive limit).
   */
  constructor(admit: (job: DeliveryJob, finished: () => void) => void, limit: () => number) {
    this.#admit = admit;
    this.#limit = limit;
  }

  /** Replays waiting for their share. */
  get waiting(): number {
    return this.#waiting.length;
  }

  offer(job: DeliveryJob): void {
    this.#waiting.push(job);
    this.#pump();
  }

  /** Takes every waiting replay out (to give them back when the actor closes). */
  drain(): DeliveryJob[] {
    return this.#waiting.splice(0);
  }

  #pump(): void {
    while (this.#waiting.length > 0 && this.#admitted < replaySlots(this.#limit())) {
      const job = this.#waiting.shift()!;
      this.#admitted += 1;
      let done = false;
      this.#admit(job, () => {
        if (done) return;
        done = true;
        this.#admitted -= 1;
        this.#pump();
      });
    }
  }
}
