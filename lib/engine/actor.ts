/**
 * The actor of one endpoint: its mailbox, breaker, pause and health.
 *
 * The supervisor claims deliveries and hands them in with `enqueue()`. Each
 * runs through the mailbox (a p-queue with the endpoint's concurrency, where
 * replayed deliveries queue in a lower lane than new ones, `MailboxLane`, and
 * enter only up to their share of the concurrency, `ReplayLane`, so a new
 * event finds a slot free):
 *
 *   enqueue ─► mailbox ─► token ─► gate ─┬─ send:  permits (origin, node; by tenant, endpoint; replays within their share) ─► sign ─► breaker.run(send) ─► classify ─► settle
 *                                        ├─ probe: the same, as the breaker's single probe
 *                                        ├─ hold:  a probe is out; wait for its result in memory
 *                                        └─ release: paused (429), breaker open, disabled or closing:
 *                                                   give it back to the store untouched, due when we may send again
 *
 * With `adaptiveConcurrency`, the mailbox's concurrency is the endpoint's
 * adaptive limit (lib/engine/adaptive-limit.ts), fed each exchange's outcome;
 * otherwise it is the endpoint's `concurrency`.
 *
 * The token step is there only for an endpoint with a `rateLimit` (no bucket
 * otherwise): a delivery the gate would let through takes a token from the
 * endpoint's bucket, waiting for one on the clock while holding its mailbox
 * place (so a request needs a concurrency slot and a token); one that would
 * wait longer than `RATE_HORIZON_MS` is given back to the store, due when its
 * token would be, rather than held. `capacity()` asks only for what the
 * bucket lets start within that horizon.
 *
 * A retry is settled as pending at its next attempt time and a wake-up is put
 * on the actor's timer wheel, so the supervisor claims it again on time. The
 * actor depends on narrow functions, never on the supervisor.
 *
 * Thousands of actors live at once, so an actor holds only its own state: the
 * node-wide dependencies are one object shared by all, and its breaker's
 * circuit and its timer wheel are made when first needed (the first failure,
 * the first wake-up), so a healthy endpoint's actor is about 1 KB.
 */
import PQueue from 'p-queue';
import { durationText, isoTime, type Clock, type Random } from '../clock.ts';
import { newId } from '../ids.ts';
import { DeliveryMode, DisabledReason, type Attempt, type DeliveryJob, type Endpoint, type Outcome } from '../model.ts';
import { classify, countsAgainstHealth, describeOutcome, isEndpointGone } from '../policy/classify.ts';
import { decideNextStep } from '../policy/next-step.ts';
import { retryPolicyOf } from '../policy/retry-policy.ts';
import type { AttemptRecord, Settlement } from '../store/port.ts';
import { adaptiveLimitFor, type AdaptiveLimit } from './adaptive-limit.ts';
import { BreakerState, type BreakerListener, type EndpointBreaker } from './breaker.ts';
import { EndpointHealth, type HealthOptions } from './endpoint-health.ts';
import { ReplayLane } from './replay-lane.ts';
import { OperationalEventType, type EmitEngineEvent } from './engine-events.ts';
import { SendLane, type SendPermits } from './send-permits.ts';
import { TokenBucket } from './token-bucket.ts';

export interface SendResult {
  readonly outcome: Outcome;
  readonly durationMs: number;
}

/** A wake-up timer: the actor's slice of the node-wide timer wheel. */
export interface WakeTimers {
  schedule(at: number): void;
  readonly size: number;
  close(): void;
}

/** What an actor's wake-up timers call when one comes due. */
export interface WakeListener {
  onWake(): void;
}

/**
 * What every actor of a node uses: one object shared by all of them, so an actor costs its own
 * state only. Each actor makes its breaker and timers from it, handing itself as their listener.
 */
