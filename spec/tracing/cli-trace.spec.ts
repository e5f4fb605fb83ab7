/**
 * `herald deliveries attempts <id>` prints the trace id of the delivery's event above its attempts
 * (the CLI as a child process, against a status server on 127.0.0.1).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { StatusServer } from '../../lib/api/status-server.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'cli-trace-admin-token-0123456789';

describe('herald deliveries attempts (trace id)', function () {
  this.timeout(60_000);
  let t: TestHerald | undefined;
  let server: StatusServer | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await server?.close();
    await sink?.close();
    await t?.close();
    server = undefined;
    sink = undefined;
    t = undefined;
  });

  async function attemptsOutput(url: string, deliveryId: string): Promise<string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_')) env[key] = value;
    const child = spawn(process.execPath, ['--import', 'tsx', 'lib/cli/main.ts', 'deliveries', 'attempts', deliveryId], {
      cwd: ROOT,
      env: { ...env, HERALD_URL: url, HERALD_ADMIN_TOKEN: TOKEN, HERALD_DATA_DIR: '/nonexistent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    expect(code, stdout).to.equal(0);
    return stdout;
  }

  it('prints the trace id when the event has a trace context, and no trace line when it has none', async () => {
    t = await startHerald();
    server = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN, clock: t.clock });
    const url = await server.listen();
    sink = await startServer(() => ({ status: 200 }));
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
    const traceContext = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    await t.herald.store.appendEvents([
      { id: 'evt_traced', tenantId: 'acme', type: 'a.b', payload: '{}', createdAt: t.clock.now(), endpointId: endpoint.id, orderingKey: null, traceContext },
      { id: 'evt_plain', tenantId: 'acme', type: 'a.b', payload: '{}', createdAt: t.clock.now(), endpointId: endpoint.id, orderingKey: null },
    ]);
    t.clock.advance(t.herald.config.engine.sweepIntervalMs);
    const attempts = await attemptsSeen(t, 2);
    const traced = attempts.find((a) => a.eventId === 'evt_traced')!;
    const plain = attempts.find((a) => a.eventId === 'evt_plain')!;
    expect(await attemptsOutput(url, traced.deliveryId)).to.match(/^trace 4bf92f3577b34da6a3ce929d0e0e4736\n/);
    expect(await attemptsOutput(url, plain.deliveryId)).to.not.include('trace');
  });
});
