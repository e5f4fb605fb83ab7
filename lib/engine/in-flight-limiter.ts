/**
 * The node-wide cap on requests in flight, shared by weighted round-robin
 * between tenants and, within a tenant, round-robin between its endpoints:
 * when a permit frees up it goes to the next tenant in turn, and within that
 * tenant to its next endpoint in turn, never to whoever queued most. A tenant
 * with 1 000 busy endpoints holds one place in the tenants' turn, so it cannot
 * delay another tenant's first attempt by more than its weight's worth of
 * grants; one endpoint's backlog cannot delay its tenant's other endpoints.
 *
 * State: `#inFlight` permits out. `#turns` is the FIFO of tenants with waiters;
 * the one at its head is served up to its weight in grants in a row (its
 * `credit`), then goes to the back with its credit restored. Each tenant has a
 * FIFO of its endpoints with waiters, and each endpoint a FIFO of waiters; an
 * endpoint served goes to the back of its tenant's FIFO. A tenant or endpoint
 * leaves its FIFO when it has no waiter left. Every grant is O(1).
 *
 * The bound: a tenant that starts waiting joins the back of `#turns`, so at
 * most `W` grants go to others before its first one, where `W` is the sum of
 * the weights of the tenants already waiting.
 */
import { ConfigError } from '../errors.ts';

export type ReleasePermit = () => void;

export interface InFlightLimiterOptions {
  /** Permits out at once (`delivery.maxInFlight`). */
  readonly maxInFlight: number;
  /** Grants in a row per turn, by tenant id (`delivery.tenantWeights`); a tenant not listed has weight 1. @default {} */
  readonly tenantWeights?: Readonly<Record<string, number>>;
}

/** The most grants in a row a tenant may have per turn. */
export const MAX_TENANT_WEIGHT = 1_000;

type Waiter = (release: ReleasePermit) => void;

interface TenantTurn {
  readonly id: string;
  readonly weight: number;
  /** Grants left in its current turn. */
  credit: number;
  /** Its endpoints with waiters, in turn. */
  readonly endpoints: Fifo<EndpointTurn>;
  readonly byEndpoint: Map<string, EndpointTurn>;
}

interface EndpointTurn {
  readonly id: string;
  readonly waiters: Fifo<Waiter>;
}

export class InFlightLimiter {
  readonly #max: number;
  readonly #weights: ReadonlyMap<string, number>;
  #inFlight = 0;
  #waiting = 0;
  readonly #turns = new Fifo<TenantTurn>();
  readonly #tenants = new Map<string, TenantTurn>();

  constructor(options: InFlightLimiterOptions) {
    const { maxInFlight, tenantWeights = {} } = options;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
      throw new ConfigError('delivery.maxInFlight', maxInFlight, 'must be an integer >= 1');
    }
    for (const [tenantId, weight] of Object.entries(tenantWeights)) {
      if (!isTenantWeight(weight)) throw new ConfigError(`delivery.tenantWeights.${tenantId}`, weight, TENANT_WEIGHT_RULE);
    }
    this.#max = maxInFlight;
    this.#weights = new Map(Object.entries(tenantWeights));
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get waiting(): number {
    return this.#waiting;
  }

  /** A tenant's grants in a row per turn. */
  weightOf(tenantId: string): number {
    return this.#weights.get(tenantId) ?? 1;
  }

  /** Resolves with a release function once a permit is free for this tenant's endpoint. */
  acquire(tenantId: string, endpointId: string): Promise<ReleasePermit> {
    if (this.#inFlight < this.#max && this.#turns.size === 0) {
      this.#inFlight++;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve) => {
      let tenant = this.#tenants.get(tenantId);
      if (tenant === undefined) {
        const weight = this.weightOf(tenantId);
        tenant = { id: tenantId, weight, credit: weight, endpoints: new Fifo(), byEndpoint: new Map() };
        this.#tenants.set(tenantId, tenant);
        this.#turns.push(tenant);
      }
      let endpoint = tenant.byEndpoint.get(endpointId);
      if (endpoint === undefined) {
        endpoint = { id: endpointId, waiters: new Fifo() };
        tenant.byEndpoint.set(endpointId, endpoint);
        tenant.endpoints.push(endpoint);
      }
      endpoint.waiters.push(resolve);
      this.#waiting++;
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
    while (this.#inFlight < this.#max) {
      const tenant = this.#turns.peek();
      if (tenant === undefined) return;
      const endpoint = tenant.endpoints.shift() as EndpointTurn;
      const next = endpoint.waiters.shift() as Waiter;
      if (endpoint.waiters.size > 0) tenant.endpoints.push(endpoint);
      else tenant.byEndpoint.delete(endpoint.id);
      tenant.credit--;
      if (tenant.endpoints.size === 0) {
        this.#turns.shift();
        this.#tenants.delete(tenant.id);
      } else if (tenant.credit === 0) {
        tenant.credit = tenant.weight;
        this.#turns.push(this.#turns.shift() as TenantTurn);
      }
      this.#waiting--;
      this.#inFlight++;
      next(this.#releaser());
    }
  }
}

export const TENANT_WEIGHT_RULE = `must be an integer from 1 to ${MAX_TENANT_WEIGHT}`;

export function isTenantWeight(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_TENANT_WEIGHT;
}

/** A first-in first-out queue with O(1) push and shift (an array's `shift()` moves every element). */
class Fifo<T> {
  #items: Array<T | undefined> = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    // Compact once the consumed half outweighs the rest: amortised O(1).
    if (this.#head > 64 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}