export interface ActorDeps {
  readonly clock: Clock;
  readonly random: Random;
  /** A place at the endpoint's origin and a node permit, held while an attempt is signed and sent. */
  readonly permits: SendPermits;
  readonly breakers: { create(listener: BreakerListener): EndpointBreaker };
  /** The actor's wake-up timers on the node-wide ticker. */
  createTimers(listener: WakeListener): WakeTimers;
  readonly health: HealthOptions;
  /** A 410 Gone disables the endpoint at once (`delivery.disableOnGone`); otherwise it only dead-letters the delivery. */
  readonly disableOnGone: boolean;
  readonly emit: EmitEngineEvent;
  /** The request headers for this job: the `webhook-*` ones, signed with the endpoint's active secrets, and `idempotency-key` (and the endpoint's own). */
  sign(job: DeliveryJob, endpoint: Endpoint, timestampSec: number): Promise<Record<string, string>>;
  /** Sends one attempt of `job` to `endpoint` (the version it was signed for; traced: lib/tracing/attempt-span.ts). */
  send(request: { url: string; headers: Record<string, string>; body: string; timeoutMs: number }, endpoint: Endpoint, job: DeliveryJob): Promise<SendResult>;
  /** Writes the settlement of one of `actor`'s deliveries; false when it was fenced (the lease moved on). */
  settle(settlement: Settlement, actor: { readonly queued: number; readonly endpoint: Endpoint }): Promise<boolean>;
  /** A wake-up came due: there is work to claim. */
  wake(): void;
  /** Every attempt of a delivery, in order, across rounds: read only for a retry policy with a window. */
  listAttempts(deliveryId: string): Promise<readonly Attempt[]>;
  /** Disables the endpoint, recording `disabledReason` (`failing: …`, `gone: …`). */
  disable(endpointId: string, disabledReason: string): Promise<void>;
}

/** How long a delivery waits when it could not be signed (a fault on our side). */
const SIGNING_RETRY_MS = 60_000;
/** The network code of an attempt never made: an at-most-once delivery taken over mid-attempt. */
export const TAKEN_OVER = 'TAKEN_OVER';

/**
 * The mailbox's lanes (p-queue priorities, higher first): a replayed delivery (a round after the
 * first) waits behind every new one queued for the endpoint, so a bulk replay never delays new events.
 */
export const MailboxLane = { NEW: 0, REPLAY: -1 } as const;

function laneOf(job: DeliveryJob): number {
  return job.delivery.round > 0 ? MailboxLane.REPLAY : MailboxLane.NEW;
}

/** Jobs queued or running beyond this multiple of the concurrency are not claimed for. */
const MAILBOX_DEPTH_PER_SLOT = 2;

/**
 * A rate-limited actor claims what its bucket lets start within this long, and gives back a
 * delivery that would wait longer for its token: claimed work is not held in memory for longer.
 */
export const RATE_HORIZON_MS = 1_000;

export class EndpointActor implements BreakerListener, WakeListener {
  #endpoint: Endpoint;
  readonly #deps: ActorDeps;
  readonly #breaker: EndpointBreaker;
  readonly #timers: WakeTimers;
  readonly #mailbox: PQueue;
  #health: EndpointHealth;
  readonly #held: DeliveryJob[] = [];
  /** Replays beyond their share of the concurrency; made at the first replay (most actors never see one). */
  #replays: ReplayLane | undefined;
  /** The endpoint's rate limit; none (no object, no check beyond this field) for an endpoint without one. */
  #rate: TokenBucket | undefined;
  /** The endpoint's adaptive concurrency; none for a fixed one (the mailbox then keeps `concurrency`). */
  #adaptive: AdaptiveLimit | undefined;
  #pausedUntil = 0;
  #lastActiveAt: number;
  #closing = false;
  #lastError: string | null = null;

