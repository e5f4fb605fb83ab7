/**
 * `npm run demo`: Herald, a misbehaving sink and a producer, in about a minute.
 *
 * The retry schedule is compressed for the demo (1 s, 2 s, 4 s, 8 s instead of
 * the default 30 s … 24 h) and so is the breaker (opens after 4 attempts at
 * ≥ 50 % failures in 10 s, probes after 4 s). Everything runs on 127.0.0.1
 * with a throwaway data folder.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { ShortIds } from '../../lib/ids.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { StatusServer } from '../../lib/api/status-server.ts';
import { startSink, type SinkPhase } from './sink.ts';

const SINK_PORT = 9_199;
const STATUS_PORT = 8_089;
const PRODUCE_FOR_MS = 30_000;
const GIVE_UP_AFTER_MS = 60_000;

const dataDir = mkdtempSync(join(tmpdir(), 'herald-demo-'));
const dbPath = join(dataDir, 'herald.db');
const t0 = Date.now();
const clockText = (): string => `+${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s`;
const say = (line: string): void => console.log(`[${clockText()}] ${line}`);

const phases: SinkPhase[] = [
  { behaviour: 'ok', forMs: 6_000 },
  { behaviour: 'error', forMs: 6_000 },
  { behaviour: 'throttle', forMs: 5_000, retryAfterSec: 3 },
  { behaviour: 'down', forMs: 9_000 },
  { behaviour: 'ok', forMs: Infinity },
];

const config = resolveConfig({
  store: `sqlite:${dbPath}`,
  dataDir,
  port: STATUS_PORT,
  allowNetworks: ['127.0.0.0/8'],
  logLevel: 'silent',
  delivery: { timeoutMs: 2_000 },
  breaker: { volumeThreshold: 4, errorThresholdPercentage: 50, windowMs: 10_000, cooldownMs: 4_000 },
  engine: { sweepIntervalMs: 250, leaseMs: 2_000, renewIntervalMs: 500 },
});

const herald = await Herald.open(config);
const adminToken = 'demo-admin-token-0123456789';
const server = new StatusServer(herald, { host: '127.0.0.1', port: STATUS_PORT, adminToken });
const statusUrl = await server.listen();

const secrets: string[] = [];
const sink = await startSink({
  port: SINK_PORT,
  phases,
  secrets: () => secrets,
  onPhase: (phase) => say(`sink is now ${phase.behaviour.toUpperCase()}${phase.behaviour === 'throttle' ? ` (429, Retry-After: ${phase.retryAfterSec} s)` : ''}`),
  onRequest: (r) => {
    if (r.signatureValid === false) say(`sink: INVALID signature for ${r.webhookId}`);
  },
});

const orders = await herald.createEndpoint({
  tenantId: 'acme',
  url: `${sink.url}/orders`,
  description: 'CRM webhooks, retried (compressed demo schedule)',
  retry: { schedule: ['PT1S', 'PT2S', 'PT4S', 'PT8S'] },
});
const billing = await herald.createEndpoint({
  tenantId: 'acme',
  url: `${sink.url}/billing`,
  description: 'billing, at-most-once: one attempt, failures go straight to the dead-letter queue',
  eventTypes: ['invoice.*'],
  mode: 'at-most-once',
});
secrets.push(orders.secret, billing.secret);
const names = new Map([[orders.endpoint.id, 'orders'], [billing.endpoint.id, 'billing']]);
const nameOf = (id: string): string => names.get(id) ?? id;
// Events by their random tails: their leading digits are the time, the same for every event of a second.
const shortIds = new ShortIds();

herald.events.on('attempt', (e) => say(`${nameOf(e.endpointId).padEnd(7)} attempt ${e.attempt} of ${shortIds.of(e.eventId)}  ${e.summary}`));
herald.events.on('breaker', (e) =>
  say(`${nameOf(e.endpointId).padEnd(7)} BREAKER ${e.state.toUpperCase()}${e.probeAt === null ? '' : `, one probe at +${((e.probeAt - t0) / 1000).toFixed(1)}s`}`),
);
herald.events.on('paused', (e) => say(`${nameOf(e.endpointId).padEnd(7)} mailbox PAUSED by 429 until +${((e.until - t0) / 1000).toFixed(1)}s`));
herald.events.on('operational', (e) => say(`${('endpointId' in e ? nameOf(e.endpointId) : 'queue').padEnd(7)} ${e.type}: ${e.detail}`));
herald.events.on('failure', (e) => say(`engine failure in ${e.where}: ${String(e.error)}`));

await herald.start();
say(`Herald is up: status port ${statusUrl}, sink ${sink.url}, data in ${dataDir}`);
say('A producer moves CRM leads to new stages and publishes lead.stage_changed in the same SQLite transaction; every third one also bills an invoice.');

// The producer: its own connection to the same file, business change and event in one transaction.
const producerDb = new Database(dbPath);
producerDb.pragma('busy_timeout = 5000');
producerDb.exec('CREATE TABLE IF NOT EXISTS leads (id INTEGER PRIMARY KEY, stage TEXT NOT NULL)');
const moveLead = producerDb.transaction((n: number) => {
  producerDb.prepare('INSERT OR REPLACE INTO leads (id, stage) VALUES (?, ?)').run(n, `stage-${n % 4}`);
  publish(producerDb, { tenantId: 'acme', type: 'lead.stage_changed', payload: { leadId: n, stage: `stage-${n % 4}` } });
  if (n % 3 === 0) publish(producerDb, { tenantId: 'acme', type: 'invoice.paid', payload: { invoice: `inv-${n}`, amount: 100 * n } });
});
let n = 0;
const producer = setInterval(() => {
  moveLead.immediate(++n);
}, 1_500);
setTimeout(() => clearInterval(producer), PRODUCE_FOR_MS);

// Wait until everything produced has reached a final state (or give up).
for (;;) {
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const counts = await herald.store.countDeliveries();
  const open = (counts.pending ?? 0) + (counts.in_flight ?? 0);
  if ((Date.now() - t0 > PRODUCE_FOR_MS && open === 0) || Date.now() - t0 > GIVE_UP_AFTER_MS) break;
}

const counts = await herald.store.countDeliveries();
const dead = await herald.listDeadLetters({});
console.log('');
say(`Done producing. Deliveries: ${JSON.stringify(counts)}`);
say(`${dead.length} dead letter(s):`);
for (const letter of dead.slice(0, 8)) {
  console.log(`    ${letter.id}  ${shortIds.of(letter.eventId)}  ${nameOf(letter.endpointId)}  ${letter.eventType}  ${letter.attempts.length} attempt(s)  ${letter.reason}`);
}
if (dead[0] !== undefined) {
  console.log('');
  say('Replay one over the admin API (the sink is healthy again, webhook-id stays the same):');
  console.log(`    curl -X POST -H "Authorization: Bearer ${adminToken}" ${statusUrl}/v1/dead-letters/${dead[0].id}/replay`);
  console.log(`    or all of one endpoint: curl -X POST -H "Authorization: Bearer ${adminToken}" -d '{"endpointId":"${dead[0].endpointId}"}' ${statusUrl}/v1/dead-letters/replay`);
  const delivered = new Promise<void>((resolve) => {
    herald.events.on('attempt', (e) => {
      if (e.eventId === dead[0]?.eventId && e.settlement.kind === 'delivered') resolve();
    });
  });
  const res = await fetch(`${statusUrl}/v1/dead-letters/${dead[0].id}/replay`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
  say(`replay answered ${res.status}: ${await res.text()}`);
  await Promise.race([delivered, new Promise((resolve) => setTimeout(resolve, 5_000))]);
}

await server.close();
await herald.close();
producerDb.close();
await sink.close();
rmSync(dataDir, { recursive: true, force: true });
say('Demo over.');
