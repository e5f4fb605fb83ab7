import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { StatusServer } from '../../lib/api/status-server.ts';
import { attemptsSeen, closedPort, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'cli-admin-token-0123456789';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly json: any;
}

describe('herald ops commands (CLI against a running status port)', function () {
  // Each command is a process of its own (≈ 1–2 s to start under tsx): a test runs several in turn.
  this.timeout(60_000);
  let t: TestHerald;
  let server: StatusServer;
  let url: string;
  let sink: TestServer;
  let answer = 200;
  /** The sink holds its answers (the endpoint is slow) until the test releases them. */
  let holding = false;

  // A fresh node per test: the root hook allows no server to outlive its test.
  beforeEach(async () => {
    answer = 200;
    t = await startHerald({ breaker: { volumeThreshold: 1_000 } });
    server = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN, clock: t.clock });
    url = await server.listen();
    sink = await startServer(() => (holding ? 'hold' : { status: answer }));
  });

  afterEach(async () => {
    await server.close();
    await sink.close();
    await t.close();
  });

  /** `herald <args>` as a child process, with HERALD_URL and HERALD_ADMIN_TOKEN unless `env` says otherwise. */
  async function herald(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
    const clean: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_')) clean[key] = value;
    const child = spawn(process.execPath, ['--import', 'tsx', 'lib/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...clean, HERALD_URL: url, HERALD_ADMIN_TOKEN: TOKEN, HERALD_DATA_DIR: '/nonexistent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    let json: unknown;
    if (args.includes('--json') && code === 0) {
      try {
        json = JSON.parse(stdout);
      } catch {
        expect.fail(`herald ${args.join(' ')} printed no JSON: ${stdout} ${stderr}`);
      }
    }
    return { code, stdout, stderr, json };
  }

  function ok(run: Run): Run {
    expect(run.code, `${run.stdout}\n${run.stderr}`).to.equal(0);
    return run;
  }

  describe('endpoints', () => {
    it('adds, lists, shows, disables, enables and rotates, with tables for people and --json for scripts', async () => {
      const added = ok(await herald(['endpoints', 'add', `${sink.url}/a`, '--tenant', 'acme', '--event-types', 'order.*,invoice.paid', '--retry', 'aggressive', '--json']));
      const id = added.json.id as string;
      expect(added.json).to.include({ tenantId: 'acme', status: 'enabled' });
      expect(added.json.secret).to.match(/^whsec_/);
      expect(added.json.eventTypes).to.deep.equal(['order.*', 'invoice.paid']);

      const [list, listJson, show, human, disabled] = await Promise.all([
        herald(['endpoints', 'list']),
        herald(['endpoints', 'list', '--tenant', 'acme', '--json']),
        herald(['endpoints', 'show', id]),
        herald(['endpoints', 'add', `${sink.url}/b`, '--tenant', 'acme', '--id', 'ep_cli_b']),
        herald(['endpoints', 'disable', id]),
      ]);
      expect(ok(list).stdout).to.match(/^ID\s+TENANT\s+STATUS\s+URL/);
      expect(list.stdout).to.include(id).and.include('order.*,invoice.paid').and.not.include('whsec_');
      expect(ok(listJson).json.map((e: { id: string }) => e.id)).to.include(id);
      expect(ok(show).stdout).to.match(/^id:\s+ep_/m).and.match(/retry:\s+aggressive/).and.not.include('whsec_');
      expect(ok(human).stdout).to.include('ep_cli_b').and.match(/Secret \(shown once.*\): whsec_/);

      expect(ok(disabled).stdout).to.equal(`Endpoint ${id} disabled.\n`);
      expect((await t.herald.getEndpoint(id)).status).to.equal('disabled');
      const [enabled, rotated] = await Promise.all([herald(['endpoints', 'enable', id, '--json']), herald(['endpoints', 'rotate-secret', id, '--json'])]);
      expect(ok(enabled).json).to.include({ id, status: 'enabled' });
      ok(rotated);
      expect(rotated.json.secret).to.match(/^whsec_/).and.not.equal(added.json.secret);
      expect(rotated.json.secretCount).to.equal(2);
    });
  });

  describe('endpoints --scheme ed25519', () => {
    it('adds an ed25519 endpoint showing its whpk_, shows the signing keys, and rotates it to HMAC', async () => {
      const added = ok(await herald(['endpoints', 'add', `${sink.url}/e`, '--tenant', 'acme', '--scheme', 'ed25519']));
      const whpk = /Public key \(ed25519, .*\): (whpk_\S+)/.exec(added.stdout)?.[1] ?? '';
      expect(whpk).to.match(/^whpk_/);
      expect(added.stdout).to.not.include('whsk_');
      const id = /^id:\s+(\S+)/m.exec(added.stdout)?.[1] ?? '';
      const rotated = ok(await herald(['endpoints', 'rotate-secret', id, '--scheme', 'hmac-sha256']));
      expect(rotated.stdout).to.match(/Secret \(shown once.*\): whsec_/).and.include('The previous key keeps signing until');
      const [shown, refused, misplaced] = await Promise.all([
        herald(['endpoints', 'show', id]),
        herald(['endpoints', 'rotate-secret', id, '--scheme', 'rsa']),
        herald(['endpoints', 'update', id, '--scheme', 'ed25519']),
      ]);
      expect(ok(shown).stdout).to.match(new RegExp(`signing keys:\\s+hmac-sha256 \\(current\\); ed25519 ${whpk.replace(/[+/]/g, '\\$&')} \\(until .* UTC\\)`));
      expect(shown.stdout).to.not.include('whsec_').and.not.include('whsk_');
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.include('signatureScheme: must be one of hmac-sha256, ed25519');
      expect(misplaced.code).to.equal(2);
    });
  });

  describe('endpoints add --retry', () => {
    it('takes a formula as JSON and shows it; refuses bad JSON (2) and a broken formula with the API message (1)', async () => {
      const formula = '{"initial":"PT30S","multiplier":2,"max":"PT6H","attempts":9,"jitter":"full"}';
      const [added, badJson, broken, withJitter] = await Promise.all([
        herald(['endpoints', 'add', `${sink.url}/f`, '--tenant', 'acme', '--retry', formula, '--json']),
        herald(['endpoints', 'add', `${sink.url}/f`, '--tenant', 'acme', '--retry', '{"initial":']),
        herald(['endpoints', 'add', `${sink.url}/f`, '--tenant', 'acme', '--retry', '{"initial":"PT1H","multiplier":2,"max":"PT1M","attempts":3}']),
        herald(['endpoints', 'add', `${sink.url}/g`, '--tenant', 'acme', '--retry', '{"preset":"relaxed","jitter":"equal"}', '--json']),
      ]);
      expect(ok(added).json.retry).to.deep.equal(JSON.parse(formula));
      expect(badJson.code).to.equal(2);
      expect(badJson.stderr).to.include('--retry: a JSON retry policy must be valid JSON');
      expect(broken.code).to.equal(1);
      expect(broken.stderr).to.include('retry.max: must be at least initial, "PT1H" (got "PT1M")');

      const [shown, shownPreset] = await Promise.all([
        herald(['endpoints', 'show', added.json.id as string]),
        herald(['endpoints', 'show', ok(withJitter).json.id as string]),
      ]);
      expect(ok(shown).stdout).to.include(`retry:`).and.include(formula);
      expect(ok(shownPreset).stdout).to.match(/retry:\s+relaxed, jitter equal$/m);
    });
  });

  describe('endpoints add --rate-limit', () => {
    it('takes n/s (or /min, /h) and a burst, shows the limit; refuses a bad form (2) and an out-of-range one with the API message (1)', async () => {
      const [added, perMinute, unlimited, badForm, tooFast] = await Promise.all([
        herald(['endpoints', 'add', `${sink.url}/r`, '--tenant', 'acme', '--rate-limit', '10/s,20', '--json']),
        herald(['endpoints', 'add', `${sink.url}/m`, '--tenant', 'acme', '--rate-limit', '30/min', '--json']),
        herald(['endpoints', 'add', `${sink.url}/u`, '--tenant', 'acme', '--json']),
        herald(['endpoints', 'add', `${sink.url}/b`, '--tenant', 'acme', '--rate-limit', 'fast']),
        herald(['endpoints', 'add', `${sink.url}/t`, '--tenant', 'acme', '--rate-limit', '20000/s']),
      ]);
      expect(ok(added).json.rateLimit).to.deep.equal({ perSecond: 10, burst: 20 });
      expect(ok(perMinute).json.rateLimit).to.deep.equal({ perSecond: 0.5, burst: 1 });
      expect(badForm.code).to.equal(2);
      expect(badForm.stderr).to.include('--rate-limit: must be <number>/s, /min or /h').and.include('"fast"');
      expect(tooFast.code).to.equal(1);
      expect(tooFast.stderr).to.include('rateLimit.perSecond: must be a number from 0.01 to 10000 (got 20000)');

      const [shown, shownUnlimited] = await Promise.all([
        herald(['endpoints', 'show', added.json.id as string]),
        herald(['endpoints', 'show', ok(unlimited).json.id as string]),
      ]);
      expect(ok(shown).stdout).to.match(/^rate limit:\s+10\/s, burst 20$/m);
      expect(ok(shownUnlimited).stdout).to.match(/^rate limit:\s+none$/m);
    });
  });

  describe('endpoints --header, --secret-header and --auth-*', () => {
    it('sets headers and auth, shows names with secret values masked, removes them on update; refuses two kinds of auth (2)', async () => {
      const added = await herald([
        'endpoints', 'add', `${sink.url}/h`, '--tenant', 'acme', '--header', 'X-Team: payments', '--secret-header', 'X-Api-Key: k-cli-secret-1',
        '--auth-basic', 'herald:pw-cli-secret-2', '--json',
      ]);
      expect(ok(added).json.headers).to.deep.equal({ 'X-Team': { value: 'payments', secret: false }, 'X-Api-Key': { secret: true } });
      expect(added.json.auth).to.deep.equal({ type: 'basic', username: 'herald', passwordSet: true });
      const id = added.json.id as string;
      const shown = ok(await herald(['endpoints', 'show', id])).stdout;
      expect(shown).to.match(/^headers:\s+X-Team: payments, X-Api-Key: \*\*\*$/m).and.match(/^auth:\s+basic, user herald \(password set\)$/m);
      expect(shown).to.not.include('k-cli-secret-1').and.not.include('pw-cli-secret-2');
      const oauth = await herald([
        'endpoints', 'update', id, '--no-headers', '--oauth2-token-url', 'https://auth.example/token', '--oauth2-client-id', 'c1',
        '--oauth2-client-secret', 'cs-cli-secret-3', '--oauth2-scope', 'hooks', '--json',
      ]);
      expect(ok(oauth).json).to.deep.include({ headers: null });
      expect(oauth.json.auth).to.deep.equal({ type: 'oauth2', tokenUrl: 'https://auth.example/token', clientId: 'c1', clientSecretSet: true, scope: 'hooks', audience: null });
      expect(ok(await herald(['endpoints', 'update', id, '--no-auth', '--json'])).json.auth).to.equal(null);
      const both = await herald(['endpoints', 'update', id, '--auth-bearer', 't', '--auth-basic', 'u:p']);
      expect(both.code).to.equal(2);
      expect(both.stderr).to.include('give one kind of auth (got --auth-bearer, --auth-basic)');
    });
  });

  describe('endpoints add --client-cert --client-key', () => {
    it('sends the PEM files, shows the subject and expiry (never the key), removes it with --no-client-cert', async () => {
      const tls = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));
      const [added, encrypted, half] = await Promise.all([
        herald(['endpoints', 'add', `${sink.url}/c`, '--tenant', 'acme', '--client-cert', tls('client.pem'), '--client-key', tls('client.key'), '--json']),
        herald(['endpoints', 'add', `${sink.url}/e`, '--tenant', 'acme', '--client-cert', tls('client.pem'), '--client-key', tls('client-encrypted.key'), '--json'],
          { HERALD_CLIENT_KEY_PASSPHRASE: 'test-passphrase' }),
        herald(['endpoints', 'add', `${sink.url}/h`, '--tenant', 'acme', '--client-cert', tls('client.pem')]),
      ]);
      expect(ok(added).json.clientTls).to.include({ subject: 'CN=herald-client\nO=Herald Tests', issuer: 'CN=Herald Test CA' });
      expect(added.stdout).to.not.include('PRIVATE KEY');
      expect(ok(encrypted).json.clientTls).to.not.equal(null);
      expect(half.code).to.equal(2);
      const id = added.json.id as string;
      expect(ok(await herald(['endpoints', 'show', id])).stdout).to.match(/^client cert:\s+CN=herald-client, O=Herald Tests, expires \d{4}-/m);
      const removed = await herald(['endpoints', 'update', id, '--no-client-cert', '--json']);
      expect(ok(removed).json.clientTls).to.equal(null);
    });
  });

  describe('endpoints --ordering and endpoints update', () => {
    it('creates a FIFO endpoint, shows its ordering, switches it back; refuses an unknown ordering with the API message (1)', async () => {
      const added = await herald(['endpoints', 'add', `${sink.url}/o`, '--tenant', 'acme', '--ordering', 'fifo', '--json']);
      expect(ok(added).json.ordering).to.equal('fifo');
      const id = added.json.id as string;
      expect(ok(await herald(['endpoints', 'show', id])).stdout).to.match(/^ordering:\s+fifo$/m);
      const updated = await herald(['endpoints', 'update', id, '--ordering', 'none']);
      expect(ok(updated).stdout).to.match(/^ordering:\s+none$/m);
      expect((await t.herald.getEndpoint(id))?.ordering).to.equal('none');
      const bad = await herald(['endpoints', 'update', id, '--ordering', 'lifo']);
      expect(bad.code).to.equal(1);
      expect(bad.stderr).to.include('ordering: must be one of none, fifo (got "lifo")');
      const nothing = await herald(['endpoints', 'update', id]);
      expect(nothing.code).to.equal(2);
    });
  });

  describe('endpoints --filter, --filter-file and filter-test', () => {
    it('sets a filter from text or a file, shows it, tries events against it, removes it with null; refuses bad JSON (2) and a bad filter (1)', async () => {
      const filter = '{"payload.amount":{"$gte":100},"payload.country":{"$in":["BR","PT"]}}';
      const added = ok(await herald(['endpoints', 'add', `${sink.url}/f`, '--tenant', 'acme', '--filter', filter, '--json']));
      const id = added.json.id as string;
      expect(added.json.filter).to.deep.equal(JSON.parse(filter));
      const dir = mkdtempSync(join(tmpdir(), 'herald-filter-'));
      try {
        writeFileSync(join(dir, 'filter.json'), '{"type": "order.paid"}');
        const [shown, matches, fails, tried, fromFile, badJson, badFilter] = await Promise.all([
          herald(['endpoints', 'show', id]),
          herald(['endpoints', 'filter-test', id, '--payload', '{"amount":150,"country":"BR"}', '--type', 'order.paid']),
          herald(['endpoints', 'filter-test', id, '--payload', '{"amount":99,"country":"BR"}', '--json']),
          herald(['endpoints', 'filter-test', id, '--payload', '{"amount":1}', '--filter-file', join(dir, 'filter.json'), '--type', 'order.paid']),
          herald(['endpoints', 'add', `${sink.url}/g`, '--tenant', 'acme', '--filter-file', join(dir, 'filter.json'), '--json']),
          herald(['endpoints', 'update', id, '--filter', '{"payload.a":']),
          herald(['endpoints', 'update', id, '--filter', '{"payload.a":{"$gte":true}}']),
        ]);
        expect(ok(shown).stdout).to.match(/^filter:\s+\{"payload.amount":\{"\$gte":100\},"payload.country":\{"\$in":\["BR","PT"\]\}\}$/m);
        expect(ok(matches).stdout).to.equal('Matches: the endpoint would get this event.\n');
        expect(ok(fails).json).to.deep.include({ matches: false, failed: 'payload.amount.$gte' });
        expect(ok(tried).stdout, 'the filter given is tried, not the saved one').to.include('Matches');
        expect(ok(fromFile).json.filter).to.deep.equal({ type: 'order.paid' });
        expect(badJson.code).to.equal(2);
        expect(badJson.stderr).to.include('--filter: must be valid JSON');
        expect(badFilter.code).to.equal(1);
        expect(badFilter.stderr).to.include('filter.payload.a.$gte: must be a number or a string (got true)');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const removed = ok(await herald(['endpoints', 'update', id, '--filter', 'null']));
      expect(removed.stdout).to.match(/^filter:\s+none$/m);
      expect(await t.herald.getEndpoint(id)).to.deep.include({ filter: null });
    });
  });

  describe('publish, deliveries and status', () => {
    it('publishes, lists the delivery log (walking pages), shows attempts and the node', async () => {
      answer = 200;
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/p` });
      const before = t.attempts.length;
      const published = await Promise.all(
        [1, 2, 3].map((n) => herald(['publish', '--tenant', 'globex', '--type', 'order.paid', '--payload', `{"n":${n}}`, '--json'])),
      );
      const eventIds = published.map((run) => ok(run).json.id as string);
      await attemptsSeen(t, before + 3);
      await t.herald.idle();

      const deliveryId = (await t.herald.listDeliveries({ endpointId: endpoint.id }))[0]?.id ?? '?';
      const [log, table, typed, status, statusJson, attempts] = await Promise.all([
        herald(['deliveries', '--endpoint', endpoint.id, '--since', '7d', '--json']),
        herald(['deliveries', '--tenant', 'globex', '--limit', '2']),
        herald(['deliveries', '--type', 'nothing.here', '--json']),
        herald(['status']),
        herald(['status', '--json']),
        herald(['deliveries', 'attempts', deliveryId, '--json']),
      ]);
      expect(ok(log).json.data.map((d: { eventId: string }) => d.eventId).sort()).to.deep.equal([...eventIds].sort());
      expect(log.json.data.every((d: { status: string }) => d.status === 'delivered')).to.equal(true);
      expect(ok(table).stdout.split('\n').filter((l) => l.includes('delivered'))).to.have.length(2);
      expect(table.stdout).to.include('more; raise --limit');
      expect(ok(typed).json.data).to.deep.equal([]);
      expect(ok(status).stdout).to.match(/^node:\s+node_/m).and.match(/store:\s+reachable/).and.match(/^outbox:\s+0 events not fanned out yet$/m);
      expect(ok(statusJson).json).to.include({ node: t.herald.nodeId });

      expect(ok(attempts).json).to.have.length(1);
      expect(attempts.json[0].outcome).to.include({ status: 200 });
    });

    it('publishes the payload byte for byte as given, big integers and escapes included', async () => {
      await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/p` });
      const payload = '{ "id": 12345678901234567890, "f": 1.0, "e": "\\u00e9" }';
      const published = ok(await herald(['publish', '--tenant', 'globex', '--type', 'order.paid', '--payload', ` ${payload}\n`, '--json']));
      expect((await t.herald.store.getEvent(published.json.id as string))?.payload).to.equal(payload);
      const [received] = await sink.requests(1);
      expect(received?.body).to.equal(payload);
      const bad = await herald(['publish', '--tenant', 'globex', '--type', 'order.paid', '--payload', '{"n":01}']);
      expect(bad.code).to.not.equal(0);
      expect(bad.stderr).to.include('--payload: must be valid JSON');
    });
  });

  describe('publish --ordering-key and endpoints events', () => {
    it('stores the ordering key, and lists the endpoint\'s deliveries after a sequence number as a table, as JSON, with paging', async () => {
      answer = 200;
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/seq` });
      const before = t.attempts.length;
      const published = ok(await herald(['publish', '--tenant', 'globex', '--type', 'order.paid', '--payload', '{"n":1}', '--ordering-key', 'order-7', '--json']));
      expect(published.json.orderingKey).to.equal('order-7');
      await t.herald.publish([2, 3].map((n) => ({ tenantId: 'globex', type: 'order.paid', payload: { n } })));
      await attemptsSeen(t, before + 3);
      await t.herald.idle();

      const [json, page, rest, bad] = await Promise.all([
        herald(['endpoints', 'events', endpoint.id, '--json']),
        herald(['endpoints', 'events', endpoint.id, '--after', '0', '--limit', '2']),
        herald(['endpoints', 'events', endpoint.id, '--after', '3']),
        herald(['endpoints', 'events', endpoint.id, '--after', 'x']),
      ]);
      expect(ok(json).json.data.map((d: { sequence: number; status: string }) => [d.sequence, d.status])).to.deep.equal([[1, 'delivered'], [2, 'delivered'], [3, 'delivered']]);
      expect(json.json.nextAfter).to.equal(null);
      const lines = ok(page).stdout.trim().split('\n');
      expect(lines[0]).to.match(/^SEQ\s+EVENT\s+TYPE\s+STATUS/);
      expect(lines.slice(1, 3).map((l) => l.split(/\s+/)[0])).to.deep.equal(['1', '2']);
      expect(lines.at(-1)).to.equal('More: --after 2');
      expect(ok(rest).stdout).to.equal('Nothing numbered after 3.\n');
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.include('--after: must be a whole number');
    });
  });

  /** An endpoint at `path` whose three events are dead-lettered (the sink answers 404); the sink answers `answer` afterwards. */
  async function threeDeadLetters(path: string, concurrency?: number): Promise<{ endpoint: { id: string }; before: number }> {
    answer = 404;
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'initech', url: `${sink.url}/${path}`, ...(concurrency === undefined ? {} : { concurrency }) });
    const before = t.attempts.length;
    await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'initech', type: 'a.b', payload: { n } })));
    await attemptsSeen(t, before + 3);
    await t.herald.idle();
    return { endpoint, before };
  }

  describe('dlq', () => {
    it('lists, dry-runs, and replays in pages with progress on stderr', async () => {
      const { endpoint, before } = await threeDeadLetters('dlq');

      const [list, dry] = await Promise.all([
        herald(['dlq', 'list', '--endpoint', endpoint.id, '--json']),
        herald(['dlq', 'replay', '--endpoint', endpoint.id, '--dry-run', '--json']),
      ]);
      expect(ok(list).json).to.have.length(3);
      expect(ok(dry).json).to.include({ dryRun: true, matching: 3, more: false });
      expect((await t.herald.listDeadLetters({ endpointId: endpoint.id })).length).to.equal(3);

      answer = 200;
      const replay = ok(await herald(['dlq', 'replay', '--endpoint', endpoint.id, '--since', '1d', '--page-size', '2', '--json']));
      expect(replay.json.replayed).to.equal(3);
      expect(replay.json.skipped).to.deep.equal([]);
      expect(replay.stderr.trim().split('\n')).to.deep.equal(['2 dead letters replayed', '3 dead letters replayed']);
      await attemptsSeen(t, before + 6);
      await t.herald.idle();
      expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).map((d) => d.status)).to.deep.equal(['delivered', 'delivered', 'delivered']);

      const again = ok(await herald(['dlq', 'replay', '--endpoint', endpoint.id]));
      expect(again.stdout).to.equal('Replayed 0 dead letter(s).\n');
    });
  });

  describe('replays', () => {
    it('dry-runs, starts, shows, lists and cancels a paced replay job, and follows one to its end with --wait', async () => {
      // Concurrency 1: the job keeps at most 2 of its replays live on the endpoint at once.
      const { endpoint, before } = await threeDeadLetters('replays', 1);
      answer = 200;
      expect(ok(await herald(['replays', 'start', '--endpoint', endpoint.id, '--dry-run', '--json'])).json).to.deep.equal({ dryRun: true, wouldReplay: 3 });

      holding = true;
      const requestsBefore = sink.received.length;
      const started = ok(await herald(['replays', 'start', '--endpoint', endpoint.id, '--chunk-size', '1', '--json'])).json;
      expect(started).to.include({ state: 'running', total: 3, replayed: 2 });
      await sink.requests(requestsBefore + 1);
      const [list, show] = await Promise.all([herald(['replays', 'list', '--json']), herald(['replays', 'show', started.id])]);
      expect(ok(list).json.map((j: { id: string }) => j.id)).to.deep.equal([started.id]);
      expect(ok(show).stdout).to.include(started.id).and.include('running');
      expect(ok(await herald(['replays', 'cancel', started.id, '--json'])).json).to.include({ state: 'cancelled', replayed: 2 });
      holding = false;
      for (const held of sink.held.splice(0)) held.respond(200);
      await attemptsSeen(t, before + 5);
      await t.herald.idle();
      expect(ok(await herald(['replays', 'start', '--endpoint', endpoint.id, '--dry-run'])).stdout).to.equal('Dry run: would replay 1 dead letter(s).\n');

      // The job paces itself on the node's (manual) clock; the CLI polls on real time.
      const waiting = herald(['replays', 'start', '--endpoint', endpoint.id, '--chunk-size', '1', '--wait', '--json']);
      let exited = false;
      void waiting.finally(() => (exited = true));
      while (!exited) {
        t.clock.advance(250);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const followed = ok(await waiting);
      expect(followed.json).to.include({ state: 'done', total: 1, replayed: 1 });
      expect(followed.stderr).to.include('1/1 dead letters replayed');
      await attemptsSeen(t, before + 6);

      const bad = await herald(['replays', 'start']);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.include('at least one of --endpoint');
    });
  });

  describe('tokens', () => {
    it('creates a token printed once, lists it without the secret, revokes it (refused at once), and refuses bad usage', async () => {
      const created = ok(await herald(['tokens', 'create', '--tenant', 'acme', '--name', 'acme developers', '--expires', '90d']));
      const token = created.stdout.trim();
      expect(token).to.match(/^htk_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
      expect(created.stderr).to.include('shown only now');
      const id = token.slice(0, 'htk_'.length + 32);
      const record = await t.herald.store.getTenantToken(id);
      expect(record?.name).to.equal('acme developers');
      expect(record?.expiresAt).to.be.closeTo(Date.now() + 90 * 86_400_000, 60_000);

      const [list, listJson] = await Promise.all([herald(['tokens', 'list', '--tenant', 'acme']), herald(['tokens', 'list', '--tenant', 'acme', '--json'])]);
      expect(ok(list).stdout).to.include(id).and.include('acme developers').and.not.include(token);
      expect(ok(listJson).json.map((r: { id: string }) => r.id)).to.deep.equal([id]);

      // The token works as a bearer token for its tenant's data, until revoked.
      ok(await herald(['endpoints', 'list'], { HERALD_ADMIN_TOKEN: token }));
      expect(ok(await herald(['tokens', 'revoke', '--tenant', 'acme', id])).stdout).to.include(`Revoked ${id}`);
      const refused = await herald(['endpoints', 'list'], { HERALD_ADMIN_TOKEN: token });
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.include('GET /v1/endpoints: Authorization').and.include('check --token');

      const unknown = await herald(['tokens', 'revoke', '--tenant', 'acme', id]);
      expect(unknown.code).to.equal(1);
      expect(unknown.stderr).to.include(`tokenId: unknown token '${id}'`);
      const [noTenant, noId, badAction] = await Promise.all([
        herald(['tokens', 'list']),
        herald(['tokens', 'revoke', '--tenant', 'acme']),
        herald(['tokens', 'rotate', '--tenant', 'acme']),
      ]);
      for (const run of [noTenant, noId, badAction]) {
        expect(run.code, run.stderr).to.equal(2);
        expect(run.stderr).to.include('Usage: herald tokens');
      }
    });
  });

  describe('failures', () => {
    it('lists the groups as a table and as JSON, replays one group, and refuses bad usage', async () => {
      const { endpoint, before } = await threeDeadLetters('failures');
      const [listed, json, missingKind, kindOnList] = await Promise.all([
        herald(['failures', '--tenant', 'initech']),
        herald(['failures', '--endpoint', endpoint.id, '--json']),
        herald(['failures', 'replay', '--endpoint', endpoint.id]),
        herald(['failures', '--kind', 'http-404']),
      ]);
      const lines = ok(listed).stdout.trim().split('\n');
      expect(lines[0]).to.match(/^ENDPOINT\s+KIND\s+COUNT\s+RETRYING\s+DEAD\s+SINCE\s+LAST\s+SAMPLE$/);
      expect(lines).to.have.length(2);
      expect(lines[1]).to.include(endpoint.id).and.include('http-404').and.include('HTTP 404');
      expect(ok(json).json).to.have.length(1);
      expect((json.json as Array<{ kind: string; count: unknown }>)[0]).to.deep.include({ kind: 'http-404', count: { retrying: 0, dead: 3, total: 3 } });
      expect(missingKind.code).to.equal(2);
      expect(missingKind.stderr).to.include('failures replay: --endpoint and --kind are required').and.include('Usage: herald failures');
      expect(kindOnList.code).to.equal(2);
      expect(kindOnList.stderr).to.include('--kind belongs to failures replay');

      answer = 200;
      const replay = ok(await herald(['failures', 'replay', '--endpoint', endpoint.id, '--kind', 'http-404']));
      expect(replay.stdout).to.equal(`Replayed http-404 on ${endpoint.id}: 3 dead letter(s) replayed, 0 retrying delivery(ies) due now.\n`);
      await attemptsSeen(t, before + 6);
      await t.herald.idle();
      expect(ok(await herald(['failures'])).stdout).to.equal('No failures.\n');
      const badKind = await herald(['failures', 'replay', '--endpoint', endpoint.id, '--kind', 'boom']);
      expect(badKind.code).to.equal(1);
      expect(badKind.stderr).to.include('kind: must be a failure kind');
    });
  });

  describe('dlq ack, discard and list --state', () => {
    it('acknowledges and discards by id with a note and who, lists by state with age and triage, and a filter replay skips the discarded', async () => {
      const { endpoint } = await threeDeadLetters('triage');
      const [a, b, c] = (await t.herald.listDeadLetters({ endpointId: endpoint.id })).map((l) => l.id);

      const [acked, discarded, noBy, badState, withFilter, noteOnList, replayState] = await Promise.all([
        herald(['dlq', 'ack', a ?? '', b ?? '', '--note', 'consumer fixed; replay', '--by', 'alice']),
        herald(['dlq', 'discard', c ?? '', 'dl_missing', '--note', 'test traffic', '--by', 'bob']),
        herald(['dlq', 'discard', a ?? '', '--note', 'why']),
        herald(['dlq', 'list', '--state', 'open']),
        herald(['dlq', 'ack', a ?? '', '--note', 'n', '--by', 'b', '--endpoint', endpoint.id]),
        herald(['dlq', 'list', '--note', 'n']),
        herald(['dlq', 'replay', '--endpoint', endpoint.id, '--state', 'discarded']),
      ]);
      expect(ok(acked).stdout).to.equal(`Acknowledged ${a}, ${b}.\n`);
      expect(discarded.code).to.equal(1);
      expect(discarded.stdout).to.equal(`Discarded ${c}.\n`);
      expect(discarded.stderr).to.equal('herald: skipped dl_missing: no such dead letter\n');
      expect([noBy.code, badState.code, withFilter.code, noteOnList.code, replayState.code]).to.deep.equal([2, 2, 2, 2, 2]);
      expect(replayState.stderr).to.include('dlq replay: --state belongs to dlq list');
      expect(withFilter.stderr).to.include('dlq ack: --endpoint does not apply; name the dead letters by id');
      expect(noteOnList.stderr).to.include('dlq list: --note and --by belong to dlq ack and dlq discard');
      expect(noBy.stderr).to.include('--note (why) and --by (who) are required').and.include('Usage: herald dlq');
      expect(badState.stderr).to.include('--state: must be one of new, acknowledged, replayed, discarded (got "open")');

      const [listed, table, none, again] = await Promise.all([
        herald(['dlq', 'list', '--state', 'acknowledged', '--json']),
        herald(['dlq', 'list', '--include-replayed']),
        herald(['dlq', 'list', '--state', 'new']),
        herald(['dlq', 'discard', c ?? '', '--note', 'twice', '--by', 'bob', '--json']),
      ]);
      expect(ok(listed).json.map((l: { id: string }) => l.id).sort()).to.deep.equal([a, b].sort());
      expect(listed.json[0].triage).to.include({ state: 'acknowledged', note: 'consumer fixed; replay', by: 'alice' });
      expect(listed.json[0].ageMs).to.be.a('number');
      expect(ok(table).stdout).to.match(/^DIED\s+AGE\s+ID\s+STATE\s+BY\s+ENDPOINT/);
      expect(table.stdout).to.match(new RegExp(`(?:\\d+ ms|\\d+(?:\\.\\d)? s)\\s+${c}\\s+discarded\\s+bob\\s+`)).and.include('test traffic');
      expect(ok(none).stdout).to.equal('No dead letters match.\n');
      expect(again.code).to.equal(1);
      expect(again.stderr).to.equal(`herald: skipped ${c}: discarded already\n`);

      answer = 200;
      const replay = ok(await herald(['dlq', 'replay', '--endpoint', endpoint.id, '--json']));
      expect(replay.json.ids.sort()).to.deep.equal([a, b].sort());
      expect((await t.herald.getDeadLetter(c ?? '')).triage.state).to.equal('discarded');
    });
  });

  describe('errors', () => {
    it('exits 2 with the usage on bad arguments, and 1 with the API message on API errors', async () => {
      const [noFilter, badSince, badAction, badFlag, missing, wrongToken, unreachable, noToken] = await Promise.all([
        herald(['dlq', 'replay']),
        herald(['deliveries', '--since', 'yesterday']),
        herald(['endpoints', 'frobnicate']),
        herald(['status', '--verbose']),
        herald(['endpoints', 'show', 'ep_missing']),
        herald(['status'], { HERALD_ADMIN_TOKEN: 'wrong-token-0123456789' }),
        closedPort().then((port) => herald(['status', '--url', `http://127.0.0.1:${port}`])),
        herald(['status'], { HERALD_ADMIN_TOKEN: '' }),
      ]);
      expect([noFilter, badSince, badAction, badFlag, noToken].map((r) => r.code)).to.deep.equal([2, 2, 2, 2, 2]);
      expect(noFilter.stderr).to.include('at least one of --endpoint').and.include('Usage: herald dlq');
      expect(badSince.stderr).to.include('--since: must be a duration');
      expect(badAction.stderr).to.include("unknown action 'frobnicate'").and.include('Usage: herald endpoints');
      expect(badFlag.stderr).to.include('--verbose');
      expect(noToken.stderr).to.include('no admin token');
      expect([missing, wrongToken, unreachable].map((r) => r.code)).to.deep.equal([1, 1, 1]);
      expect(missing.stderr).to.equal("herald: GET /v1/endpoints/ep_missing: endpointId: unknown endpoint 'ep_missing'\n");
      expect(wrongToken.stderr).to.include('check --token');
      expect(unreachable.stderr).to.include('cannot reach').and.include('ECONNREFUSED');
      expect(missing.stdout + wrongToken.stdout).to.equal('');
    });
  });
});
