/**
 * Signs webhook requests off the main thread, in batches.
 *
 * One piscina task costs the main thread more messaging than a dozen HMACs
 * of 1 KiB bodies signed inline (`npm run bench -- --only=signing` measures
 * both), so a task only pays when it carries many signatures. `sign()` therefore queues requests
 * and flushes them in a microtask, once per turn of the event loop:
 *
 *   sign() ─► queue ─► microtask flush ─┬─ total bytes < inlineMaxBytes: sign inline, now
 *                                       └─ otherwise: tasks of ≤ batchMaxCount requests
 *                                          and ≤ batchMaxBytes of bodies ─► piscina
 *
 * Lifecycle: open ──close()──► closed. Once closed, queued and later
 * requests reject with ClosedError, and so do requests whose task the pool
 * was still running; the worker threads are destroyed. piscina itself is
 * loaded and its pool made at the first flush too large to sign inline
 * (`started`): a node whose bodies are small never pays for either. Idle
 * threads exit after `idleTimeoutMs`, and piscina unrefs a thread while it
 * has no task, so an idle pool never keeps the process alive.
 *
 * If a worker fails outside a task (it cannot even load), piscina emits
 * 'error' and would start no more workers, leaving tasks queued forever.
 * The pool then degrades: what is in flight and everything after is signed
 * inline, and `poolFailure` holds the error for health checks.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Piscina } from 'piscina';
import { ClosedError, ConfigError } from '../errors.ts';
import type { SignTask } from './sign-worker.ts';
import { Ed25519SigningKey } from './ed25519-key.ts';
import { assertSequence, assertSignable, sequenceSignatureHeader, signatureHeader, type SigningKey } from './signature.ts';
import { workerExecArgv } from '../worker-exec-argv.ts';
import { workerModule } from '../worker-module.ts';

const KiB = 1024;
const SECOND = 1000;

/**
 * What one ed25519 signature weighs in the byte counts that decide inline or pooled and size the
 * batches. An ed25519 signature costs ≈ 100 µs whatever the body, 15 to 50 times an HMAC of a small
 * body and about a pool task's messaging (`scripts/bench/signature-kinds.ts`): counted as 16 KiB, a
 * flush holding even one goes to the worker rather than stalling the main thread.
 */
const ED25519_WEIGHT_BYTES = 16 * KiB;

export interface SigningPoolOptions {
  /** Worker threads. @default 1 */
  readonly threads?: number;
  /**
   * Most body bytes in one task. Batches are sized by bytes, not only by
   * count: a big batch of big bodies costs more to copy than it saves.
   * A single larger body still goes, alone. Bodies are counted in characters
   * (UTF-16 code units: bytes, for ASCII JSON), which costs nothing to read.
   * Why 1 MiB: sixteen 64 KiB bodies per task cost the main thread about half
   * of signing them inline, while four barely save anything (the signing bench).
   * @default 1 MiB
   */
  readonly batchMaxBytes?: number;
  /** Most requests in one task; at 64 the task's messaging is spread thin enough that signing 1 KiB bodies costs the main thread less than inline. @default 64 */
  readonly batchMaxCount?: number;
  /**
   * A flush whose bodies total fewer bytes is signed inline on the main
   * thread; 0 sends everything to the pool. Each ed25519 signature counts as
   * 16 KiB more (it costs as much as HMACs of that many bytes): by default a
   * flush with one goes to the pool.
   *
   * Why 16 KiB: inline HMAC costs grow with the body, a task's messaging does
   * not; about sixteen 1 KiB bodies signed inline cost what one task costs the
   * main thread, so below that the pool would cost more than it saves. Under
   * load on 2 cores, inline 1 KiB signing also delivered more events per
   * second than any batching (the signing bench).
   * @default 16 KiB
   */
  readonly inlineMaxBytes?: number;
  /** An idle worker thread exits after this long; the next large flush starts one again. @default 30 s */
  readonly idleTimeoutMs?: number;
}

export interface SignRequest {
  /** HMAC keys (decoded `whsec_` secrets) and ed25519 keys (opened `whsk_`), see `signingKey()`; current first; each signs. */
  readonly keys: readonly SigningKey[];
  /** The `webhook-id`: the event id. */
  readonly id: string;
  /** The `webhook-timestamp`, whole seconds. */
  readonly timestampSec: number;
  /** The body exactly as sent. */
  readonly body: string;
  /**
   * The delivery's sequence number (`webhook-sequence`), if it has one: {@link SigningPool.signRequest}
   * signs it too, with the same keys, in the same task.
   */
  readonly sequence?: number | null;
}

/** The signatures of one request. */
export interface RequestSignatures {
  /** The `webhook-signature` header value. */
  readonly signature: string;
  /** The `webhook-sequence-signature` header value; `null` when the request has no sequence. */
  readonly sequenceSignature: string | null;
}

/** How many requests went each way, and how many pool tasks carried them. */
export interface SigningStats {
  readonly inline: number;
  readonly pooled: number;
  readonly tasks: number;
}

