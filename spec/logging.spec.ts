import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import type { EngineEvents } from '../lib/engine/engine-events.ts';
import { createLogger, logEngineEvents, scrubText } from '../lib/logging.ts';
import { generateSecret } from '../lib/signing/secret.ts';

function memory(isTTY = false): { stream: Writable & { isTTY?: boolean }; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      done();
    },
  }) as Writable & { isTTY?: boolean };
  stream.isTTY = isTTY;
  return { stream, lines };
}

describe('Logging', () => {
  const secret = generateSecret();
  const signature = `v1,${Buffer.alloc(32, 7).toString('base64')}`;

  context('when secrets, signatures and tokens reach the logger', () => {
    it('never writes them, in fields, messages or errors, and keeps the scoped fields', () => {
      const { stream, lines } = memory();
      const logger = createLogger('trace', { format: 'json', destination: stream });
      logger.info(
        {
          endpointId: 'ep_1',
          secret,
          endpoint: { id: 'ep_1', secrets: [{ secret }] },
          headers: { 'webhook-signature': signature, authorization: 'Bearer admin-token-123456789' },
        },
        `signed with ${secret} as ${signature} for https://hooks.example/x?token=abc123`,
      );
      logger.error({ err: new Error(`verification of ${signature} with ${secret} failed`) }, 'oops');

      const events = new EventEmitter<EngineEvents>();
      logEngineEvents({ events }, logger);
      events.emit('failure', { where: 'sign', error: new Error(`bad key ${secret}`) });
      events.emit('operational', { type: 'endpoint.failing', endpointId: 'ep_1', tenantId: 'acme', at: 1, windowMs: 3_600_000, detail: `last: Bearer ${secret}` });

      const text = lines.join('\n');
      expect(lines).to.have.length(4);
      expect(text).to.not.include(secret.slice('whsec_'.length));
      expect(text).to.not.include(signature.slice(3));
      expect(text).to.not.include('admin-token-123456789');
      expect(text).to.not.include('abc123');
      const [first, , failure, operational] = lines.map((l) => JSON.parse(l));
      expect(first).to.include({ endpointId: 'ep_1', secret: '[redacted]' });
      expect(first.msg).to.include('https://hooks.example/x?[redacted]');
      expect(failure).to.include({ component: 'engine', where: 'sign' });
      expect(operational).to.include({ endpointId: 'ep_1', tenantId: 'acme', windowMs: 3_600_000, operational: 'endpoint.failing', level: 40 });
    });
  });

  context('when the node\'s clock crosses a second off the store\'s, and comes back', () => {
    it('warns once each way, with the offset', () => {
      const { stream, lines } = memory();
      const events = new EventEmitter<EngineEvents>();
      logEngineEvents({ events }, createLogger('info', { format: 'json', destination: stream }));
      events.emit('clockSkew', { offsetMs: -30_012.4, skewed: true, thresholdMs: 1_000 });
      events.emit('clockSkew', { offsetMs: 250, skewed: false, thresholdMs: 1_000 });
      const [over, back] = lines.map((l) => JSON.parse(l));
      expect(lines).to.have.length(2);
      expect(over).to.include({ level: 40, component: 'engine', clockOffsetMs: -30_012, thresholdMs: 1_000 });
      expect(over.msg).to.include('30 s ahead of the store\'s');
      expect(back).to.include({ level: 40, clockOffsetMs: 250 });
      expect(back.msg).to.equal('this node\'s clock is back within 1 s of the store\'s (250 ms behind)');
    });
  });

  describe('scrubText', () => {
    it('censors whsec_ secrets, v1 signatures, bearer tokens and URL queries', () => {
      expect(scrubText(`a ${secret} b`)).to.equal('a whsec_[redacted] b');
      expect(scrubText(`sig ${signature}`)).to.equal('sig v1,[redacted]');
      expect(scrubText('Authorization: Bearer abc.def')).to.equal('Authorization: Bearer [redacted]');
      expect(scrubText('GET http://x.test/a?k=v#f')).to.equal('GET http://x.test/a?[redacted]#f');
      expect(scrubText('HTTP 503 from http://x.test/a')).to.equal('HTTP 503 from http://x.test/a');
    });
  });

  context('when the format is pretty or auto on a terminal', () => {
    it('writes one readable line per record; JSON lines otherwise', () => {
      const tty = memory(true);
      createLogger('info', { destination: tty.stream }).warn({ endpointId: 'ep_1', attempt: 2 }, 'breaker open');
      expect(tty.lines).to.have.length(1);
      expect(tty.lines[0]).to.match(/^\d\d:\d\d:\d\d\.\d{3} WARN  breaker open {2}endpointId=ep_1 attempt=2$/);
      const pipe = memory(false);
      createLogger('info', { destination: pipe.stream }).warn({ endpointId: 'ep_1' }, 'breaker open');
      expect(JSON.parse(pipe.lines[0] ?? '')).to.include({ msg: 'breaker open', endpointId: 'ep_1', service: 'herald' });
    });
  });
});