  constructor(endpoint: Endpoint, deps: ActorDeps) {
    this.#endpoint = endpoint;
    this.#deps = deps;
    this.#breaker = deps.breakers.create(this);
    this.#timers = deps.createTimers(this);
    this.#adaptive = adaptiveLimitFor(endpoint, undefined);
    this.#mailbox = new PQueue({ concurrency: this.#adaptive?.limit ?? endpoint.concurrency });
    this.#health = new EndpointHealth(deps.health, endpoint.failingSince);
    this.#lastActiveAt = deps.clock.now();
    this.#rate = endpoint.rateLimit === undefined ? undefined : new TokenBucket(endpoint.rateLimit, deps.clock);
  }

  get endpoint(): Endpoint {
    return this.#endpoint;
  }

  get breakerState(): BreakerState {
    return this.#breaker.state;
  }

  get pausedUntil(): number | null {
    return this.#pausedUntil > this.#deps.clock.now() ? this.#pausedUntil : null;
  }

  /** Deliveries waiting: in the mailbox, held for a probe's result, or for a token of the rate limit. */
  get queued(): number {
    return this.#mailbox.size + this.#held.length + (this.#rate?.waiting ?? 0) + (this.#replays?.waiting ?? 0);
  }

  /** Attempts under way (past their token, when rate-limited). */
  get running(): number {
    return this.#mailbox.pending - (this.#rate?.waiting ?? 0);
  }

  /** Requests allowed in flight now: the adaptive limit, or the endpoint's fixed `concurrency`. */
  get concurrencyLimit(): number {
    return this.#mailbox.concurrency;
  }

  /** Whether the endpoint has a rate limit (a token bucket). */
  get rateLimited(): boolean {
    return this.#rate !== undefined;
  }

  get lastError(): string | null {
    return this.#lastError;
  }

