/**
 * `herald event-types` against a running status port: each command a process of its own.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StatusServer } from '../../lib/api/status-server.ts';
import { startHerald, type TestHerald } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'cli-admin-token-0123456789';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

describe('herald event-types (CLI against a running status port)', function () {
  this.timeout(60_000);
  let t: TestHerald;
  let server: StatusServer;
  let url: string;

  beforeEach(async () => {
    t = await startHerald({}, { start: false });
    server = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN, clock: t.clock });
    url = await server.listen();
  });

  afterEach(async () => {
    await server.close();
    await t.close();
  });

  async function herald(...args: string[]): Promise<Run> {
    const clean: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_')) clean[key] = value;
    const child = spawn(process.execPath, ['--import', 'tsx', 'lib/cli/main.ts', 'event-types', ...args], {
      cwd: ROOT,
      env: { ...clean, HERALD_URL: url, HERALD_ADMIN_TOKEN: TOKEN, HERALD_DATA_DIR: '/nonexistent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    return { code, stdout, stderr };
  }

  it('creates a type from a schema file, lists, shows, versions, deprecates and deletes it', async () => {
    const schemaFile = join(t.dir, 'invoice.json');
    writeFileSync(schemaFile, JSON.stringify({ type: 'object', required: ['amount'] }));
    const created = await herald('create', 'invoice.paid', '--description', 'An invoice was paid', '--schema', schemaFile, '--json');
    expect(created.code, created.stderr).to.equal(0);
    expect(JSON.parse(created.stdout).versions[0].schema).to.deep.equal({ type: 'object', required: ['amount'] });

    const listed = await herald('list');
    expect(listed.stdout).to.match(/NAME\s+VERSION\s+SCHEMA\s+DEPRECATED\s+DESCRIPTION/).and.match(/invoice\.paid\s+1\s+yes\s+-\s+An invoice was paid/);
    expect((await herald('update', 'invoice.paid', '--schema', 'none')).stdout).to.match(/Version:\s+2 of 2 \(no schema: payloads unchecked\)/);
    expect((await herald('deprecate', 'invoice.paid', '--note', 'use invoice.settled')).stdout).to.match(/Deprecated:\s+since .*: use invoice\.settled/);
    expect((await t.herald.eventTypes.get('invoice.paid')).deprecated).to.equal(true);
    expect((await herald('delete', 'invoice.paid')).code).to.equal(0);
    expect((await herald('list')).stdout).to.equal('No event types: every type publishes unchecked.\n');
  });

  it('says why when the API refuses (1) and when the command is misused (2)', async () => {
    const badSchema = join(t.dir, 'bad.json');
    writeFileSync(badSchema, JSON.stringify({ type: 'integerr' }));
    const refused = await herald('create', 'invoice.paid', '--schema', badSchema);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/schema: must be a JSON Schema \(draft 2020-12\) that compiles/);
    expect((await herald('show', 'unknown.type')).stderr).to.match(/name: unknown event type 'unknown.type'/);
    const misuse = await herald('create', 'invoice.paid', '--schema', join(t.dir, 'missing.json'));
    expect(misuse.code).to.equal(2);
    expect(misuse.stderr).to.match(/--schema: cannot read/);
  });
});
