/**
 * Herald's Prometheus metrics: one prom-client `Registry` per instance (never
 * the global one), so several nodes or status servers in one process do not
 * share counts.
 *
 * Counters and histograms follow the engine's typed events; gauges are read
 * from `status()` when Prometheus scrapes (prom-client `collect`), one status
 * query per scrape shared by every gauge. Names and help texts come from
 * `metric-names.ts`.
 *
 *   new ──(listens to events)──► open ──close()──► closed (listeners removed)
 */
import type { EventEmitter } from 'node:events';
import { Counter, Gauge, Histogram, Registry } from './prom-client-parts.ts';
import type { AttemptEvent, EngineEvents, OperationalEvent } from '../engine/engine-events.ts';
import type { StatusSnapshot } from './node-status.ts';
import type { Outcome } from '../model.ts';
import { BreakerStateValue, METRIC_DOCS, MetricName, StatusClass } from './metric-names.ts';
import type { OperatorWebhookEvents } from './operator-webhook.ts';

/** What the metrics read: the engine's events and the status snapshot (a `Herald` is one). */
export interface MetricsSource {
  readonly events: EventEmitter<EngineEvents>;
  status(): Promise<StatusSnapshot>;
}

const SECOND_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const ATTEMPT_BUCKETS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20];
/** 100 ms to 2 days: a first-attempt success is well under a second, a last retry of the default schedule about 31 h. */
const LATENCY_BUCKETS = [0.1, 0.5, 1, 5, 30, 60, 300, 900, 3_600, 6 * 3_600, 24 * 3_600, 48 * 3_600];

/** The `status_class` label of an outcome. */
export function statusClassOf(outcome: Outcome): StatusClass {
  switch (outcome.kind) {
    case 'timeout':
      return StatusClass.TIMEOUT;
    case 'network':
      return StatusClass.NETWORK;
    case 'blocked':
      return StatusClass.BLOCKED;
    case 'proxy':
      return StatusClass.PROXY;
    case 'response':
      if (outcome.status >= 500) return StatusClass.C5XX;
      if (outcome.status >= 400) return StatusClass.C4XX;
      if (outcome.status >= 300) return StatusClass.C3XX;
      return StatusClass.C2XX;
  }
}

export class HeraldMetrics {
  readonly registry = new Registry();
  readonly #source: MetricsSource;
  readonly #unsubscribe: Array<() => void> = [];
  #scrape: Promise<StatusSnapshot> | undefined;
  #feedRestarts = 0;

  readonly #deliveries: Counter<'outcome'>;
  readonly #retries: Counter;
  readonly #attemptDuration: Histogram<'status_class'>;
  readonly #firstAttempts: Counter;
  readonly #firstSuccesses: Counter;
  readonly #attemptsPerDelivery: Histogram<'outcome'>;
  readonly #deadLetters: Counter;
  readonly #eventToDelivery: Histogram;
  readonly #operational: Counter<'type'>;
  readonly #operatorWebhook: Counter<'outcome'>;
  #firstCount = 0;
  #firstSuccessCount = 0;

