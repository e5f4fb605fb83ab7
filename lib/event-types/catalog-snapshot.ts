/**
 * The catalog as one publisher holds it: each type's newest schema, at one catalog version. Every
 * publish path (lib/producer/) keeps one per connection, checks the catalog's version against its
 * own before it writes, reloads when they differ, and checks the payloads of the events it is
 * about to store with {@link CatalogSnapshot.check}. A type not in the catalog, or whose newest
 * version has no schema, is not checked: the catalog is opt-in.
 */
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { CatalogEntry, EventTypeCatalog } from '../store/event-type-port.ts';
import { checkPayload, compiledSchema } from './schema-check.ts';

/** What the check needs of an event about to be published (a validated input). */
export interface PayloadToCheck {
  readonly type: string;
  /** The payload's JSON text, as it will be stored. */
  readonly payloadJson: string;
}

export class CatalogSnapshot {
  /** The catalog's version this copy is at. */
  readonly version: number;
  readonly #entries: ReadonlyMap<string, CatalogEntry>;
  /** Compiled on first use, per type. */
  readonly #checks = new Map<string, ValidateFunction>();

  constructor(catalog: EventTypeCatalog) {
    this.version = catalog.version;
    this.#entries = new Map(catalog.entries.filter((entry) => entry.schema !== null).map((entry) => [entry.name, entry]));
  }

  /** The types whose payloads are checked. */
  get checkedTypes(): number {
    return this.#entries.size;
  }

  /**
   * Checks each event whose type has a schema; in a list of several, the field names the item
   * (`[3].payload/amount`), as every publish error does.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) for the first payload that does not match.
   */
  check(events: readonly PayloadToCheck[]): void {
    if (this.#entries.size === 0) return;
    events.forEach((event, i) => {
      const validate = this.#checkOf(event.type);
      if (validate !== undefined) checkPayload(validate, JSON.parse(event.payloadJson) as unknown, events.length > 1 ? `[${i}].` : '');
    });
  }

  #checkOf(type: string): ValidateFunction | undefined {
    let validate = this.#checks.get(type);
    if (validate !== undefined) return validate;
    const schema = this.#entries.get(type)?.schema;
    if (schema === undefined || schema === null) return undefined;
    // Stored schemas compiled when they were given; one that no longer does (another Ajv) names its type.
    validate = compiledSchema(schema, `type ${type}: schema`);
    this.#checks.set(type, validate);
    return validate;
  }
}

/** An empty catalog at version -1: never current, so the first check loads the real one. */
export const UNLOADED = new CatalogSnapshot({ version: -1, entries: [] });

/**
 * The snapshot each connection last loaded, by the connection object and a scope within it (the
 * PostgreSQL schema, the MongoDB database's name). Weakly held: a closed connection lets its copy go.
 */
export class ConnectionCatalogs {
  readonly #byConnection = new WeakMap<object, Map<string, CatalogSnapshot>>();

  get(connection: object, scope = ''): CatalogSnapshot | undefined {
    return this.#byConnection.get(connection)?.get(scope);
  }

  set(connection: object, scope: string, snapshot: CatalogSnapshot): CatalogSnapshot {
    let scopes = this.#byConnection.get(connection);
    if (scopes === undefined) {
      scopes = new Map();
      this.#byConnection.set(connection, scopes);
    }
    scopes.set(scope, snapshot);
    return snapshot;
  }
}
