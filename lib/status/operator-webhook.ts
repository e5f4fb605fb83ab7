/**
 * The operator webhook: each operational event (`endpoint.failing`,
 * `endpoint.disabled`, `endpoint.recovered`, `delivery.exhausted`,
 * `deadletters.unreviewed`) is POSTed
 * as JSON to one URL the operator configures, signed like every Herald
 * webhook (Standard Webhooks, `operator.secret`), and retried a few times.
 *
 * It never blocks or slows deliveries: `notify()` only queues; requests go
 * out on their own undici Agent, at most `maxQueued` messages are kept
 * (the oldest is dropped beyond that), and a retry waits on the injected
 * clock. The URL is the operator's own, so the SSRF guard does not apply.
 *
 * Each message:
 *
 *   queued ─► sending ─┬─ 2xx ──────────────► delivered
 *                      └─ else, timeout ─┬─► waiting (backoffMs × 2^(n-1)) ─► sending
 *                                        └─ attempt maxAttempts ─► failed
 *
 * `close()` cancels waiting retries, aborts requests in flight and closes
 * the Agent.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Agent, request } from 'undici';
import { durationText, type Clock, type TimerHandle } from '../clock.ts';
import { ConfigError } from '../errors.ts';
import type { EngineEvents, OperationalEvent } from '../engine/engine-events.ts';
import { secretKey } from '../signing/secret.ts';
import { signatureHeader, webhookHeaders } from '../signing/signature.ts';

export interface OperatorWebhookOptions {
  /** Where operational events are POSTed. */
  readonly url: string;
  /** The `whsec_` secret that signs them. */
  readonly secret: string;
  /** Attempts per message, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Wait before the first retry; doubled for each next one. @default 1000 */
  readonly backoffMs?: number;
  /** Time allowed per request. @default 5000 */
  readonly timeoutMs?: number;
  /** Messages kept (queued, sending or waiting); beyond it the oldest is dropped. @default 1000 */
  readonly maxQueued?: number;
  /** The node id put in each message. */
  readonly node?: string;
}

export const OPERATOR_WEBHOOK_DEFAULTS = Object.freeze({
  maxAttempts: 5,
  backoffMs: 1_000,
  timeoutMs: 5_000,
  maxQueued: 1_000,
  node: '',
}) satisfies Required<Omit<OperatorWebhookOptions, 'url' | 'secret'>>;

/** What is POSTed: the operational event, with the message id and the node. */
export type OperatorMessage = OperationalEvent & {
  /** The `webhook-id`, the same on every retry of this message. */
  readonly id: string;
  readonly node: string;
};

export interface OperatorWebhookEvents {
  delivered: [{ readonly message: OperatorMessage; readonly attempts: number }];
  /** A retry is waiting until `at`. */
  retrying: [{ readonly message: OperatorMessage; readonly attempt: number; readonly at: number; readonly error: string }];
  failed: [{ readonly message: OperatorMessage; readonly attempts: number; readonly error: string }];
  dropped: [{ readonly message: OperatorMessage }];
}

interface Pending {
  readonly message: OperatorMessage;
  readonly body: string;
  attempts: number;
  timer: TimerHandle | undefined;
  abort: AbortController | undefined;
}

export class OperatorWebhook extends EventEmitter<OperatorWebhookEvents> {
  readonly #options: Required<OperatorWebhookOptions>;
  readonly #key: Buffer;
  readonly #clock: Clock;
  readonly #agent = new Agent({ keepAliveTimeout: 4_000, connections: 2 });
  readonly #pending = new Set<Pending>();
  readonly #unsubscribe: Array<() => void> = [];
  #closed = false;

