/**
 * What an attempt holds while it is signed and sent: a place at its endpoint's origin, then one of
 * the node's `maxInFlight` permits. Both are shared by weighted round-robin between tenants, then
 * between endpoints (an {@link InFlightLimiter} each).
 *
 * Why the origin first: the sender keeps `connectionsPerOrigin` connections per origin, and a
 * request beyond them waits in the origin's pool. Were it holding a node permit meanwhile, the
 * permits would free only as fast as the slowest shared origin answers: 1 000 endpoints of one
 * tenant on one host with 16 connections and 200 ms answers held all 256 permits and freed them
 * in bursts of 16 every 200 ms, so a quiet tenant waited up to 200 ms for its one grant. Now at
 * most `originDepth` attempts per origin hold node permits (the connections, and one signed
 * request ready behind each); the others wait for their origin without holding one.
 *
 * State: one limiter per origin with attempts out or waiting, made on first use and dropped when
 * it has neither, so origins seen once are not kept.
 */
import { ConfigError } from '../errors.ts';
import type { Endpoint } from '../model.ts';
import { InFlightLimiter, type ReleasePermit } from './in-flight-limiter.ts';

export interface SendPermitsOptions {
  /** Node permits out at once (`delivery.maxInFlight`). */
  readonly maxInFlight: number;
  /** Attempts holding a node permit per origin at once. */
  readonly originDepth: number;
  /** Grants in a row per turn, by tenant id (`delivery.tenantWeights`). @default {} */
  readonly tenantWeights?: Readonly<Record<string, number>>;
}

/** An origin's attempts that hold node permits, per connection: the one on the wire and one signed behind it. */
export const ORIGIN_DEPTH_PER_CONNECTION = 2;

export class SendPermits {
  readonly #node: InFlightLimiter;
  readonly #originDepth: number;
  readonly #tenantWeights: Readonly<Record<string, number>>;
  readonly #origins = new Map<string, InFlightLimiter>();

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) for a `maxInFlight`, `originDepth` or weight out of range. */
  constructor(options: SendPermitsOptions) {
    const { maxInFlight, originDepth, tenantWeights = {} } = options;
    this.#node = new InFlightLimiter({ maxInFlight, tenantWeights });
    if (!Number.isInteger(originDepth) || originDepth < 1) throw new ConfigError('originDepth', originDepth, 'must be an integer >= 1');
    this.#originDepth = originDepth;
    this.#tenantWeights = tenantWeights;
  }

  /** Node permits out. */
  get inFlight(): number {
    return this.#node.inFlight;
  }

  /** Attempts waiting for a node permit (not those waiting for their origin). */
  get waiting(): number {
    return this.#node.waiting;
  }

  /** Origins with attempts out or waiting. */
  get origins(): number {
    return this.#origins.size;
  }

  /** Resolves, once this endpoint's origin and the node both have a place for it, with one release for both. */
  async acquire(endpoint: Pick<Endpoint, 'id' | 'tenantId' | 'url'>): Promise<ReleasePermit> {
    const origin = originOf(endpoint.url);
    let atOrigin = this.#origins.get(origin);
    if (atOrigin === undefined) {
      atOrigin = new InFlightLimiter({ maxInFlight: this.#originDepth, tenantWeights: this.#tenantWeights });
      this.#origins.set(origin, atOrigin);
    }
    const limiter = atOrigin;
    const releaseOrigin = await limiter.acquire(endpoint.tenantId, endpoint.id);
    const releaseNode = await this.#node.acquire(endpoint.tenantId, endpoint.id);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      releaseNode();
      releaseOrigin();
      if (limiter.inFlight === 0 && limiter.waiting === 0 && this.#origins.get(origin) === limiter) this.#origins.delete(origin);
    };
  }
}

/** Where the sender pools connections: scheme, host and port; a URL that does not parse is its own origin (its send fails anyway). */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}