  constructor(source: MetricsSource) {
    this.#source = source;
    const registers = [this.registry];
    const doc = (name: MetricName) => ({ name, help: METRIC_DOCS[name].help, labelNames: METRIC_DOCS[name].labels, registers });

    this.#deliveries = new Counter(doc(MetricName.DELIVERIES)) as Counter<'outcome'>;
    this.#retries = new Counter(doc(MetricName.RETRIES));
    this.#attemptDuration = new Histogram({ ...doc(MetricName.ATTEMPT_DURATION), buckets: SECOND_BUCKETS }) as Histogram<'status_class'>;
    this.#firstAttempts = new Counter(doc(MetricName.FIRST_ATTEMPTS));
    this.#firstSuccesses = new Counter(doc(MetricName.FIRST_ATTEMPT_SUCCESSES));
    const self = this;
    new Gauge({
      ...doc(MetricName.FIRST_ATTEMPT_SUCCESS_RATIO),
      collect() {
        this.set(self.#firstCount === 0 ? 1 : self.#firstSuccessCount / self.#firstCount);
      },
    });
    this.#attemptsPerDelivery = new Histogram({ ...doc(MetricName.ATTEMPTS_PER_DELIVERY), buckets: ATTEMPT_BUCKETS }) as Histogram<'outcome'>;
    this.#deadLetters = new Counter(doc(MetricName.DEAD_LETTERS));
    this.#eventToDelivery = new Histogram({ ...doc(MetricName.EVENT_TO_DELIVERY), buckets: LATENCY_BUCKETS });
    this.#operational = new Counter(doc(MetricName.OPERATIONAL_EVENTS)) as Counter<'type'>;
    this.#operatorWebhook = new Counter(doc(MetricName.OPERATOR_WEBHOOK)) as Counter<'outcome'>;
    new Counter({
      ...doc(MetricName.CHANGE_FEED_RESTARTS),
      collect() {
        this.reset();
        this.inc(self.#feedRestarts);
      },
    });

    // Read at scrape time from one status() per scrape.
    this.#gaugeFromStatus(MetricName.BREAKER_STATE, (gauge, s) => {
      for (const actor of s.actors) gauge.set({ endpoint: actor.endpointId }, BreakerStateValue[actor.breaker]);
    });
    this.#gaugeFromStatus(MetricName.MAILBOX_DEPTH, (gauge, s) => {
      for (const actor of s.actors) gauge.set({ endpoint: actor.endpointId }, actor.queued);
    });
    this.#gaugeFromStatus(MetricName.CONCURRENCY_LIMIT, (gauge, s) => {
      for (const actor of s.actors) gauge.set({ endpoint: actor.endpointId }, actor.concurrencyLimit);
    });
    this.#gaugeFromStatus(MetricName.IN_FLIGHT, (gauge, s) => gauge.set(s.inFlight));
    this.#gaugeFromStatus(MetricName.SLOTS_OWNED, (gauge, s) => gauge.set(s.slotsOwned));
    this.#gaugeFromStatus(MetricName.CLOCK_OFFSET, (gauge, s) => gauge.set(s.clockOffsetMs / 1000));
    this.#gaugeFromStatus(MetricName.DELIVERIES_BY_STATUS, (gauge, s) => {
      for (const [status, n] of Object.entries(s.deliveries)) gauge.set({ status }, n);
    });
    this.#gaugeFromStatus(MetricName.OUTBOX_UNFANNED, (gauge, s) => gauge.set(s.unfannedEvents));
    this.#gaugeFromStatus(MetricName.DEAD_LETTERS_UNREVIEWED, (gauge, s) => gauge.set(s.deadLetters.unreviewed));
    this.#gaugeFromStatus(MetricName.OLDEST_UNREVIEWED_DEAD_LETTER, (gauge, s) => gauge.set(s.deadLetters.oldestUnreviewedAgeMs / 1000));
    this.#gaugeFromStatus(MetricName.STORE_UP, (gauge, s) => gauge.set(s.store.available ? 1 : 0));
    new Counter({
      ...doc(MetricName.FENCED_WRITES),
      async collect() {
        const snapshot = await self.#snapshot();
        this.reset();
        this.inc(snapshot.fencedWrites);
      },
    });

    this.#listen(source.events, 'attempt', (e) => this.#onAttempt(e));
    this.#listen(source.events, 'operational', (e: OperationalEvent) => this.#operational.inc({ type: e.type }));
    this.#listen(source.events, 'feedRestart', () => {
      this.#feedRestarts++;
    });
  }

  /** The Prometheus exposition content type. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text Prometheus scrapes. */
  async render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Counts what the operator webhook reports. */
  observeOperatorWebhook(emitter: EventEmitter<OperatorWebhookEvents>): void {
    for (const outcome of ['delivered', 'failed', 'dropped'] as const) {
      this.#listen(emitter, outcome, () => this.#operatorWebhook.inc({ outcome }));
    }
  }

  /** Stops listening; the registry keeps its last values. */
  close(): void {
    for (const off of this.#unsubscribe.splice(0)) off();
  }

  #onAttempt(e: AttemptEvent): void {
    if (!e.applied) return; // a fenced write changed nothing; the fenced counter has it
    const finishedAt = e.startedAt + e.durationMs;
    this.#attemptDuration.observe({ status_class: statusClassOf(e.outcome) }, e.durationMs / 1000);
    const kind = e.settlement.kind;
    if (e.attempt === 1) {
      this.#firstAttempts.inc();
      this.#firstCount++;
      if (kind === 'delivered') {
        this.#firstSuccesses.inc();
        this.#firstSuccessCount++;
      }
    }
    if (kind === 'retry') {
      this.#retries.inc();
    } else if (kind === 'delivered' || kind === 'dead') {
      this.#deliveries.inc({ outcome: kind });
      this.#attemptsPerDelivery.observe({ outcome: kind }, e.attempt);
      if (kind === 'dead') this.#deadLetters.inc();
      else this.#eventToDelivery.observe(Math.max(0, finishedAt - e.eventCreatedAt) / 1000);
    }
  }

  #gaugeFromStatus(name: MetricName, fill: (gauge: Gauge<string>, snapshot: StatusSnapshot) => void): void {
    const self = this;
    const doc = METRIC_DOCS[name];
    new Gauge({
      name,
      help: doc.help,
      labelNames: doc.labels,
      registers: [this.registry],
      async collect() {
        const snapshot = await self.#snapshot();
        // Labelled gauges start afresh: an evicted actor's endpoint disappears from the scrape.
        if (doc.labels.length > 0) this.reset();
        fill(this, snapshot);
      },
    });
  }

  /** One status() per scrape: prom-client calls every collect in the same tick, so they share the promise. */
  #snapshot(): Promise<StatusSnapshot> {
    if (this.#scrape === undefined) {
      const scrape = this.#source.status();
      this.#scrape = scrape;
      const clear = (): void => {
        if (this.#scrape === scrape) this.#scrape = undefined;
      };
      scrape.then(clear, clear);
    }
    return this.#scrape;
  }

  #listen<E extends Record<keyof E, unknown[]>, K extends keyof E & string>(
    emitter: EventEmitter<E>,
    name: K,
    listener: (...args: E[K]) => void,
  ): void {
    const untyped = emitter as unknown as EventEmitter;
    untyped.on(name, listener as never);
    this.#unsubscribe.push(() => untyped.off(name, listener as never));
  }
}