  constructor(options: OperatorWebhookOptions, clock: Clock) {
    super();
    let url: URL;
    try {
      url = new URL(options.url);
    } catch {
      throw new ConfigError('operator.webhookUrl', options.url, 'must be an http(s) URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('operator.webhookUrl', options.url, 'must be an http(s) URL');
    try {
      this.#key = secretKey(options.secret);
    } catch {
      throw new ConfigError('operator.secret', '(hidden)', 'must be whsec_ followed by base64');
    }
    this.#options = { ...OPERATOR_WEBHOOK_DEFAULTS, ...options };
    for (const key of ['maxAttempts', 'backoffMs', 'timeoutMs', 'maxQueued'] as const) {
      const value = this.#options[key];
      if (!Number.isInteger(value) || value < 1) throw new ConfigError(`operator.${key}`, value, 'must be a positive integer');
    }
    this.#clock = clock;
  }

  /** Sends every operational event of `events` until `close()`. */
  attach(events: EventEmitter<EngineEvents>): this {
    const listener = (e: OperationalEvent): void => this.notify(e);
    events.on('operational', listener);
    this.#unsubscribe.push(() => events.off('operational', listener));
    return this;
  }

  /** Queues one event; returns at once. */
  notify(event: OperationalEvent): void {
    if (this.#closed) return;
    const message: OperatorMessage = { id: `op_${randomUUID().replaceAll('-', '')}`, node: this.#options.node, ...event };
    const pending: Pending = { message, body: JSON.stringify(message), attempts: 0, timer: undefined, abort: undefined };
    if (this.#pending.size >= this.#options.maxQueued) {
      const oldest = this.#pending.values().next().value as Pending;
      this.#forget(oldest);
      this.emit('dropped', { message: oldest.message });
    }
    this.#pending.add(pending);
    void this.#send(pending);
  }

  /** Messages not yet delivered or given up. */
  get queued(): number {
    return this.#pending.size;
  }

  /** Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const off of this.#unsubscribe.splice(0)) off();
    for (const pending of [...this.#pending]) this.#forget(pending);
    await this.#agent.close();
  }

  async #send(pending: Pending): Promise<void> {
    if (this.#closed || !this.#pending.has(pending)) return;
    pending.attempts++;
    const abort = new AbortController();
    pending.abort = abort;
    const timeout = this.#clock.setTimeout(() => abort.abort(), this.#options.timeoutMs);
    let error: string | null;
    try {
      const timestampSec = Math.floor(this.#clock.now() / 1000);
      const signature = signatureHeader([this.#key], pending.message.id, timestampSec, pending.body);
      const response = await request(this.#options.url, {
        method: 'POST',
        dispatcher: this.#agent,
        signal: abort.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Herald-Operator/0.1',
          ...webhookHeaders(pending.message.id, timestampSec, signature),
        },
        body: pending.body,
      });
      await response.body.dump();
      error = response.statusCode >= 200 && response.statusCode < 300 ? null : `HTTP ${response.statusCode}`;
    } catch (cause) {
      error = abort.signal.aborted ? `timeout after ${durationText(this.#options.timeoutMs)}` : ((cause as Error)?.message ?? String(cause));
    } finally {
      timeout.cancel();
      pending.abort = undefined;
    }
    if (this.#closed || !this.#pending.has(pending)) return;
    if (error === null) {
      this.#pending.delete(pending);
      this.emit('delivered', { message: pending.message, attempts: pending.attempts });
    } else if (pending.attempts >= this.#options.maxAttempts) {
      this.#pending.delete(pending);
      this.emit('failed', { message: pending.message, attempts: pending.attempts, error });
    } else {
      const delay = this.#options.backoffMs * 2 ** (pending.attempts - 1);
      const at = this.#clock.now() + delay;
      pending.timer = this.#clock.setTimeout(() => void this.#send(pending), delay);
      this.emit('retrying', { message: pending.message, attempt: pending.attempts, at, error });
    }
  }

  #forget(pending: Pending): void {
    this.#pending.delete(pending);
    pending.timer?.cancel();
    pending.abort?.abort();
  }
}
