import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { generateSecret } from '../../lib/signing/secret.ts';
import { keyIdOf, SecretBox } from '../../lib/signing/secret-box.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { runHerald } from '../support/herald-cli.ts';

describe('herald secrets (CLI)', () => {
  let dir: string;
  const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-secrets-cli-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A Herald on this folder's database with `key`, for preparing and checking rows. */
  async function withHerald<T>(key: Buffer, run: (herald: Herald) => Promise<T>): Promise<T> {
    const config = resolveConfig({ store: `sqlite:${join(dir, 'h.db')}`, dataDir: dir, logLevel: 'silent', secrets: { key: key.toString('base64') } });
    const herald = await Herald.open(config, { clock: systemClock });
    try {
      return await run(herald);
    } finally {
      await herald.close();
    }
  }

  async function reencrypt(env: Record<string, string>) {
    const proc = runHerald(['secrets', 'reencrypt', '--store', `sqlite:${join(dir, 'h.db')}`, '--data-dir', dir], env);
    const exit = await proc.exited;
    return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
  }

  context('with the new key current and the old one previous', () => {
    it('rewrites every secret under the new key, shows progress, and exits 0', async () => {
      const ids = await withHerald(oldKey, async (herald) => [
        (await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/a' })).endpoint.id,
        (await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/b' })).endpoint.id,
      ]);
      const run = await reencrypt({ HERALD_SECRET_KEY: newKey.toString('base64'), HERALD_SECRET_KEYS_PREVIOUS: oldKey.toString('hex') });
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stdout).to.include(`under key ${keyIdOf(newKey)}`).and.include('2 endpoints checked, 2 rewritten, 0 unreadable');
      expect(run.stderr).to.include('2/2 endpoints checked');
      // The old key is no longer needed: a Herald with only the new one opens every secret.
      await withHerald(newKey, async (herald) => {
        for (const id of ids) {
          const stored = (await herald.store.getEndpoint(id))?.secrets[0]?.secret ?? '';
          expect(stored.startsWith(`enc:v1:${keyIdOf(newKey)}:`), stored.slice(0, 20)).to.equal(true);
          expect(herald.secretKeys.box.open(stored, id)).to.match(/^whsec_/);
        }
      });
    });
  });

  context('when an endpoint is sealed under a key not given', () => {
    it('lists it with its key id and exits 1, rewriting the others', async () => {
      await withHerald(newKey, async (herald) => {
        await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/a' });
        const { endpoint } = await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/b' });
        const sealed = new SecretBox(oldKey).seal(generateSecret(), endpoint.id);
        await herald.store.updateEndpoint(endpoint.id, { secrets: [{ secret: sealed, createdAt: 0, expiresAt: null }] }, 1);
      });
      const run = await reencrypt({ HERALD_SECRET_KEY: newKey.toString('base64') });
      expect(run.code).to.equal(1);
      expect(run.stdout).to.include('2 endpoints checked, 0 rewritten, 1 unreadable');
      expect(run.stderr).to.include(`(key ${keyIdOf(oldKey)})`).and.include('HERALD_SECRET_KEYS_PREVIOUS');
    });
  });

  context('on a PostgreSQL store without a key', () => {
    it('warns that secrets are stored plain and exits 1: there is no key to seal under', async () => {
      const url = await createTestDatabase();
      const proc = runHerald(['secrets', 'reencrypt', '--store', url, '--data-dir', dir]);
      expect((await proc.exited).code).to.equal(1);
      expect(proc.stderr).to.include('warning: endpoint secrets are stored plain').and.include('no secret key is configured');
    });
  });

  context('when the subcommand is missing', () => {
    it('exits 2 with the usage', async () => {
      const proc = runHerald(['secrets']);
      expect((await proc.exited).code).to.equal(2);
      expect(proc.stderr).to.include('missing subcommand').and.include('herald secrets reencrypt');
    });
  });
});
