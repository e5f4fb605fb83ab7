/**
 * The endpoints that may have more due than their actor holds, in the order refills serve them:
 * round-robin between tenants, then between a tenant's endpoints. A tenant with 1 000 endpoints
 * waiting takes one turn in each round of tenants, not 1 000, so a tenant with one endpoint
 * waiting is reached within one turn per other tenant waiting, whatever the room a refill has.
 *
 * State: per tenant, a FIFO of its endpoints (a `Set`, in insertion order), and the tenants in
 * turn order (a `Map`, in insertion order). `served()` moves an endpoint to the back of its
 * tenant's FIFO and the tenant to the back of the turn; an endpoint leaves with `delete()`, and a
 * tenant with its last endpoint.
 */
export class RefillQueue {
  /** Tenants in turn, each with its endpoints in turn. */
  readonly #tenants = new Map<string, Set<string>>();
  readonly #tenantOf = new Map<string, string>();

  get size(): number {
    return this.#tenantOf.size;
  }

  has(endpointId: string): boolean {
    return this.#tenantOf.has(endpointId);
  }

  /** Joins at the back of its tenant's endpoints (and its tenant at the back of the turn, if new); no change if already in. */
  add(endpointId: string, tenantId: string): void {
    if (this.#tenantOf.has(endpointId)) return;
    this.#tenantOf.set(endpointId, tenantId);
    let endpoints = this.#tenants.get(tenantId);
    if (endpoints === undefined) {
      endpoints = new Set();
      this.#tenants.set(tenantId, endpoints);
    }
    endpoints.add(endpointId);
  }

  delete(endpointId: string): void {
    const tenantId = this.#tenantOf.get(endpointId);
    if (tenantId === undefined) return;
    this.#tenantOf.delete(endpointId);
    const endpoints = this.#tenants.get(tenantId)!;
    endpoints.delete(endpointId);
    if (endpoints.size === 0) this.#tenants.delete(tenantId);
  }

  /** It was refilled and may have more still: to the back of its tenant's endpoints, its tenant to the back of the turn. */
  served(endpointId: string): void {
    const tenantId = this.#tenantOf.get(endpointId);
    if (tenantId === undefined) return;
    const endpoints = this.#tenants.get(tenantId)!;
    endpoints.delete(endpointId);
    endpoints.add(endpointId);
    this.#tenants.delete(tenantId);
    this.#tenants.set(tenantId, endpoints);
  }

  /**
   * Every endpoint once, in turn: each tenant's first, then each tenant's second, and so on. Lazy,
   * so a refill that stops early pays for what it took. `delete()` while iterating is safe;
   * `add()` and `served()` are not (they may show an endpoint twice).
   */
  *inTurn(): IterableIterator<string> {
    let cursors = [...this.#tenants.values()].map((endpoints) => endpoints.values());
    while (cursors.length > 0) {
      const left: Array<IterableIterator<string>> = [];
      for (const cursor of cursors) {
        const next = cursor.next();
        if (next.done === true) continue;
        yield next.value;
        left.push(cursor);
      }
      cursors = left;
    }
  }
}
