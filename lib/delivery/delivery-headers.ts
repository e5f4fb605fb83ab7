/**
 * The headers that identify and authenticate one delivery request: Standard Webhooks' three
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and `idempotency-key`.
 *
 * `idempotency-key` carries the event id, exactly as `webhook-id` does, for consumers whose HTTP
 * stack deduplicates on that header (an API gateway, a framework middleware, the convention of
 * payment APIs) rather than on a webhook-specific one. Like `webhook-id` it is the same on every
 * attempt, retry and replay of the event, so deduplicating on either sees each event once.
 */
import { webhookHeaders, type WebhookHeaders } from '../signing/signature.ts';

/** A type alias rather than an interface, so it is assignable to `Record<string, string>` header maps. */
export type DeliveryHeaders = WebhookHeaders & {
  /** The event id: the same value as `webhook-id`. */
  readonly 'idempotency-key': string;
};

/** The headers of one attempt to deliver event `eventId`, signed at `timestampSec` with `signatureHeader`. */
export function deliveryHeaders(eventId: string, timestampSec: number, signatureHeader: string): DeliveryHeaders {
  return { ...webhookHeaders(eventId, timestampSec, signatureHeader), 'idempotency-key': eventId };
}
