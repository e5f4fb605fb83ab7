/**
 * Two `herald start` processes on one PostgreSQL database, one of them with
 * its clock set 30 s off by libfaketime (the whole process: Date, timers stay
 * on the monotonic clock). Uncorrected, the node ahead saw the other's
 * heartbeats as 30 s old and took every slot; the node behind saw its own
 * leases as long-lived and the other's heartbeats from the future. On the
 * cluster clock (lib/cluster/cluster-clock.ts) both hold a share, the skewed
 * one says its offset, and nothing published meanwhile is lost.
 */
import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { LOOPBACK } from '../support/harness.ts';
import { banner, get, runHerald, type HeraldProcess } from '../support/herald-cli.ts';
import { allSeen, recordingSink, type RecordingSink } from '../support/kill-one-node.ts';

const FAKETIME_LIBRARY = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';
const TOKEN = 'clock-skew-admin-token-0123456789';
const SLOTS = 256;
const SKEW_MS = 30_000;
const ENDPOINTS = 10;
const BATCH = 200;
/** How long the two may take to settle on their shares (a few heartbeats and a drain, on a busy machine). */
const SETTLE_LIMIT_MS = 45_000;

/** The parts of `GET /v1/status` read here. */
interface Status {
  readonly node: string;
  readonly slotsOwned: number;
  readonly clockOffsetMs: number;
  readonly cluster: { readonly nodes: ReadonlyArray<{ readonly id: string; readonly slotsHeld: number; readonly clockOffsetMs: number }> };
}

