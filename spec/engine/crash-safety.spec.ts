import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { LOOPBACK, startServer, type TestServer } from '../support/harness.ts';

/** Starts a Herald node as a real child process and resolves once it holds its leases. */
async function startNode(overrides: ConfigOverrides): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'spec/fixtures/herald-node.ts', JSON.stringify(overrides)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready ')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`node exited with ${code} before it was ready: ${stderr}`)));
  });
  return child;
}

describe('Crash safety (real processes on one SQLite file)', function () {
  this.timeout(30_000);
  const children: ChildProcess[] = [];
  let sink: TestServer | undefined;
  let dir = '';

  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    }
    if (sink !== undefined) {
      for (const held of sink.held) held.respond(200);
      await sink.close();
      sink = undefined;
    }
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  context('when a node is killed after claiming deliveries and before settling them', () => {
    it('loses nothing: after a restart every delivery is attempted again and delivered', async () => {
      dir = mkdtempSync(join(tmpdir(), 'herald-crash-'));
      const overrides: ConfigOverrides = {
        store: `sqlite:${join(dir, 'herald.db')}`,
        dataDir: dir,
        allowNetworks: [...LOOPBACK],
        logLevel: 'silent',
        engine: { leaseMs: 1_000, renewIntervalMs: 200, sweepIntervalMs: 100 },
      };
      let crashed = false;
      sink = await startServer(() => (crashed ? { status: 200 } : 'hold'));

      // Set up through the library, without taking leases: one endpoint, 20 events.
      const setup = await Herald.open(resolveConfig(overrides));
      await setup.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 4 });
      const events = await setup.publish(Array.from({ length: 20 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await setup.close();

      const first = await startNode(overrides);
      children.push(first);
      await sink.requests(4); // four requests in flight, more claimed in its mailbox, none settled
      first.kill('SIGKILL');
      await once(first, 'exit');
      crashed = true;
      for (const held of sink.held.splice(0)) held.respond(200); // nobody is listening any more

      const second = await startNode(overrides);
      children.push(second);
      const wanted = new Set(events.map((e) => e.id));
      // Wait until every event id has been answered 200 after the crash.
      for (let seen = sink.received.length; ; seen++) {
        const requests = await sink.requests(seen + 1);
        const answered = new Set(requests.slice(4).map((r) => String(r.headers['webhook-id'])));
        if ([...wanted].every((id) => answered.has(id))) break;
      }
      second.kill('SIGTERM');
      await once(second, 'exit');
      expect(second.exitCode).to.equal(0);

      const check = await Herald.open(resolveConfig(overrides));
      try {
        const deliveries = await check.listDeliveries({ limit: 100 });
        expect(deliveries).to.have.length(20);
        expect(deliveries.every((d) => d.status === 'delivered')).to.equal(true);
        const firstFour = sink.received.slice(0, 4).map((r) => String(r.headers['webhook-id']));
        const after = sink.received.slice(4).map((r) => String(r.headers['webhook-id']));
        for (const id of firstFour) expect(after, `in-flight ${id} attempted again`).to.include(id);
      } finally {
        await check.close();
      }
    });
  });
});
