/**
 * The event-type catalog's administration (`/v1/event-types`, `herald event-types`): create, list,
 * read, change, deprecate and delete the types the producer platform defines. A schema is compiled
 * when it is given, so one that does not compile is refused then, never at publish; a new schema
 * (or `null`, no check) makes a new version, and the newest version is the one enforced at
 * publish. Deprecating marks a type and refuses nothing. Deleting a type leaves the events already
 * stored as they are.
 */
import type { Clock } from '../clock.ts';
import { NotFoundError } from '../errors.ts';
import type { EventType, EventTypePatch, EventTypeStore, JsonSchemaObject } from '../store/event-type-port.ts';
import { eventTypeName, validateEventTypeChange, validateNewEventType } from './event-type-input.ts';
import { compiledSchema } from './schema-check.ts';

export class EventTypeAdmin {
  readonly #store: EventTypeStore;
  readonly #clock: Clock;

  constructor(deps: { readonly store: EventTypeStore; readonly clock: Clock }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  /**
   * @throws ValidationError naming the field (`schema` when it does not compile, with Ajv's reason).
   * @throws ConflictError when a type of that name exists.
   */
  async create(input: unknown): Promise<EventType> {
    const valid = validateNewEventType(input);
    if (valid.schema !== null) compiledSchema(valid.schema);
    const now = this.#clock.now();
    const type: EventType = {
      name: valid.name,
      description: valid.description,
      versions: [{ version: 1, schema: valid.schema, createdAt: now }],
      deprecated: valid.deprecated,
      deprecatedAt: valid.deprecated ? now : null,
      deprecationNote: valid.deprecated ? valid.deprecationNote : null,
      createdAt: now,
      updatedAt: now,
    };
    await this.#store.createEventType(type);
    return type;
  }

  /** Every type, by name. */
  async list(): Promise<EventType[]> {
    return this.#store.listEventTypes();
  }

  /** @throws NotFoundError (`name`). */
  async get(name: string): Promise<EventType> {
    const type = await this.#store.getEventType(eventTypeName(name));
    if (type === undefined) throw unknownType(name);
    return type;
  }

  /**
   * Changes the description, the schema (a new version, unless it is the newest one's already) or
   * the deprecation.
   * @throws ValidationError naming the field; NotFoundError (`name`).
   */
  async update(name: string, input: unknown): Promise<EventType> {
    const change = validateEventTypeChange(input);
    if (change.schema !== undefined && change.schema !== null) compiledSchema(change.schema);
    const current = await this.get(name);
    const patch: { -readonly [K in keyof EventTypePatch]: EventTypePatch[K] } = {};
    if (change.description !== undefined) patch.description = change.description;
    if (change.schema !== undefined && !sameSchema(change.schema, current.versions.at(-1)?.schema ?? null)) patch.schema = change.schema;
    if (change.deprecated !== undefined) patch.deprecation = change.deprecated ? { note: change.deprecationNote ?? null } : null;
    const updated = await this.#store.updateEventType(name, patch, this.#clock.now());
    if (updated === undefined) throw unknownType(name);
    return updated;
  }

  /** @throws NotFoundError (`name`). */
  async delete(name: string): Promise<void> {
    if (!(await this.#store.deleteEventType(eventTypeName(name)))) throw unknownType(name);
  }
}

function unknownType(name: string): NotFoundError {
  return new NotFoundError('event type', name, 'name');
}

/** The same schema, whatever the order of its keys (a store may keep them in another order). */
function sameSchema(a: JsonSchemaObject | null, b: JsonSchemaObject | null): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${canonical(inner)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