  /** How many more deliveries the supervisor should claim for this endpoint now. */
  capacity(now: number): number {
    if (this.#closing || this.#endpoint.status !== 'enabled' || now < this.#pausedUntil) return 0;
    const breaker = this.#breaker;
    if (breaker.state === BreakerState.HALF_OPEN) return 0;
    if (breaker.state === BreakerState.OPEN) return now >= breaker.probeAt && this.queued + this.running === 0 ? 1 : 0;
    const room = this.#mailbox.concurrency * MAILBOX_DEPTH_PER_SLOT - this.queued - this.running;
    if (this.#rate === undefined) return Math.max(0, room);
    // What the bucket lets start within the horizon, less what already waits for a token or a place.
    return Math.max(0, Math.min(room, this.#rate.room(now, RATE_HORIZON_MS) - this.#mailbox.size - this.#held.length - (this.#replays?.waiting ?? 0)));
  }

  /** Idle: nothing queued, running, held or scheduled, breaker closed, not paused, for `idleMs`. */
  isIdle(now: number, idleMs: number): boolean {
    return (
      this.queued + this.running === 0 &&
      this.#timers.size === 0 &&
      this.#breaker.state === BreakerState.CLOSED &&
      now >= this.#pausedUntil &&
      now - this.#lastActiveAt >= idleMs
    );
  }

  /** Marks the actor active now (its idle time starts again). */
  touch(): void {
    this.#lastActiveAt = this.#deps.clock.now();
  }

  /** Takes a newer version of the endpoint (edited, enabled, disabled). */
  update(endpoint: Endpoint): void {
    // Re-enabled: its failure history starts afresh, or the next failure would disable it again.
    if (endpoint.status === 'enabled' && this.#endpoint.status !== 'enabled') {
      this.#health = new EndpointHealth(this.#deps.health, endpoint.failingSince);
    }
    this.#endpoint = endpoint;
    this.#adaptive = adaptiveLimitFor(endpoint, this.#adaptive);
    this.#mailbox.concurrency = this.#adaptive?.limit ?? endpoint.concurrency;
    this.#updateRate(endpoint.rateLimit);
  }

  enqueue(job: DeliveryJob): void {
    this.#lastActiveAt = this.#deps.clock.now();
    if (job.resumed === true && this.#endpoint.mode === DeliveryMode.AT_MOST_ONCE) {
      // Its one attempt may have reached the consumer before the node that made it lost the slot:
      // sending it again could make two. Dead-lettered unsent, before any gate could give it back
      // to the store (a delivery given back is claimed again as a fresh one).
      const ran = this.#mailbox.add(() => this.#abandonTakenOver(job), { priority: laneOf(job) });
      void ran.catch((error: unknown) => this.#deps.emit('failure', { where: `actor ${this.#endpoint.id}`, error }));
      return;
    }
    if (laneOf(job) === MailboxLane.REPLAY) {
      this.#replays ??= new ReplayLane(
        (replay, finished) => this.#admit(replay, finished),
        () => this.#mailbox.concurrency,
      );
      this.#replays.offer(job);
    } else {
      this.#admit(job);
    }
  }

  /** Into the mailbox; `finished` (a replay's) is called once the job has left it. */
  #admit(job: DeliveryJob, finished?: () => void): void {
    const ran = this.#mailbox.add(() => this.#run(job), { priority: laneOf(job) }).catch((error: unknown) => {
      this.#deps.emit('failure', { where: `actor ${this.#endpoint.id}`, error });
    });
    if (finished !== undefined) void ran.finally(finished);
  }

  /** A wake-up came due: this counts as activity (the delivery it announces may take a moment to claim). */
  onWake(): void {
    this.touch();
    this.#deps.wake();
  }

  /** Called by our breaker when it changes state. */
  onBreakerChange(state: BreakerState): void {
    const probeAt = state === BreakerState.OPEN ? this.#breaker.probeAt : null;
    this.#deps.emit('breaker', { endpointId: this.#endpoint.id, state, probeAt });
    if (state === BreakerState.OPEN) {
      this.#timers.schedule(this.#breaker.probeAt);
      for (const job of this.#held.splice(0)) void this.#release(job, this.#breaker.probeAt, 'breaker open');
    } else if (state === BreakerState.CLOSED) {
      for (const job of this.#held.splice(0)) this.enqueue(job);
    }
  }

  /** Stops taking work: queued deliveries are given back; resolves when running attempts have settled. */
  async close(): Promise<void> {
    this.#closing = true;
    // Deliveries waiting for a token wake up and are given back with the queued ones.
    this.#rate?.open();
    for (const job of [...this.#held.splice(0), ...(this.#replays?.drain() ?? [])]) await this.#release(job, this.#deps.clock.now(), 'shutdown');
    await this.#mailbox.onIdle();
    this.#timers.close();
    this.#breaker.shutdown();
  }

  async #run(job: DeliveryJob): Promise<void> {
    const { clock } = this.#deps;
    if (this.#rate !== undefined && this.#mayAttempt(clock.now())) {
      const giveBackUntil = await this.#takeToken();
      if (giveBackUntil !== undefined) return this.#release(job, giveBackUntil, 'rate limit');
    }
    const now = clock.now();
    if (this.#closing) return this.#release(job, now, 'shutdown');
    if (this.#endpoint.status !== 'enabled') return this.#release(job, now, 'endpoint disabled');
    if (now < this.#pausedUntil) return this.#release(job, this.#pausedUntil, 'paused by 429');
    const permit = this.#breaker.permit(now);
    if (permit === 'wait') {
      if (this.#breaker.state === BreakerState.HALF_OPEN) {
        this.#held.push(job);
        return undefined;
      }
      return this.#release(job, this.#breaker.probeAt, 'breaker open');
    }

    const lane = laneOf(job) === MailboxLane.REPLAY ? SendLane.REPLAY : SendLane.NEW;
    let endpoint: Endpoint;
    let releasePermit: () => void;
    let headers: Record<string, string>;
    let startedAt: number;
    for (;;) {
      endpoint = this.#endpoint;
      releasePermit = await this.#deps.permits.acquire(endpoint, lane);
      startedAt = clock.now();
      try {
        headers = await this.#deps.sign(job, endpoint, Math.floor(startedAt / 1000));
      } catch (error) {
        releasePermit();
        // Our failure, not the endpoint's: no attempt is spent; try again a little later.
        this.#deps.emit('failure', { where: `signing for ${endpoint.id}`, error });
        return this.#release(job, clock.now() + SIGNING_RETRY_MS, 'signing failed');
      }
      if (endpoint === this.#endpoint) break;
      // Changed (through any node) while this attempt waited for its permit or its signatures: it
      // goes out as the new version (its URL, its secrets) or not at all, never as the old one.
      releasePermit();
      if (this.#closing) return this.#release(job, clock.now(), 'shutdown');
      if (this.#endpoint.status !== 'enabled') return this.#release(job, clock.now(), 'endpoint disabled');
    }
    let sent: SendResult | undefined;
    const generation = this.#adaptive?.generation ?? 0;
    try {
      const send = async (): Promise<Outcome> => {
        sent = await this.#deps.send({ url: endpoint.url, headers, body: job.event.payload, timeoutMs: endpoint.timeoutMs }, endpoint, job);
        return sent.outcome;
      };
      const outcome = await this.#breaker.run(permit, send);
      if (outcome === undefined || sent === undefined) return this.#release(job, this.#breaker.probeAt, 'breaker open');
    } finally {
      releasePermit();
    }
    if (this.#adaptive !== undefined) {
      this.#mailbox.concurrency = this.#adaptive.record({ ...sent, generation, inFlight: this.running });
    }
    this.#lastActiveAt = clock.now();
    await this.#conclude(job, endpoint, startedAt, sent);
    return undefined;
  }

  /**
   * An at-most-once delivery taken over mid-attempt: dead with an attempt that records nothing was
   * sent (`TAKEN_OVER`), so the dead letter shows it and an operator may replay it knowingly. The
   * endpoint's health and breaker are left alone: the endpoint did not fail.
   */
  async #abandonTakenOver(job: DeliveryJob): Promise<void> {
    const { clock } = this.#deps;
    const endpoint = this.#endpoint;
    const now = clock.now();
    const outcome: Outcome = {
      kind: 'network',
      code: TAKEN_OVER,
      message: 'not sent: taken over from a node that lost its slot mid-attempt; its one attempt may have been made',
    };
    const reason = `at-most-once: ${describeOutcome(outcome)}`;
    const attempt: AttemptRecord = { number: job.delivery.attempts + 1, startedAt: now, durationMs: 0, outcome, error: describeOutcome(outcome) };
    const settlement: Settlement = {
      kind: 'dead',
      deliveryId: job.delivery.id,
      epoch: job.delivery.leaseEpoch,
      attempt,
      deadLetterId: newId('dl'),
      reason,
    };
    if (await this.#settleAndTell(job, endpoint, settlement, `dead: ${reason}`)) this.#tellExhausted(job, endpoint, now, reason);
  }

  /** Writes an attempt's settlement and tells the engine's listeners; whether it was applied (not fenced). */
  async #settleAndTell(job: DeliveryJob, endpoint: Endpoint, settlement: Exclude<Settlement, { kind: 'release' }>, summary: string): Promise<boolean> {
    const { attempt } = settlement;
    const applied = await this.#deps.settle(settlement, this);
    this.#deps.emit('attempt', {
      endpointId: endpoint.id,
      tenantId: endpoint.tenantId,
      eventId: job.event.id,
      eventCreatedAt: job.event.createdAt,
      deliveryId: job.delivery.id,
      attempt: attempt.number,
      startedAt: attempt.startedAt,
      durationMs: attempt.durationMs,
      outcome: attempt.outcome,
      summary,
      settlement,
      applied,
    });
    return applied;
  }

  #tellExhausted(job: DeliveryJob, endpoint: Endpoint, now: number, reason: string): void {
    this.#deps.emit('operational', {
      type: OperationalEventType.DELIVERY_EXHAUSTED,
      endpointId: endpoint.id,
      tenantId: endpoint.tenantId,
      deliveryId: job.delivery.id,
      at: now,
      detail: reason,
    });
  }

  /** Whether the gate would let a delivery through now (or as the breaker's probe): only then is a token taken. */
  #mayAttempt(now: number): boolean {
    if (this.#closing || this.#endpoint.status !== 'enabled' || now < this.#pausedUntil) return false;
    const breaker = this.#breaker;
    return breaker.state === BreakerState.CLOSED || (breaker.state === BreakerState.OPEN && now >= breaker.probeAt);
  }

  /**
   * Takes a token of the rate limit, waiting in turn for one. Returns `undefined` when the delivery
   * may go on (a token taken, the limit lifted meanwhile, or the actor closing: the gate then gives
   * it back), or the time to give it back until, when its token is further than the horizon away.
   */
  async #takeToken(): Promise<number | undefined> {
    for (;;) {
      const rate = this.#rate;
      if (rate === undefined || this.#closing) return undefined;
      const now = this.#deps.clock.now();
      if (rate.tryTake(now)) return undefined;
      const waitMs = rate.waitMs(now);
      if (waitMs > RATE_HORIZON_MS) return now + waitMs;
      // False: the limit changed or was lifted while waiting; look again.
      if (await rate.wait()) return undefined;
    }
  }

  /** A new, changed or lifted rate limit takes effect at once, for the deliveries waiting too. */
  #updateRate(limit: Endpoint['rateLimit']): void {
    const rate = this.#rate;
    if (limit === undefined) {
      this.#rate = undefined;
      rate?.open();
    } else if (rate === undefined) {
      this.#rate = new TokenBucket(limit, this.#deps.clock);
    } else if (rate.limit.perSecond !== limit.perSecond || rate.limit.burst !== limit.burst) {
      rate.reconfigure(limit, this.#deps.clock.now());
    }
  }

  async #conclude(job: DeliveryJob, endpoint: Endpoint, startedAt: number, sent: SendResult): Promise<void> {
    const { clock, emit } = this.#deps;
    const now = clock.now();
    const number = job.delivery.attempts + 1;
    const verdict = classify(sent.outcome, now);
    const retry = retryPolicyOf(endpoint.retry);
    const next = decideNextStep({
      verdict,
      attemptNumber: number,
      retry,
      roundStartedAt: retry.windowMs === undefined || verdict.kind !== 'retry' ? undefined : await this.#roundStartedAt(job, startedAt),
      mode: endpoint.mode,
      now,
      random: this.#deps.random,
    });
    const error = verdict.kind === 'delivered' ? null : describeOutcome(sent.outcome);
    const attempt: AttemptRecord = { number, startedAt, durationMs: sent.durationMs, outcome: sent.outcome, error };
    const base = { deliveryId: job.delivery.id, epoch: job.delivery.leaseEpoch, attempt } as const;
    let settlement: Settlement;
    let summary: string;
    switch (next.kind) {
      case 'delivered':
        settlement = { kind: 'delivered', ...base };
        summary = 'delivered';
        break;
      case 'retry':
        settlement = { kind: 'retry', ...base, nextAttemptAt: next.at };
        summary = `retry in ${durationText(next.at - now)}: ${error ?? ''}`;
        break;
      case 'dead':
        settlement = { kind: 'dead', ...base, deadLetterId: newId('dl'), reason: next.reason };
        summary = `dead: ${next.reason}`;
        break;
    }
    if (!(await this.#settleAndTell(job, endpoint, settlement, summary))) return;

    if (next.kind === 'retry') {
      this.#timers.schedule(next.at);
      if (next.pauseUntil !== undefined && next.pauseUntil > this.#pausedUntil) {
        this.#pausedUntil = next.pauseUntil;
        this.#timers.schedule(next.pauseUntil);
        emit('paused', { endpointId: endpoint.id, until: next.pauseUntil });
      }
    }
    if (next.kind === 'dead') this.#tellExhausted(job, endpoint, now, next.reason);
    if (this.#deps.disableOnGone && isEndpointGone(sent.outcome)) {
      await this.#disable(DisabledReason.GONE, `${error ?? ''} Gone for delivery ${job.delivery.id}`, now, job.delivery.id);
    }
    // A proxy's failure never reached the endpoint: its health (failing, auto-disable) is left alone.
    if (countsAgainstHealth(sent.outcome)) await this.#recordHealth(endpoint, next.kind === 'delivered', error, now);
  }

  /**
   * When the delivery's current round began. Its attempts are the last `delivery.attempts` of
   * its log; if retention purged some, the oldest kept stands in. A failed read gives
   * `undefined` (the window then counts from now): the attempt's result must still be settled.
   */
  async #roundStartedAt(job: DeliveryJob, startedAt: number): Promise<number | undefined> {
    const made = job.delivery.attempts;
    if (made === 0) return startedAt;
    try {
      const log = await this.#deps.listAttempts(job.delivery.id);
      return (log.at(-made) ?? log[0])?.startedAt;
    } catch (error) {
      this.#deps.emit('failure', { where: `attempt log of ${job.delivery.id}`, error });
      return undefined;
    }
  }

  /**
   * Disables the endpoint, once: an attempt already under way when it happens finds it disabled
   * and does not disable it again. Deliveries still queued are given back untouched and wait.
   */
  async #disable(
    reason: typeof DisabledReason.FAILING | typeof DisabledReason.GONE,
    detail: string,
    now: number,
    deliveryId?: string,
  ): Promise<void> {
    if (this.#endpoint.status !== 'enabled') return;
    const disabledReason = `${reason}: ${detail}`;
    const { id: endpointId, tenantId } = this.#endpoint;
    this.#endpoint = { ...this.#endpoint, status: 'disabled', disabledReason };
    await this.#deps.disable(endpointId, disabledReason);
    this.#deps.emit('operational', {
      type: OperationalEventType.ENDPOINT_DISABLED,
      reason,
      endpointId,
      tenantId,
      at: now,
      detail,
      ...(deliveryId === undefined ? {} : { deliveryId }),
    });
  }

  async #recordHealth(endpoint: Endpoint, delivered: boolean, error: string | null, now: number): Promise<void> {
    this.#lastError = delivered ? this.#lastError : error;
    const transitions = delivered ? this.#health.recordSuccess() : this.#health.recordFailure(now);
    for (const transition of transitions) {
      const common = { endpointId: endpoint.id, tenantId: endpoint.tenantId, at: now } as const;
      if (transition === 'failing') {
        this.#deps.emit('operational', {
          type: OperationalEventType.ENDPOINT_FAILING,
          ...common,
          windowMs: this.#deps.health.failingWindowMs,
          detail: `more than ${this.#deps.health.failingThreshold} failures within ${durationText(this.#deps.health.failingWindowMs)}; last: ${error ?? ''}`,
        });
      } else if (transition === 'recovered') {
        this.#deps.emit('operational', { type: OperationalEventType.ENDPOINT_RECOVERED, ...common, detail: 'delivered again' });
      } else {
        const since = this.#health.failingSince ?? now;
        await this.#disable(DisabledReason.FAILING, `failing without a success since ${isoTime(since)} (${durationText(now - since)}); last: ${error ?? ''}`, now);
      }
    }
  }

  async #release(job: DeliveryJob, until: number, why: string): Promise<void> {
    await this.#deps.settle({ kind: 'release', deliveryId: job.delivery.id, epoch: job.delivery.leaseEpoch, nextAttemptAt: until }, this);
    if (until > this.#deps.clock.now()) this.#timers.schedule(until);
    this.#deps.emit('released', { endpointId: this.#endpoint.id, deliveryId: job.delivery.id, until, why });
  }
}
