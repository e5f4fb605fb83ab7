/**
 * One HTTP exchange as an undici dispatch handler, resolving to an {@link Outcome}.
 *
 * Why not undici's `request()`: it wraps every response in a Readable stream,
 * a promise and an AbortSignal listener, which cost more main-thread time per
 * delivery than the request itself (`npm run bench:account` shows the split:
 * `request()` + AbortController + stream capture cost about twice a bare
 * Pool's dispatch). A handler sees the status, the raw
 * headers and the body chunks directly, and gets the exchange's `abort`.
 *
 *   dispatch ─► onConnect(abort) ─► onHeaders ─► onData* ─► onComplete ─► response outcome
 *                    │                                  └─ more than kept + discard bytes ─► abort;
 *                    │                                     response outcome (connection closed)
 *                    └─ onError ─► network / blocked outcome
 *   expire() (the timeout, any time) ─► timeout outcome now (or `unsent()`'s, before onConnect); the exchange is aborted
 *
 * The first of these to happen decides the outcome; later callbacks change nothing.
 */
import type { Dispatcher } from 'undici';
import { durationText } from '../clock.ts';
import type { Outcome } from '../model.ts';

/** Turns what undici reports as an error into an outcome (the sender's classification). */
export type FailureOutcome = (error: unknown) => Outcome;

export interface ExchangeOptions {
  /** Response bytes kept (as UTF-8 text) for the attempt log. */
  readonly keepBytes: number;
  /** After the kept bytes, at most this many more are read and dropped before the connection is cut. */
  readonly discardBytes: number;
  readonly timeoutMs: number;
  readonly failure: FailureOutcome;
  /**
   * Asked when the timeout comes before the request was written to a connection: an outcome that
   * says why (the proxy had not opened its tunnel), or `undefined` for a plain timeout.
   */
  readonly unsent?: () => Outcome | undefined;
}

const LOCATION = 'location';
const RETRY_AFTER = 'retry-after';

export class Exchange implements Dispatcher.DispatchHandler {
  /** Resolves once, with the outcome. */
  readonly outcome: Promise<Outcome>;
  readonly #options: ExchangeOptions;
  #resolve!: (outcome: Outcome) => void;
  #decided = false;
  #abort: ((reason?: Error) => void) | undefined;
  #expired = false;
  #status = 0;
  #location: string | null = null;
  #retryAfter: string | null = null;
  readonly #kept: Buffer[] = [];
  #keptBytes = 0;
  #receivedBytes = 0;

  constructor(options: ExchangeOptions) {
    this.#options = options;
    this.outcome = new Promise<Outcome>((resolve) => {
      this.#resolve = resolve;
    });
  }

  /** The timeout: the outcome is a timeout from now on, and the exchange is cut. */
  expire(): void {
    if (this.#decided) return;
    this.#expired = true;
    const unsent = this.#abort === undefined ? this.#options.unsent?.() : undefined;
    this.#decide(unsent ?? { kind: 'timeout', timeoutMs: this.#options.timeoutMs });
    this.#abort?.(new Error(`timed out after ${durationText(this.#options.timeoutMs)}`));
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.#abort = abort;
    // Expired while waiting for a connection: cut it as soon as it has one.
    if (this.#expired) abort(new Error(`timed out after ${durationText(this.#options.timeoutMs)}`));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    this.#status = statusCode;
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!;
      // Only two headers matter; compare lengths before decoding any name.
      if (name.length !== LOCATION.length && name.length !== RETRY_AFTER.length) continue;
      const lower = name.toString('latin1').toLowerCase();
      if (lower === LOCATION) this.#location ??= rawHeaders[i + 1]!.toString('latin1');
      else if (lower === RETRY_AFTER) this.#retryAfter ??= rawHeaders[i + 1]!.toString('latin1');
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    const room = this.#options.keepBytes - this.#keptBytes;
    if (room > 0) {
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.#kept.push(part);
      this.#keptBytes += part.length;
    }
    this.#receivedBytes += chunk.length;
    if (this.#receivedBytes > this.#options.keepBytes + this.#options.discardBytes) {
      // Cheaper to close the connection than to download the rest.
      this.#decide(this.#response());
      this.#abort?.();
      return false;
    }
    return true;
  }

  onError(error: Error): void {
    this.#decide(this.#options.failure(error));
    this.#abort = undefined;
  }

  #response(): Outcome {
    const body = this.#keptBytes === 0 ? '' : decodeText(Buffer.concat(this.#kept, this.#keptBytes));
    return { kind: 'response', status: this.#status, location: this.#location, retryAfter: this.#retryAfter, body };
  }

  #decide(outcome: Outcome): void {
    if (this.#decided) return;
    this.#decided = true;
    this.#resolve(outcome);
  }

  onComplete(): void {
    this.#decide(this.#response());
    // The exchange is over: let go of undici's request and socket.
    this.#abort = undefined;
  }
}

/** UTF-8 text of the kept bytes, without a character cut in half at the limit. */
function decodeText(bytes: Buffer): string {
  return new TextDecoder('utf-8').decode(bytes, { stream: true });
}
