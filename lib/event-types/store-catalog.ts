/**
 * The catalog Herald's own publisher checks events against (`POST /v1/events`, `herald publish`,
 * `Herald.publish()`; lib/producer/publisher.ts): one read of the catalog's version through the
 * store per publish call, and a reload when any node changed the catalog.
 */
import type { EventTypeStore } from '../store/event-type-port.ts';
import { CatalogSnapshot, UNLOADED } from './catalog-snapshot.ts';

export class StoreCatalog {
  readonly #store: Pick<EventTypeStore, 'eventTypeCatalogVersion' | 'eventTypeCatalog'>;
  #snapshot = UNLOADED;

  constructor(store: Pick<EventTypeStore, 'eventTypeCatalogVersion' | 'eventTypeCatalog'>) {
    this.#store = store;
  }

  /** The catalog as the store holds it now. */
  async current(): Promise<CatalogSnapshot> {
    if ((await this.#store.eventTypeCatalogVersion()) !== this.#snapshot.version) {
      this.#snapshot = new CatalogSnapshot(await this.#store.eventTypeCatalog());
    }
    return this.#snapshot;
  }
}
