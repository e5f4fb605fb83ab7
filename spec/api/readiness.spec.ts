import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { ManualClock } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { StoreError } from '../../lib/errors.ts';
import { Herald } from '../../lib/herald.ts';
import type { OutboxEvent } from '../../lib/model.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { StatusServer } from '../../lib/api/status-server.ts';
import { banner, runHerald, type HeraldProcess } from '../support/herald-cli.ts';
import { LOOPBACK } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'readiness-admin-token-0123456789';

interface Reply {
  readonly status: number;
  readonly json: any;
  /** Round trip on this process's monotonic clock. */
  readonly ms: number;
}

async function call(url: string, init: { method?: 'GET' | 'POST'; body?: unknown } = {}): Promise<Reply> {
  const startedAt = performance.now();
  const response = await request(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, json: text === '' ? undefined : JSON.parse(text), ms: performance.now() - startedAt };
}

/** A process holding SQLite's write lock until told to let go. */
async function holdLock(dbPath: string): Promise<{ child: ChildProcess; release(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'spec/fixtures/sqlite-lock-holder.ts', dbPath], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  const printed = (word: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (out.includes(word)) resolve();
      };
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        check();
      });
      child.once('close', (code) => (out.includes(word) ? resolve() : reject(new Error(`lock holder exited (${code}) before '${word}'`))));
    });
  const locked = printed('locked');
  const released = printed('released');
  await locked;
  return {
    child,
    async release() {
      child.stdin?.write('release\n');
      await released;
    },
  };
}

