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
 * Replayed deliveries (`SendLane.REPLAY`) first pass two gates of their own, each a share of the
 * limit behind it (`replaySlots`, three quarters): one per origin, of its connections, and one of
 * the node's permits. So replays alone never fill an origin's connections or the node's permits,
 * and a new event finds a connection idle and a permit free. Without the origin's gate, 30
 * replays signed for 16 connections put every new event behind a queue of 14 in the connection
 * pool: 5 ms more on its median with the sink answering in 5 ms.
 *
 * State: one limiter per origin (and one per origin for its replays) with attempts out or
 * waiting, made on first use and dropped when it has neither, so origins seen once are not kept.
 */
import { ConfigError } from '../errors.ts';
import type { Endpoint } from '../model.ts';
import { InFlightLimiter, type ReleasePermit } from './in-flight-limiter.ts';
import { replaySlots } from './replay-lane.ts';

/** Whose attempt asks: a new event's delivery, or a replayed one (a round after the first). */
export const SendLane = { NEW: 'new', REPLAY: 'replay' } as const;
export type SendLane = (typeof SendLane)[keyof typeof SendLane];

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
  /** Replays' share of the node's permits. */
  readonly #nodeReplays: InFlightLimiter;
  /** Replays' share of an origin's connections. */
  readonly #originReplayDepth: number;
  readonly #originReplays = new Map<string, InFlightLimiter>();

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) for a `maxInFlight`, `originDepth` or weight out of range. */
  constructor(options: SendPermitsOptions) {
    const { maxInFlight, originDepth, tenantWeights = {} } = options;
    this.#node = new InFlightLimiter({ maxInFlight, tenantWeights });
    if (!Number.isInteger(originDepth) || originDepth < 1) throw new ConfigError('originDepth', originDepth, 'must be an integer >= 1');
    this.#originDepth = originDepth;
    this.#tenantWeights = tenantWeights;
    this.#nodeReplays = new InFlightLimiter({ maxInFlight: replaySlots(maxInFlight), tenantWeights });
    this.#originReplayDepth = replaySlots(Math.max(1, Math.floor(originDepth / ORIGIN_DEPTH_PER_CONNECTION)));
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

  /** Origins with replays out or waiting. */
  get replayOrigins(): number {
    return this.#originReplays.size;
  }

  /**
   * Resolves, once this endpoint's origin and the node both have a place for it (and, for a
   * replay, the replays' shares of both), with one release for all.
   */
  async acquire(endpoint: Pick<Endpoint, 'id' | 'tenantId' | 'url'>, lane: SendLane = SendLane.NEW): Promise<ReleasePermit> {
    const origin = originOf(endpoint.url);
    const releaseShare = lane === SendLane.REPLAY ? await this.#replayShare(origin, endpoint) : undefined;
    const releaseOrigin = await this.#take(this.#origins, origin, this.#originDepth, endpoint);
    const releaseNode = await this.#node.acquire(endpoint.tenantId, endpoint.id);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      releaseNode();
      releaseOrigin();
      releaseShare?.();
    };
  }

  /** A replay's places in the replays' shares of its origin and of the node, with one release for both. */
  async #replayShare(origin: string, endpoint: Pick<Endpoint, 'id' | 'tenantId'>): Promise<ReleasePermit> {
    const releaseOrigin = await this.#take(this.#originReplays, origin, this.#originReplayDepth, endpoint);
    const releaseNode = await this.#nodeReplays.acquire(endpoint.tenantId, endpoint.id);
    return () => {
      releaseNode();
      releaseOrigin();
    };
  }

  /** A place in `origin`'s limiter of `limiters` (made with `depth` places on first use, dropped once unused). */
  async #take(
    limiters: Map<string, InFlightLimiter>,
    origin: string,
    depth: number,
    endpoint: Pick<Endpoint, 'id' | 'tenantId'>,
  ): Promise<ReleasePermit> {
    let limiter = limiters.get(origin);
    if (limiter === undefined) {
      limiter = new InFlightLimiter({ maxInFlight: depth, tenantWeights: this.#tenantWeights });
      limiters.set(origin, limiter);
    }
    const held = limiter;
    const release = await held.acquire(endpoint.tenantId, endpoint.id);
    return () => {
      release();
      if (held.inFlight === 0 && held.waiting === 0 && limiters.get(origin) === held) limiters.delete(origin);
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
