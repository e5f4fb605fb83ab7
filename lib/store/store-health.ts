/**
 * Whether the store is usable, judged from every call the process makes to it.
 *
 * A store can answer reads and still take no writes (SQLite while another
 * process holds the write lock, a full disk), so a successful read proves
 * nothing about readiness. The health is derived on demand, without timers,
 * from the calls still waiting and the last one that failed:
 *
 *   available ──a call has waited `stallMs`, or a call failed with a StoreError──► unavailable
 *   unavailable ──no call waiting `stallMs`, and no StoreError for `failureHoldMs`──► available
 *
 * Only `StoreError`s count: a conflict or a missing row is the store working.
 */
import { durationText, type Clock } from '../clock.ts';
import { ErrorCode, isHeraldError, ValidationError } from '../errors.ts';
import type { Store } from './port.ts';

export interface StoreHealthOptions {
  readonly clock: Clock;
  /**
   * A call waiting this long makes the store unavailable (a lock held elsewhere, a server not answering).
   * @default 2000
   */
  readonly stallMs?: number;
  /**
   * How long the store stays unavailable after a call failed with a store error (a write on a full
   * disk fails at once, while the reads and small writes around it may succeed).
   * @default 5000
   */
  readonly failureHoldMs?: number;
}

const DEFAULTS = Object.freeze({
  stallMs: 2_000,
  failureHoldMs: 5_000,
} satisfies Required<Omit<StoreHealthOptions, 'clock'>>);

export type StoreAvailability =
  | { readonly available: true }
  | { readonly available: false; readonly since: number; readonly reason: string };

/** Port methods that are lifecycle, not work: not watched. */
const UNWATCHED: ReadonlySet<PropertyKey> = new Set(['init', 'close', 'watch']);

interface Call {
  readonly operation: string;
  readonly since: number;
}

export class StoreHealth {
  readonly #clock: Clock;
  readonly #stallMs: number;
  readonly #failureHoldMs: number;
  /** In call order, so the first is the oldest. */
  readonly #pending = new Set<Call>();
  #lastFailure: { readonly operation: string; readonly at: number; readonly message: string } | undefined;

  constructor(options: StoreHealthOptions) {
    this.#clock = options.clock;
    this.#stallMs = positiveInteger(options.stallMs ?? DEFAULTS.stallMs, 'stallMs');
    this.#failureHoldMs = positiveInteger(options.failureHoldMs ?? DEFAULTS.failureHoldMs, 'failureHoldMs');
  }

  /**
   * The same store, each of its calls watched. A Proxy rather than a class
   * repeating every port method: the port grows, and a method forgotten in
   * such a class would go unwatched without a type error.
   */
  monitor(store: Store): Store {
    // Keyed by the method itself, not its name: a method replaced on the instance gets its own wrapper.
    const wrapped = new WeakMap<object, unknown>();
    return new Proxy(store, {
      get: (target, property) => {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        let fn = wrapped.get(value);
        if (fn === undefined) {
          const method = value as (...args: unknown[]) => unknown;
          fn = UNWATCHED.has(property)
            ? method.bind(target)
            : (...args: unknown[]) => this.#watch(String(property), method.apply(target, args) as Promise<unknown>);
          wrapped.set(value, fn);
        }
        return fn;
      },
    });
  }

  get availability(): StoreAvailability {
    const now = this.#clock.now();
    const oldest = this.#pending.values().next().value;
    if (oldest !== undefined && now - oldest.since >= this.#stallMs) {
      return {
        available: false,
        since: oldest.since + this.#stallMs,
        reason: `store call ${oldest.operation} has been waiting for ${durationText(now - oldest.since)}`,
      };
    }
    const failure = this.#lastFailure;
    if (failure !== undefined && now - failure.at < this.#failureHoldMs) {
      return { available: false, since: failure.at, reason: `store call ${failure.operation} failed: ${failure.message}` };
    }
    return { available: true };
  }

  async #watch<T>(operation: string, result: Promise<T>): Promise<T> {
    const call: Call = { operation, since: this.#clock.now() };
    this.#pending.add(call);
    try {
      return await result;
    } catch (error) {
      if (isHeraldError(error) && error.code === ErrorCode.STORE) {
        this.#lastFailure = { operation, at: this.#clock.now(), message: error.message };
      }
      throw error;
    } finally {
      this.#pending.delete(call);
    }
  }
}

function positiveInteger(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 1) throw new ValidationError(field, `must be a positive integer (got ${String(value)})`);
  return value;
}
