import { expect } from 'chai';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { banner, get, runHerald, type HeraldProcess } from '../support/herald-cli.ts';

const CONFIGURED_TOKEN = 'configured-admin-token-0123456789';

describe('herald (CLI)', () => {
  let dir: string;
  let running: HeraldProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-cli-'));
  });

  afterEach(async () => {
    for (const proc of running) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
    }
    running = [];
    rmSync(dir, { recursive: true, force: true });
  });

  function start(extra: readonly string[] = [], env: Readonly<Record<string, string>> = {}): HeraldProcess {
    const proc = runHerald(
      ['start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${join(dir, 'h.db')}`, '--log-level', 'silent', ...extra],
      env,
    );
    running.push(proc);
    return proc;
  }

  describe('start', () => {
    context('when started on port 0 without a configured token', () => {
      it('prints the real URL and a generated admin token, serves /healthz, and exits 0 on SIGTERM', async () => {
        const proc = start();
        const { url, port, tokenLine } = await banner(proc);
        expect(port).to.be.greaterThan(0);
        const [, token] = /^Admin token: (\S+)/.exec(tokenLine) ?? [];
        expect(token, proc.stdout).to.be.a('string').with.length.of.at.least(16);
        expect(tokenLine).to.include(join(dir, 'admin-token'));
        expect(readFileSync(join(dir, 'admin-token'), 'utf8').trim()).to.equal(token);
        // A SQLite store without a configured secret key: one is generated beside the data.
        expect(proc.stdout).to.match(/^Secret key: [0-9a-f]{8} from /m);
        expect(proc.stdout).to.include(`from ${join(dir, 'secret-key')}  (generated now: back it up with the database)`);
        expect(statSync(join(dir, 'secret-key')).mode & 0o777).to.equal(0o600);

        expect((await get(`${url}/healthz`)).status).to.equal(200);
        expect((await get(`${url}/v1/status`)).status).to.equal(401);
        const status = await get(`${url}/v1/status`, token);
        expect(status.status).to.equal(200);
        expect(JSON.parse(status.body).slotsOwned).to.be.greaterThan(0);

        proc.child.kill('SIGTERM');
        expect(await proc.exited).to.deep.equal({ code: 0, signal: null });
        expect(proc.stderr).to.equal('');
      });

      it('reuses the kept token on the next start', async () => {
        const first = start();
        await banner(first);
        const token = readFileSync(join(dir, 'admin-token'), 'utf8').trim();
        first.child.kill('SIGTERM');
        expect((await first.exited).code).to.equal(0);

        const second = start();
        const { url, tokenLine } = await banner(second);
        expect(tokenLine).to.include(token);
        expect((await get(`${url}/v1/status`, token)).status).to.equal(200);
        second.child.kill('SIGINT');
        const exit = await second.exited;
        expect(exit, `${second.stdout}\n${second.stderr}`).to.deep.equal({ code: 0, signal: null });
      });
    });

    context('when HERALD_ADMIN_TOKEN is set', () => {
      it('does not print it, writes no token file, and the API accepts it', async () => {
        const proc = start([], { HERALD_ADMIN_TOKEN: CONFIGURED_TOKEN });
        const { url, tokenLine } = await banner(proc);
        expect(proc.stdout).to.not.include(CONFIGURED_TOKEN);
        expect(tokenLine).to.match(/HERALD_ADMIN_TOKEN/);
        expect(existsSync(join(dir, 'admin-token'))).to.equal(false);
        expect((await get(`${url}/v1/status`, CONFIGURED_TOKEN)).status).to.equal(200);
        expect((await get(`${url}/v1/status`, 'some-other-token-0123456789')).status).to.equal(401);
        proc.child.kill('SIGTERM');
        expect((await proc.exited).code).to.equal(0);
      });
    });

    context('when the port is not a number', () => {
      it('exits 1 and names the key and the rule on stderr', async () => {
        const proc = runHerald(['start', '--port', 'abc', '--data-dir', dir, '--store', `sqlite:${join(dir, 'h.db')}`]);
        running.push(proc);
        expect((await proc.exited).code).to.equal(1);
        expect(proc.stderr).to.include('port="abc"').and.include('must be an integer from 0 to 65535');
        expect(proc.stdout).to.equal('');
      });
    });

    context('when HERALD_PORT is out of range', () => {
      it('exits 1 and names the key, the value and the rule on stderr', async () => {
        const proc = runHerald(['start', '--data-dir', dir, '--store', `sqlite:${join(dir, 'h.db')}`], { HERALD_PORT: '70000' });
        running.push(proc);
        expect((await proc.exited).code).to.equal(1);
        expect(proc.stderr).to.include('port=70000').and.include('must be an integer from 0 to 65535');
      });
    });

    context('when the port is already in use', () => {
      it('exits 1 naming the port and the reason on stderr', async () => {
        const occupier = createServer();
        occupier.listen(0, '127.0.0.1');
        await once(occupier, 'listening');
        const { port } = occupier.address() as AddressInfo;
        try {
          const proc = start(['--port', String(port)]);
          expect((await proc.exited).code).to.equal(1);
          expect(proc.stderr).to.include(`port=${port}`).and.include('EADDRINUSE');
          expect(proc.stdout).to.equal('');
        } finally {
          await new Promise<void>((resolve) => occupier.close(() => resolve()));
        }
      });
    });

    context('when a flag is unknown', () => {
      it('exits 2 with the usage', async () => {
        const proc = runHerald(['start', '--prot', '8080']);
        running.push(proc);
        expect((await proc.exited).code).to.equal(2);
        expect(proc.stderr).to.include('--prot').and.include('Usage: herald start');
      });
    });
  });

  context('when the command is unknown', () => {
    it('exits 2 with the usage', async () => {
      const proc = runHerald(['launch']);
      running.push(proc);
      expect((await proc.exited).code).to.equal(2);
      expect(proc.stderr).to.include("unknown command 'launch'").and.include('Usage: herald start');
    });
  });

  context('when asked for help', () => {
    it('prints the usage and exits 0', async () => {
      const proc = runHerald(['--help']);
      running.push(proc);
      expect((await proc.exited).code).to.equal(0);
      expect(proc.stdout).to.include('Usage: herald start');
    });
  });
});
