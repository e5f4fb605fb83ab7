/**
 * Holds this node's slot leases.
 *
 * Until the cluster issue lands, a node asks for every slot: it takes those
 * that are free or expired and renews its own every `renewIntervalMs`, so a
 * second process on the same data waits until the first stops or dies (its
 * leases expire after `leaseMs`). Taking a slot increments its epoch, which
 * makes the deliveries a dead process had in flight claimable again at once.
 *
 *   stopped ──start()──► holding (renewing) ──close()──► released
 */
import type { Clock, TimerHandle } from '../clock.ts';
import type { SlotLease, Store } from '../store/port.ts';

export interface LeaseKeeperOptions {
  readonly owner: string;
  readonly slotCount: number;
  readonly leaseMs: number;
  readonly renewIntervalMs: number;
}

export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #store: Store;
  readonly #clock: Clock;
  /** Called after every renewal. */
  readonly #onChange: (held: readonly SlotLease[]) => void;
  readonly #onError: (error: unknown) => void;
  #held: readonly SlotLease[] = [];
  #timer: TimerHandle | undefined;
  #renewing: Promise<void> | undefined;
  /** A renewal was due while one was running: run another right after, with a fresh `now`. */
  #again = false;

  constructor(
    options: LeaseKeeperOptions,
    deps: { store: Store; clock: Clock; onChange(held: readonly SlotLease[]): void; onError(error: unknown): void },
  ) {
    this.#options = options;
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#onChange = deps.onChange;
    this.#onError = deps.onError;
  }

  get owner(): string {
    return this.#options.owner;
  }

  get held(): readonly SlotLease[] {
    return this.#held;
  }

  async start(): Promise<void> {
    await this.renew();
    this.#timer = this.#clock.setInterval(() => void this.renew(), this.#options.renewIntervalMs);
  }

  /** Takes or renews every slot it can; one store write. Calls during a renewal coalesce into one more. */
  async renew(): Promise<void> {
    if (this.#renewing !== undefined) {
      this.#again = true;
      return this.#renewing;
    }
    const slots = Array.from({ length: this.#options.slotCount }, (_, i) => i);
    this.#renewing = (async () => {
      do {
        this.#again = false;
        try {
          this.#held = await this.#store.acquireLeases({
            owner: this.#options.owner,
            slots,
            now: this.#clock.now(),
            leaseMs: this.#options.leaseMs,
          });
          // Always: new slots, new epochs, or a lease that had lapsed (a claim made
          // meanwhile found nothing) may all have made work claimable.
          this.#onChange(this.#held);
        } catch (error) {
          this.#onError(error);
        }
      } while (this.#again && this.#timer !== undefined);
    })().finally(() => {
      this.#renewing = undefined;
    });
    return this.#renewing;
  }

  /** Stops renewing and frees the slots so another process can take them at once. */
  async close(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#renewing;
    const slots = this.#held.map((lease) => lease.slot);
    this.#held = [];
    if (slots.length > 0) await this.#store.releaseLeases(this.#options.owner, slots);
  }
}