const DEFAULTS = Object.freeze({
  threads: 1,
  batchMaxBytes: 1024 * KiB,
  batchMaxCount: 64,
  inlineMaxBytes: 16 * KiB,
  idleTimeoutMs: 30 * SECOND,
} satisfies Required<SigningPoolOptions>);

interface Pending {
  readonly request: SignRequest;
  /** The sequence to sign too, or undefined. */
  readonly sequence: number | undefined;
  readonly bytes: number;
  readonly resolve: (signature: string, sequenceSignature: string | null) => void;
  readonly reject: (error: unknown) => void;
}

const WORKER_MODULE = workerModule(import.meta.url, './sign-worker');
const load = createRequire(import.meta.url);

export class SigningPool {
  readonly #options: Required<SigningPoolOptions>;
  /** Made at the first pooled flush. */
  #pool: Piscina<readonly SignTask[], string[]> | undefined;
  #queue: Pending[] = [];
  #flushQueued = false;
  #closed = false;
  /** Batches handed to piscina and not yet settled. */
  readonly #inFlight = new Set<readonly Pending[]>();
  #poolFailure: unknown;
  readonly #stats = { inline: 0, pooled: 0, tasks: 0 };

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming the option and value that break a rule. */
  constructor(options: SigningPoolOptions = {}) {
    this.#options = validate({ ...DEFAULTS, ...stripUndefined(options) });
  }

  /** Whether the worker pool exists: made at the first flush too large to sign inline. */
  get started(): boolean {
    return this.#pool !== undefined;
  }

  /** Why the worker threads were given up and signing went inline, if they were. */
  get poolFailure(): unknown {
    return this.#poolFailure;
  }