describe('Readiness', function () {
  context('when another process holds the SQLite write lock (a producer\'s long transaction)', function () {
    this.timeout(60_000);
    let dir = '';
    let herald: HeraldProcess | undefined;
    let holder: ChildProcess | undefined;

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'herald-readiness-'));
    });

    afterEach(async () => {
      for (const child of [herald?.child, holder]) {
        if (child !== undefined && child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await once(child, 'close');
        }
      }
      herald = undefined;
      holder = undefined;
      rmSync(dir, { recursive: true, force: true });
    });

    it('keeps answering its probes, turns /readyz 503 and says why, fails publishes with 503 after the busy timeout, then recovers', async () => {
      const dbPath = join(dir, 'herald.db');
      herald = runHerald(['start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${dbPath}`, '--log-level', 'silent'], {
        HERALD_ADMIN_TOKEN: TOKEN,
      });
      const { url } = await banner(herald);
      let ready = await call(`${url}/readyz`);
      while (ready.status !== 200) ready = await call(`${url}/readyz`);
      const endpoint = await call(`${url}/v1/endpoints`, { method: 'POST', body: { tenantId: 'acme', url: 'http://127.0.0.1:9/in' } });
      expect(endpoint.status).to.equal(201);
      const event = { tenantId: 'acme', type: 'lead.created', payload: { n: 1 } };

      const lock = await holdLock(dbPath);
      holder = lock.child;
      const probes: Array<{ path: string; reply: Reply }> = [];
      let unavailable: Reply | undefined;
      let statusWhileLocked: Reply | undefined;
      let publishReply: Reply | undefined;
      const probeUntil = async (done: () => boolean): Promise<void> => {
        while (!done()) {
          for (const path of ['/healthz', '/readyz', '/v1/status']) {
            const reply = await call(`${url}${path}`);
            probes.push({ path, reply });
            if (path === '/readyz' && reply.status === 503) unavailable ??= reply;
            if (path === '/v1/status' && unavailable !== undefined) statusWhileLocked ??= reply;
          }
        }
      };
      // Idle (nothing published): its own heartbeat waits for the lock, and readiness says so.
      await probeUntil(() => unavailable !== undefined);
      // Herald's busy timeout is 5 s: a publish waits for the lock, then fails with a clear 503.
      void call(`${url}/v1/events`, { method: 'POST', body: event }).then((reply) => (publishReply = reply));
      await probeUntil(() => publishReply !== undefined);
      if (publishReply === undefined) expect.fail('the publish did not answer');
      const slowest = Math.max(...probes.map((p) => p.reply.ms));
      console.log(`      (${probes.length} probes while the lock was held, slowest ${slowest.toFixed(1)} ms)`);
      // Before this was fixed each probe waited up to the 5 s busy timeout; the bound leaves room for a loaded
      // machine (npm run chaos holds the 100 ms requirement; here 30–70 ms is usual).
      expect(slowest, 'slowest probe (ms)').to.be.below(500);
      expect(probes.filter((p) => p.path === '/healthz').every((p) => p.reply.status === 200)).to.equal(true);
      expect(unavailable?.json).to.deep.include({ status: 'not ready' });
      expect(unavailable?.json.reason).to.match(/^store unavailable: store call \w+ has been waiting for (\d+ ms|\d+(\.\d)? s)$/);
      expect(statusWhileLocked?.status).to.equal(200);
      expect(statusWhileLocked?.json.store).to.include({ reachable: true, available: false });
      expect(publishReply.status).to.equal(503);
      expect(publishReply.json.error.code).to.equal('HERALD_STORE');
      expect(publishReply.json.error.message).to.contain('locked');

      await lock.release();
      ready = await call(`${url}/readyz`);
      while (ready.status !== 200) ready = await call(`${url}/readyz`);
      expect((await call(`${url}/v1/events`, { method: 'POST', body: event })).status).to.equal(202);
      const status = await call(`${url}/v1/status`);
      expect(status.json.store).to.include({ reachable: true, available: true, error: null });
    });
  });

  context('when writes fail (a full disk) while reads still work', () => {
    /** SQLite on a full disk: reads answer, writes that need new pages fail with SQLITE_FULL. */
    class FullDiskStore extends SqliteStore {
      full = false;

      override async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
        if (this.full) throw new StoreError('sqlite: appendEvents failed: database or disk is full');
        return super.appendEvents(events);
      }
    }

    let herald: Herald | undefined;
    let server: StatusServer | undefined;
    let dir = '';

    afterEach(async () => {
      await server?.close();
      await herald?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('answers /readyz 503 with the failure and shows the store unavailable, until writes have succeeded again for 5 s', async () => {
      dir = mkdtempSync(join(tmpdir(), 'herald-readiness-'));
      const clock = new ManualClock(Date.now());
      const store = new FullDiskStore({ path: join(dir, 'herald.db'), clock });
      const config = resolveConfig({ store: `sqlite:${join(dir, 'herald.db')}`, dataDir: dir, allowNetworks: [...LOOPBACK], logLevel: 'silent' });
      herald = await Herald.open(config, { clock, store });
      await herald.start();
      server = new StatusServer(herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN, clock });
      const url = await server.listen();
      expect((await call(`${url}/v1/endpoints`, { method: 'POST', body: { tenantId: 'acme', url: 'http://127.0.0.1:9/in' } })).status).to.equal(201);
      const event = { tenantId: 'acme', type: 'lead.created', payload: {} };
      expect((await call(`${url}/readyz`)).status).to.equal(200);

      store.full = true;
      const refused = await call(`${url}/v1/events`, { method: 'POST', body: event });
      expect(refused.status).to.equal(503);
      const readyz = await call(`${url}/readyz`);
      expect(readyz.status).to.equal(503);
      expect(readyz.json.reason).to.equal('store unavailable: store call appendEvents failed: sqlite: appendEvents failed: database or disk is full');
      const status = await call(`${url}/v1/status`);
      expect(status.json.store).to.include({ reachable: true, available: false });
      expect(status.json.store.error).to.contain('disk is full');

      store.full = false;
      clock.advance(4_999);
      expect((await call(`${url}/readyz`)).status).to.equal(503);
      clock.advance(1);
      expect((await call(`${url}/readyz`)).status).to.equal(200);
      expect((await call(`${url}/v1/events`, { method: 'POST', body: event })).status).to.equal(202);
    });
  });
});
