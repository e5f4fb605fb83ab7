/**
 * `node --expose-gc --import tsx scripts/bench/actor-size.ts [count] [state]`:
 * the heap an endpoint's actor retains, in bytes, measured as the growth of
 * `heapUsed` (after a full GC) over `count` actors (default 20 000), each
 * made the way the supervisor makes them. Each state is measured in a process
 * of its own (the script runs itself once per state unless one is named):
 *
 * - `new`: made, nothing sent yet (the supervisor makes one when it claims
 *   the endpoint's first delivery);
 * - `delivered`: after one delivery that succeeded;
 * - `failed`: after one attempt that failed (a 503, retried): its breaker's
 *   circuit and its wake-up timers now exist.
 *
 * No HTTP, no store, no signing: `send` answers at once and `settle` accepts.
 * Actors are warmed up first, so the figure holds the actors, not the code
 * compiled for them. Figures are this machine's, under tsx.
 */
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { EndpointActor, type ActorDeps, type SendResult } from '../../lib/engine/actor.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import type { EmitEngineEvent, EngineEvents } from '../../lib/engine/engine-events.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { Ticker } from '../../lib/engine/ticker.ts';
import { TickerWakeTimers } from '../../lib/engine/wake-timers.ts';
import { DeliveryMode, type DeliveryJob, type Endpoint } from '../../lib/model.ts';

const STATES = ['new', 'delivered', 'failed'] as const;
type State = (typeof STATES)[number];

const count = Number(process.argv[2] ?? 20_000);
const only = process.argv[3] as State | undefined;
if (only === undefined) {
  const lines = STATES.map((state) =>
    execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), String(count), state], { encoding: 'utf8' }).trim(),
  );
  console.log(`${count} actors, bytes retained per actor: ${lines.join(', ')}`);
  process.exit(0);
}
if (!STATES.includes(only)) {
  console.error(`state must be one of ${STATES.join(', ')} (got ${only})`);
  process.exit(2);
}
const state: State = only;

const collect = (globalThis as { gc?: () => void }).gc;
if (collect === undefined) {
  console.error('run with node --expose-gc --import tsx');
  process.exit(2);
}
const gc = (): void => {
  collect();
  collect();
};

const config = resolveConfig({ logLevel: 'silent' });
const clock = new ManualClock();
const breakers = new BreakerFamily(clock, config.breaker);
const ticker = new Ticker({ clock, tickMs: config.engine.tickMs });
const answers: Record<State, SendResult> = {
  new: { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 },
  delivered: { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 },
  failed: { outcome: { kind: 'response', status: 503, location: null, retryAfter: null, body: '' }, durationMs: 1 },
};
let attempts = 0;
const events = new EventEmitter<EngineEvents>();
events.on('attempt', () => attempts++);
const deps: ActorDeps = {
  clock,
  random: seededRandom(1),
  permits: new SendPermits({ maxInFlight: 1_000_000, originDepth: 1_000_000 }),
  breakers,
  createTimers: (listener) => new TickerWakeTimers(ticker, listener),
  health: config.health,
  disableOnGone: false,
  emit: events.emit.bind(events) as EmitEngineEvent,
  sign: () => Promise.resolve({}),
  send: () => Promise.resolve(answers[state]),
  settle: () => Promise.resolve(true),
  wake: () => {},
  listAttempts: () => Promise.resolve([]),
  disable: () => Promise.resolve(),
};

function endpoint(n: number): Endpoint {
  return {
    id: `ep_${n}`,
    tenantId: 'bench',
    url: `http://127.0.0.1:9/ep/${n}`,
    description: '',
    eventTypes: [],
    retry: { preset: 'default' },
    timeoutMs: config.delivery.timeoutMs,
    mode: DeliveryMode.AT_LEAST_ONCE, ordering: 'none',
    concurrency: config.delivery.concurrencyPerEndpoint,
    status: 'enabled',
    disabledReason: null,
    failingSince: null,
    secrets: [],
    createdAt: 0,
    updatedAt: 0,
  };
}

function job(n: number): DeliveryJob {
  const at = clock.now();
  return {
    delivery: {
      id: `dlv_${n}`, eventId: `evt_${n}`, endpointId: `ep_${n}`, tenantId: 'bench', eventType: 'bench.event', slot: 0,
      status: 'in_flight', attempts: 0, round: 0, nextAttemptAt: at, leaseEpoch: 1, lastError: null, createdAt: at, updatedAt: at, deliveredAt: null, sequence: n + 1, orderingKey: null,
    },
    event: { id: `evt_${n}`, tenantId: 'bench', type: 'bench.event', payload: '{}', createdAt: at } as DeliveryJob['event'],
  };
}

/** An actor for each endpoint (the endpoints are the store's, not the actors'), brought to the current state. */
async function makeActors(endpoints: readonly Endpoint[], from: number): Promise<EndpointActor[]> {
  const actors = endpoints.map((e, i) => {
    const actor = new EndpointActor(e, deps);
    if (state !== 'new') actor.enqueue(job(from + i));
    return actor;
  });
  // Every attempt runs on promises alone: a few turns of the event loop settle them all.
  for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
  return actors;
}

await makeActors(Array.from({ length: 500 }, (_, i) => endpoint(count + i)), count); // warm-up, dropped
attempts = 0;
const endpoints = Array.from({ length: count }, (_, i) => endpoint(i));
gc();
const before = process.memoryUsage().heapUsed;
const actors = await makeActors(endpoints, 0);
gc();
const after = process.memoryUsage().heapUsed;
if (state !== 'new' && attempts !== count) throw new Error(`${state}: ${attempts} attempts made, ${count} expected`);
console.log(`${state} ${Math.round((after - before) / count)}`);
for (const actor of actors) await actor.close();
breakers.close();
ticker.close();
