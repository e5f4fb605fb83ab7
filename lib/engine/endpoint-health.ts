/**
 * The health of one endpoint, as its actor sees it.
 *
 * `failingSince` is when the current run of failures without a success began
 * (persisted by the store on every settle; loaded when the actor starts).
 * `endpoint.failing` fires once when more than `failingThreshold` failures
 * fall within `failingWindowMs`, and re-arms only after a success;
 * `disable` is due once the run of failures has lasted `disableAfterMs`.
 * Only the last `failingThreshold + 1` failure times are kept.
 */

export interface HealthOptions {
  /** Continuous failure (no success) after which the endpoint is disabled. @default 5 days */
  readonly disableAfterMs: number;
  /** More failures than this within the window emit `endpoint.failing`. @default 10 */
  readonly failingThreshold: number;
  /** @default 1 hour */
  readonly failingWindowMs: number;
}

export type HealthTransition = 'failing' | 'recovered' | 'disable';

export class EndpointHealth {
  readonly #options: HealthOptions;
  #failingSince: number | null;
  readonly #recent: number[] = [];
  #flaggedFailing = false;

  constructor(options: HealthOptions, failingSince: number | null) {
    this.#options = options;
    this.#failingSince = failingSince;
  }

  get failingSince(): number | null {
    return this.#failingSince;
  }

  recordSuccess(): HealthTransition[] {
    const wasFailing = this.#flaggedFailing;
    this.#failingSince = null;
    this.#recent.length = 0;
    this.#flaggedFailing = false;
    return wasFailing ? ['recovered'] : [];
  }

  recordFailure(at: number): HealthTransition[] {
    const out: HealthTransition[] = [];
    this.#failingSince ??= at;
    this.#recent.push(at);
    if (this.#recent.length > this.#options.failingThreshold + 1) this.#recent.shift();
    const oldest = this.#recent[0] ?? at;
    const overThreshold = this.#recent.length > this.#options.failingThreshold && at - oldest <= this.#options.failingWindowMs;
    if (overThreshold && !this.#flaggedFailing) {
      this.#flaggedFailing = true;
      out.push('failing');
    }
    if (at - this.#failingSince >= this.#options.disableAfterMs) out.push('disable');
    return out;
  }
}
