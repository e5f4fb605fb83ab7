import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { StoreError } from '../../lib/errors.ts';
import type { Store } from '../../lib/store/port.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { LOOPBACK, nextEvent, startServer, type TestServer } from '../support/harness.ts';

describe('Store failures (engine)', () => {
  let dir: string;
  let herald: Herald | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    await herald?.close();
    herald = undefined;
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  context('when the store fails to record an attempt', () => {
    it('keeps the result and writes it at a later pump, without sending the request again', async () => {
      dir = mkdtempSync(join(tmpdir(), 'herald-storefail-'));
      const clock = new ManualClock(Date.now());
      const real = new SqliteStore({ path: join(dir, 'h.db'), clock });
      let failSettles = true;
      const store = new Proxy(real, {
        get(target, key, receiver) {
          if (key === 'settle' && failSettles) return async () => Promise.reject(new StoreError('disk full'));
          const value = Reflect.get(target, key, receiver) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }) as Store;
      const config = resolveConfig({ store: `sqlite:${join(dir, 'h.db')}`, dataDir: dir, allowNetworks: [...LOOPBACK], logLevel: 'silent' });
      herald = await Herald.open(config, { clock, random: seededRandom(1), store });
      await herald.start();
      sink = await startServer(() => ({ status: 200 }));
      await herald.createEndpoint({ tenantId: 'acme', url: sink.url });

      const failed = nextEvent(herald.events, 'failure', (e) => e.where.startsWith('settle'));
      await herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await failed;
      expect((await herald.listDeliveries({}))[0]?.status).to.equal('in_flight');

      failSettles = false;
      const attempt = nextEvent(herald.events, 'attempt');
      clock.advance(config.engine.sweepIntervalMs);
      expect((await attempt).settlement.kind).to.equal('delivered');
      expect((await herald.listDeliveries({}))[0]?.status).to.equal('delivered');
      expect(sink.received).to.have.length(1);
    });
  });
});
