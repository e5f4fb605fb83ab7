/**
 * The signing pool's worker: signs a batch of requests and returns their
 * `webhook-signature` header values, in order, each followed by its
 * `webhook-sequence-signature` when the request has a sequence (one flat
 * list of strings: cheaper to send back than an object per request).
 *
 * It runs in a piscina worker thread, loaded the way the main thread's modules
 * are: compiled, or through tsx (see `workerExecArgv`). Keys arrive as strings
 * rather than Buffers: a small Buffer is a view into Node's shared 8 KiB
 * allocation slab, and structured cloning a view copies its whole underlying
 * ArrayBuffer, so 32 key bytes would travel as 8 KiB. An HMAC key is its bytes
 * in base64; an ed25519 key is its `whsk_` text (base64 has no `_`, so the two
 * cannot be confused), opened once and kept across batches: opening one costs about as much as
 * signing with it.
 */
import { ED25519_SECRET_PREFIX, ed25519SigningKey } from './ed25519-key.ts';
import { sequenceSignatureHeader, signatureHeader, type SigningKey } from './signature.ts';

/** One request as it crosses to the worker. */
export interface SignTask {
  /** HMAC keys as base64 (the decoded `whsec_` secrets) and ed25519 keys as their `whsk_` text. */
  readonly keys: readonly string[];
  readonly id: string;
  readonly timestampSec: number;
  readonly body: string;
  /** The delivery's sequence number, when it has one: its signature follows the body's. */
  readonly sequence?: number;
}

/** Opened ed25519 keys by their `whsk_` text, kept across batches; past this many, the cache starts over. */
const ED25519_KEYS_MAX = 4_096;
const ed25519Keys = new Map<string, SigningKey>();

function ed25519KeyOf(text: string): SigningKey {
  let key = ed25519Keys.get(text);
  if (key === undefined) {
    key = ed25519SigningKey(text);
    if (ed25519Keys.size >= ED25519_KEYS_MAX) ed25519Keys.clear();
    ed25519Keys.set(text, key);
  }
  return key;
}

/** Piscina calls this export by name (see `SigningPool`), so the module needs no default export. */
export function signBatch(batch: readonly SignTask[]): string[] {
  // Requests in one batch mostly share an endpoint's secrets: decode each HMAC key once.
  const decoded = new Map<string, SigningKey>();
  const keyOf = (encoded: string): SigningKey => {
    if (encoded.startsWith(ED25519_SECRET_PREFIX)) return ed25519KeyOf(encoded);
    let key = decoded.get(encoded);
    if (key === undefined) {
      key = Buffer.from(encoded, 'base64');
      decoded.set(encoded, key);
    }
    return key;
  };
  const headers: string[] = [];
  for (const task of batch) {
    const keys = task.keys.map(keyOf);
    headers.push(signatureHeader(keys, task.id, task.timestampSec, task.body));
    if (task.sequence !== undefined) headers.push(sequenceSignatureHeader(keys, task.id, task.timestampSec, task.sequence));
  }
  return headers;
}