describe('Cluster on PostgreSQL with one node\'s clock 30 s off (real processes, libfaketime)', function () {
  this.timeout(120_000);
  let dir = '';
  let recorded: RecordingSink | undefined;
  let publisher: Herald | undefined;
  const procs: HeraldProcess[] = [];

  before(function () {
    if (!existsSync(FAKETIME_LIBRARY)) {
      console.log(`      (skipped: ${FAKETIME_LIBRARY} is missing; install it with \`apt-get install -y libfaketime\` (Debian/Ubuntu) to run this spec)`);
      this.skip();
    }
  });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-skew-'));
  });

  afterEach(async () => {
    for (const proc of procs.splice(0)) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await publisher?.close();
    publisher = undefined;
    await recorded?.sink.close();
    recorded = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** `herald start` on the database, in a data folder of its own; `faketime` sets its clock off (`+30s`, `-30s`). */
  async function startNode(name: string, store: string, faketime?: string): Promise<{ proc: HeraldProcess; url: string }> {
    const dataDir = join(dir, name);
    const config = join(dir, 'engine.json');
    writeFileSync(config, JSON.stringify({ engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 } }));
    const env: Record<string, string> = { HERALD_ADMIN_TOKEN: TOKEN, HERALD_ALLOW_NETWORKS: LOOPBACK.join(',') };
    if (faketime !== undefined) {
      Object.assign(env, { LD_PRELOAD: FAKETIME_LIBRARY, FAKETIME: faketime, FAKETIME_DONT_FAKE_MONOTONIC: '1' });
    }
    const proc = runHerald(['start', '--port', '0', '--data-dir', dataDir, '--store', store, '--config', config, '--log-level', 'warn'], env);
    procs.push(proc);
    const { url } = await banner(proc);
    return { proc, url };
  }

  async function status(url: string): Promise<Status> {
    const reply = await get(`${url}/v1/status`, TOKEN);
    expect(reply.status, reply.body).to.equal(200);
    return JSON.parse(reply.body) as Status;
  }

  /** Asks both nodes until `test` holds of their statuses, at most `limitMs`; answers the last statuses. */
  async function untilStatuses(urls: readonly string[], test: (statuses: Status[]) => boolean, limitMs: number): Promise<Status[]> {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const statuses = await Promise.all(urls.map(status));
      if (test(statuses)) return statuses;
      if (Date.now() > deadline) {
        expect.fail(`not settled within ${limitMs} ms: ${JSON.stringify(statuses.map((s) => ({ slotsOwned: s.slotsOwned, clockOffsetMs: s.clockOffsetMs })))}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  async function publishBatch(round: number): Promise<string[]> {
    const events = Array.from({ length: BATCH }, (_, i) => ({ tenantId: `t${i % ENDPOINTS}`, type: 'a.b', payload: { round, n: i } }));
    return (await publisher!.publish(events)).map((e) => e.id);
  }

  for (const [faketime, offsetMs] of [['+30s', -SKEW_MS], ['-30s', SKEW_MS]] as const) {
    context(`when the second node's clock is ${faketime} (FAKETIME=${faketime})`, () => {
      it(`settles with a share of the slots for each, the skewed one reporting an offset near ${offsetMs} ms, and delivers every event`, async () => {
        const store = await createTestDatabase();
        recorded = await recordingSink();
        publisher = await Herald.open(resolveConfig({ store, dataDir: join(dir, 'publisher'), logLevel: 'silent' }));
        for (let e = 0; e < ENDPOINTS; e++) await publisher.createEndpoint({ tenantId: `t${e}`, url: `${recorded.sink.url}/e${e}` });

        const plain = await startNode('plain', store);
        const ids = await publishBatch(0);
        const skewed = await startNode('skewed', store, faketime);
        ids.push(...(await publishBatch(1)));

        const settledAt = Date.now();
        const share = (s: Status): boolean => s.slotsOwned >= 96 && s.slotsOwned <= 160;
        // Each node's listing is read from the store when it is asked: the two statuses are asked
        // together, so one may predate the other node's last lease round. Settled is when both
        // nodes' own views and the listing agree.
        const listsBoth = (s: Status): boolean =>
          s.cluster.nodes.length === 2 && s.cluster.nodes.reduce((sum, n) => sum + n.slotsHeld, 0) >= SLOTS - 2;
        const [ofPlain, ofSkewed] = await untilStatuses(
          [plain.url, skewed.url],
          (both) => both.every(share) && both.reduce((sum, s) => sum + s.slotsOwned, 0) === SLOTS && listsBoth(both[0]!),
          SETTLE_LIMIT_MS,
        );
        const settleMs = Date.now() - settledAt;
        ids.push(...(await publishBatch(2)));

        expect(ofSkewed!.clockOffsetMs).to.be.within(offsetMs - 1_000, offsetMs + 1_000);
        expect(ofPlain!.clockOffsetMs).to.be.within(-1_000, 1_000);
        // Either node lists both, with the leases each holds and the offset each measured.
        const nodes = new Map(ofPlain!.cluster.nodes.map((n) => [n.id, n]));
        expect([...nodes.keys()].sort()).to.deep.equal([ofPlain!.node, ofSkewed!.node].sort());
        expect(nodes.get(ofSkewed!.node)!.clockOffsetMs).to.be.within(offsetMs - 1_000, offsetMs + 1_000);
        expect(nodes.get(ofSkewed!.node)!.slotsHeld + nodes.get(ofPlain!.node)!.slotsHeld).to.be.within(SLOTS - 2, SLOTS);

        await allSeen(recorded.sink, recorded.seenAt, ids);
        for (;;) {
          // Seen by the sink is not yet settled: asked until the last settles are written.
          const counts = await publisher.store.countDeliveries();
          if (counts.delivered === ids.length) break;
          expect(counts.dead, 'nothing dead-lettered').to.equal(0);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(skewed.proc.stdout, 'the skewed node warns of its clock').to.match(offsetMs < 0 ? /clock is \d+ s ahead of the store/ : /clock is \d+ s behind the store/);
        expect(plain.proc.stdout).to.not.include('clockOffsetMs');
        console.log(`      (settled ${settleMs} ms after the second node's banner: ${ofPlain!.slotsOwned} + ${ofSkewed!.slotsOwned} slots; ` +
          `offsets ${ofPlain!.clockOffsetMs} ms and ${ofSkewed!.clockOffsetMs} ms; ${ids.length} events delivered)`);
      });
    });
  }
});
