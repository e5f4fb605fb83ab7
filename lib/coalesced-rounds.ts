/**
 * Rounds of one piece of work, run one at a time, with calls that arrive during a round coalesced
 * into one more round. The lease keeper's renewals, the endpoint sync's catch-ups and the
 * supervisor's pumps run on it.
 *
 *   idle ──request()──► running ──round ends, none asked meanwhile──► idle
 *                         ▲ │
 *                         └─┘ round ends, asked meanwhile (and `goOn()`): one more round
 *
 * `request()` resolves once a round that began after the call has ended, so whatever the caller
 * wrote before it is seen by then. A round that throws is reported to `onError` and counts as ended.
 */
export interface CoalescedRoundsOptions {
  /** One round of the work. */
  readonly round: () => Promise<void>;
  readonly onError: (error: unknown) => void;
  /** Checked before a coalesced round: false stops going round (closed). */
  readonly goOn: () => boolean;
}

export class CoalescedRounds {
  readonly #options: CoalescedRoundsOptions;
  #running: Promise<void> | undefined;
  #again = false;

  constructor(options: CoalescedRoundsOptions) {
    this.#options = options;
  }

  /** Whether a round is running now. */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /** Resolves when no round is running (the one running, and those coalesced into it, done). */
  get idle(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  request(): Promise<void> {
    if (this.#running !== undefined) {
      // The running round may have begun before the caller's write: it goes round once more.
      this.#again = true;
      return this.#running;
    }
    const { round, onError, goOn } = this.#options;
    this.#running = (async () => {
      do {
        this.#again = false;
        try {
          await round();
        } catch (error) {
          onError(error);
        }
      } while (this.#again && goOn());
      // In the same synchronous step as the last look at #again: cleared in a `finally`, a few
      // microtasks later, a request made in between would join rounds that had ended, and be lost
      // (a node on a manual clock then never renewed its leases again).
      this.#running = undefined;
    })();
    return this.#running;
  }
}
