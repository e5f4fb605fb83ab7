/**
 * The headers that identify and authenticate one delivery request: Standard Webhooks' three
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`), `idempotency-key`, and for a delivery
 * with a sequence number `webhook-sequence` and `webhook-sequence-signature`.
 *
 * `idempotency-key` carries the event id, exactly as `webhook-id` does, for consumers whose HTTP
 * stack deduplicates on that header (an API gateway, a framework middleware, the convention of
 * payment APIs) rather than on a webhook-specific one. Like `webhook-id` it is the same on every
 * attempt, retry and replay of the event, so deduplicating on either sees each event once.
 *
 * `webhook-sequence` is the endpoint's number for the delivery (1, 2, 3, … per endpoint), the same
 * on every attempt and replay, so a consumer that sees a number skipped knows something is still to
 * come. Standard Webhooks signs only `id.timestamp.body`, so the number carries its own signature
 * (lib/signing/signature.ts); a Standard Webhooks verifier ignores both headers.
 */
import { webhookHeaders, type SequenceHeaders, type WebhookHeaders } from '../signing/signature.ts';
import type { RequestSignatures } from '../signing/signing-pool.ts';

/** A type alias rather than an interface, so it is assignable to `Record<string, string>` header maps. */
export type DeliveryHeaders = WebhookHeaders & {
  /** The event id: the same value as `webhook-id`. */
  readonly 'idempotency-key': string;
} & (SequenceHeaders | {});

/**
 * The headers of one attempt to deliver event `eventId`, signed at `timestampSec`: the sequence
 * headers only when the delivery has a number (`sequence`) and it was signed (`signatures`).
 */
export function deliveryHeaders(
  eventId: string,
  timestampSec: number,
  signatures: RequestSignatures,
  sequence: number | null = null,
): DeliveryHeaders {
  const headers = { ...webhookHeaders(eventId, timestampSec, signatures.signature), 'idempotency-key': eventId };
  if (sequence === null || signatures.sequenceSignature === null) return headers;
  return { ...headers, 'webhook-sequence': String(sequence), 'webhook-sequence-signature': signatures.sequenceSignature };
}
