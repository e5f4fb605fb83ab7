/**
 * Publishing through Herald rather than inside the producer's own transaction: `POST /v1/events`,
 * `herald publish`, `Herald.publish()`, and the test event an operator sends to one endpoint.
 * Events are validated whole before any is written; an event whose `id` is stored already is
 * answered with the stored one (a retried request writes nothing twice).
 */
import type { Clock } from '../clock.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import { deliveryIdFor } from '../ids.ts';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { StoreCatalog } from '../event-types/store-catalog.ts';
import type { Store } from '../store/port.ts';
import { PublishPath, tracePublish } from '../tracing/publish-span.ts';
import { outboxEventOf, validateEventInputs, type ValidEventInput } from './validate-event.ts';

/** The type of the event `sendTestEvent` sends: consumers can recognise it and answer 2xx without acting. */
export const TEST_EVENT_TYPE = 'herald.test';

/** Events in one publish call, at most. */
const MAX_EVENTS_PER_CALL = 1000;

export class Publisher {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #maxPayloadBytes: number;
  readonly #published: () => void;
  /** The event-type catalog payloads are checked against, current as of each call. */
  readonly #catalog: StoreCatalog;
  readonly #tracing: boolean;

  constructor(deps: {
    readonly store: Store;
    readonly clock: Clock;
    /** `delivery.maxPayloadBytes`. */
    readonly maxPayloadBytes: number;
    /** Tells this node's engine there are new events. */
    readonly published: () => void;
    /** A `herald publish` span, and the producer's trace context stored (`tracing.enabled`). @default true */
    readonly tracing?: boolean;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#maxPayloadBytes = deps.maxPayloadBytes;
    this.#published = deps.published;
    this.#catalog = new StoreCatalog(deps.store);
    this.#tracing = deps.tracing ?? true;
  }

  /**
   * An event or a list of 1 to 1000.
   * @throws ValidationError naming the field (`[3].tenantId` in a list; `payload/<JSON pointer>` for a
   *   payload its type's schema refuses); NotFoundError for an
   *   unknown tenant, or an `endpointId` that is not the tenant's.
   */
  async publish(input: unknown): Promise<OutboxEvent[]> {
    const inputs = Array.isArray(input) ? input : [input];
    if (inputs.length === 0 || inputs.length > MAX_EVENTS_PER_CALL) {
      throw new ValidationError('body', `must be an event or a list of 1 to ${MAX_EVENTS_PER_CALL} events`);
    }
    const validated = validateEventInputs(input, { maxPayloadBytes: this.#maxPayloadBytes });
    return tracePublish(PublishPath.HERALD, (traceContext) => this.#write(inputs.length, validated, traceContext), this.#tracing);
  }

  async #write(count: number, validated: readonly ValidEventInput[], traceContext: TraceContext | null): Promise<OutboxEvent[]> {
    const events: OutboxEvent[] = [];
    const fresh: OutboxEvent[] = [];
    (await this.#catalog.current()).check(validated);
    for (const [i, valid] of validated.entries()) {
      if (valid.id !== undefined) {
        const existing = await this.#store.getEvent(valid.id);
        if (existing !== undefined) {
          events.push(existing);
          continue;
        }
      }
      // In a list, the field names the item: `[3].tenantId`.
      const at = count > 1 ? `[${i}].` : '';
      if (!(await this.#store.tenantExists(valid.tenantId))) throw new NotFoundError('tenant', valid.tenantId, `${at}tenantId`);
      if (valid.endpointId !== undefined) {
        const target = await this.#store.getEndpoint(valid.endpointId);
        if (target === undefined || target.tenantId !== valid.tenantId) {
          throw new NotFoundError('endpoint', valid.endpointId, `${at}endpointId`);
        }
      }
      const event = outboxEventOf(valid, this.#clock.now(), traceContext);
      events.push(event);
      fresh.push(event);
    }
    if (fresh.length > 0) await this.#store.appendEvents(fresh);
    this.#published();
    return events;
  }

  /**
   * Sends a `herald.test` event to this one endpoint (whatever its event-type filter) through the
   * usual path: outbox, signing, retries, the delivery log. Its payload is small and says so.
   * @returns the event and the id of its delivery, to follow its attempts.
   * @throws NotFoundError (`endpointId`).
   */
  async sendTestEvent(endpointId: string): Promise<{ event: OutboxEvent; deliveryId: string }> {
    const endpoint = await this.#store.getEndpoint(endpointId);
    if (endpoint === undefined) throw new NotFoundError('endpoint', endpointId, 'endpointId');
    const sentAt = new Date(this.#clock.now()).toISOString();
    const payload = { test: true, endpointId, message: 'A test event sent from Herald: answer 2xx, nothing to do.', sentAt };
    const [event] = await this.publish({ tenantId: endpoint.tenantId, endpointId, type: TEST_EVENT_TYPE, payload });
    if (event === undefined) throw new Error('publish returned no event');
    return { event, deliveryId: deliveryIdFor(event.id, endpointId, event.createdAt) };
  }
}
