import { expect } from 'chai';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { banner, get, runHerald, type HeraldProcess } from '../support/herald-cli.ts';

const TOKEN = 'oversize-admin-token-0123456789';
const MB = 1024 * 1024;

interface Answer {
  readonly status: number;
  readonly json: any;
}

/**
 * POSTs `megabytes` MiB with `Connection: close` (node:http without an agent), as curl and many
 * clients do, as fast as the socket takes it: the client is still sending when the answer comes.
 * With a declared length, or streamed (chunked) when `declared` is false.
 */
function postHuge(base: string, megabytes: number, declared: boolean): Promise<Answer> {
  const url = new URL('/v1/events', base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          ...(declared ? { 'content-length': megabytes * MB + 43 } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    const chunk = Buffer.alloc(MB, 0x20);
    // The headers leave with a first small write; then the body, 1 MiB at a time.
    req.write('{"tenantId":"acme","type":"a.b","payload":"');
    let sent = 0;
    const write = (): void => {
      while (sent < megabytes && !req.destroyed) {
        sent += 1;
        if (!req.write(chunk)) {
          req.once('drain', write);
          return;
        }
      }
      if (!req.destroyed) req.end();
    };
    write();
  });
}

describe('herald start with a request body over api.maxRequestBytes (16 MiB)', function () {
  this.timeout(60_000);
  let dir = '';
  let herald: HeraldProcess | undefined;
  let base = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-oversize-'));
    herald = runHerald(['start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${join(dir, 'h.db')}`, '--log-level', 'silent'], {
      HERALD_ADMIN_TOKEN: TOKEN,
    });
    base = (await banner(herald)).url;
  });

  after(async () => {
    if (herald !== undefined && herald.child.exitCode === null) {
      herald.child.kill('SIGKILL');
      await once(herald.child, 'close');
    }
    rmSync(dir, { recursive: true, force: true });
  });

  for (const declared of [true, false]) {
    it(`answers 413 naming the limit to a client still sending 100 MB ${declared ? 'with a declared length' : 'streamed'} with Connection: close, and keeps serving`, async () => {
      const answer = await postHuge(base, 100, declared);
      expect(answer.status).to.equal(413);
      expect(answer.json.error).to.include({ code: 'HERALD_PAYLOAD_TOO_LARGE', field: 'body' });
      expect(answer.json.error.message).to.contain('api.maxRequestBytes');
      expect((await get(`${base}/healthz`)).status).to.equal(200);
    });
  }
});