  /** Counters since construction; a snapshot. */
  get stats(): SigningStats {
    return { ...this.#stats };
  }

  /**
   * The `webhook-signature` header value for one request: `v1,<sig>` per HMAC
   * key, `v1a,<sig>` per ed25519 key, space-separated.
   *
   * @throws ClosedError (`HERALD_CLOSED`, as a rejection) once `close()` was called.
   * @throws ValidationError (`HERALD_INVALID_INPUT`, as a rejection) with no keys or a bad timestamp.
   */
  sign(request: SignRequest): Promise<string> {
    if (this.#closed) return Promise.reject(new ClosedError('signing pool'));
    return new Promise<string>((resolve, reject) => this.#enqueue(request, undefined, (signature) => resolve(signature), reject));
  }

  /**
   * Both signatures of one request: `webhook-signature`, and `webhook-sequence-signature` when
   * `request.sequence` is set (`lib/signing/signature.ts`), made in the same task.
   *
   * @throws ClosedError (`HERALD_CLOSED`, as a rejection) once `close()` was called.
   * @throws ValidationError (`HERALD_INVALID_INPUT`, as a rejection) with no keys, a bad timestamp
   *   or a sequence that is not a whole number ≥ 1.
   */
  signRequest(request: SignRequest): Promise<RequestSignatures> {
    if (this.#closed) return Promise.reject(new ClosedError('signing pool'));
    const sequence = request.sequence ?? undefined;
    return new Promise<RequestSignatures>((resolve, reject) =>
      this.#enqueue(request, sequence, (signature, sequenceSignature) => resolve({ signature, sequenceSignature }), reject),
    );
  }

  #enqueue(request: SignRequest, sequence: number | undefined, resolve: Pending['resolve'], reject: Pending['reject']): void {
    // Validate now, alone, so one bad request cannot fail the batch it would join.
    try {
      assertSignable(request.keys, request.timestampSec);
      if (sequence !== undefined) assertSequence(sequence);
    } catch (error) {
      reject(error);
      return;
    }
    // Characters, not UTF-8 bytes: only batches are sized by it, and `length` costs nothing
    // while `Buffer.byteLength` reads the whole body on the main thread.
    let bytes = request.body.length;
    for (const key of request.keys) if (key instanceof Ed25519SigningKey) bytes += ED25519_WEIGHT_BYTES * (sequence === undefined ? 1 : 2);
    this.#queue.push({ request, sequence, bytes, resolve, reject });
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(() => this.#flush());
    }
  }

  /** Rejects what is queued or running with ClosedError and destroys the worker threads. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#rejectAll(this.#queue.splice(0), undefined);
    await this.#pool?.destroy();
  }

  #flush(): void {
    this.#flushQueued = false;
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    let total = 0;
    for (const pending of queue) total += pending.bytes;
    if (total < this.#options.inlineMaxBytes || this.#poolFailure !== undefined) this.#signInline(queue);
    else this.#signPooled(queue);
  }

  #signInline(queue: readonly Pending[]): void {
    this.#stats.inline += queue.length;
    for (const { request, sequence, resolve, reject } of queue) {
      try {
        const signature = signatureHeader(request.keys, request.id, request.timestampSec, request.body);
        resolve(signature, sequence === undefined ? null : sequenceSignatureHeader(request.keys, request.id, request.timestampSec, sequence));
      } catch (error) {
        reject(error);
      }
    }
  }

  #signPooled(queue: readonly Pending[]): void {
    const { batchMaxBytes, batchMaxCount } = this.#options;
    let batch: Pending[] = [];
    let bytes = 0;
    for (const pending of queue) {
      if (batch.length > 0 && (batch.length === batchMaxCount || bytes + pending.bytes > batchMaxBytes)) {
        this.#runTask(batch);
        batch = [];
        bytes = 0;
      }
      batch.push(pending);
      bytes += pending.bytes;
    }
    this.#runTask(batch);
  }

  #runTask(batch: readonly Pending[]): void {
    this.#stats.tasks += 1;
    this.#stats.pooled += batch.length;
    // Requests of one endpoint share their keys: encode each key once per task.
    const encoded = new Map<Uint8Array, string>();
    const encode = (key: SigningKey): string => {
      if (key instanceof Ed25519SigningKey) return key.text;
      let text = encoded.get(key);
      if (text === undefined) {
        text = Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('base64');
        encoded.set(key, text);
      }
      return text;
    };
    const tasks: SignTask[] = batch.map(({ request, sequence }) => ({
      keys: request.keys.map(encode),
      id: request.id,
      timestampSec: request.timestampSec,
      body: request.body,
      ...(sequence === undefined ? {} : { sequence }),
    }));
    this.#inFlight.add(batch);
    let running: Promise<string[]>;
    try {
      this.#pool ??= this.#startPool();
      running = this.#pool.run(tasks) as Promise<string[]>;
    } catch (error) {
      // piscina throws synchronously when a worker cannot start: sign on the main thread instead.
      this.#inFlight.delete(batch);
      this.#poolFailure ??= error;
      this.#signInline(batch);
      return;
    }
    running.then(
      (headers) => {
        this.#inFlight.delete(batch);
        // One header per request, followed by its sequence signature when it has a sequence.
        let at = 0;
        for (const pending of batch) {
          const header = headers[at++];
          const sequenceHeader = pending.sequence === undefined ? null : headers[at++];
          if (header === undefined || sequenceHeader === undefined) {
            pending.reject(new Error(`signing worker returned ${headers.length} headers for ${batch.length} requests`));
          } else {
            pending.resolve(header, sequenceHeader);
          }
        }
      },
      (error: unknown) => {
        this.#inFlight.delete(batch);
        this.#rejectAll(batch, error);
      },
    );
  }

  #startPool(): Piscina<readonly SignTask[], string[]> {
    // Loaded here, not imported: piscina's module is only worth its heap once a flush needs it.
    const { Piscina: Pool } = load('piscina') as typeof import('piscina');
    const pool = new Pool<readonly SignTask[], string[]>({
      filename: fileURLToPath(WORKER_MODULE),
      name: 'signBatch',
      minThreads: 0,
      maxThreads: this.#options.threads,
      idleTimeout: this.#options.idleTimeoutMs,
      execArgv: workerExecArgv(WORKER_MODULE),
      // Nothing reads piscina's run and wait time histograms; recording them costs every task.
      recordTiming: false,
    });
    pool.on('error', (error: unknown) => this.#onPoolError(error));
    return pool;
  }

  #onPoolError(error: unknown): void {
    if (this.#closed) return;
    this.#poolFailure ??= error ?? new Error('signing worker failed');
    // A promise settles once: if piscina answers these batches after all, nothing changes.
    for (const batch of this.#inFlight) this.#signInline(batch);
    this.#inFlight.clear();
  }

  #rejectAll(batch: readonly Pending[], cause: unknown): void {
    for (const pending of batch) {
      if (!this.#closed) pending.reject(cause);
      else {
        const closed = new ClosedError('signing pool');
        if (cause !== undefined) closed.cause = cause;
        pending.reject(closed);
      }
    }
  }
}

function stripUndefined(options: SigningPoolOptions): SigningPoolOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

function validate(options: Required<SigningPoolOptions>): Required<SigningPoolOptions> {
  const positiveInteger = (key: keyof SigningPoolOptions, value: number): void => {
    if (!Number.isSafeInteger(value) || value < 1) throw new ConfigError(key, value, 'must be a whole number ≥ 1');
  };
  positiveInteger('threads', options.threads);
  positiveInteger('batchMaxBytes', options.batchMaxBytes);
  positiveInteger('batchMaxCount', options.batchMaxCount);
  if (!Number.isSafeInteger(options.inlineMaxBytes) || options.inlineMaxBytes < 0) {
    throw new ConfigError('inlineMaxBytes', options.inlineMaxBytes, 'must be a whole number of bytes ≥ 0');
  }
  if (!Number.isFinite(options.idleTimeoutMs) || options.idleTimeoutMs < 0) {
    throw new ConfigError('idleTimeoutMs', options.idleTimeoutMs, 'must be a number of milliseconds ≥ 0');
  }
  return Object.freeze(options);
}
