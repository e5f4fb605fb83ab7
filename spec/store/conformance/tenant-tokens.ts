/**
 * Tenant tokens: kept as given, found by id, listed and deleted per tenant; an id is never
 * stored twice.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode } from '../../../lib/errors.ts';
import type { TenantToken } from '../../../lib/model.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, DAY, rejection, type ConformanceSuite } from './fixtures.ts';

export function describeTenantTokens(suite: ConformanceSuite): void {
  describe('tenant tokens', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    function token(id: string, tenantId: string, overrides: Partial<TenantToken> = {}): TenantToken {
      return { id, tenantId, name: `token ${id}`, secretHash: 'ab'.repeat(32), createdAt: clock.now(), expiresAt: null, ...overrides };
    }

    it('keeps a token as given and finds it by id, whatever its tenant', async () => {
      const expiring = token('htk_1', 'acme', { expiresAt: clock.now() + DAY, name: 'ci — déploiement' });
      await store.createTenantToken(expiring);
      await store.createTenantToken(token('htk_2', 'globex'));
      expect(await store.getTenantToken('htk_1')).to.deep.equal(expiring);
      expect((await store.getTenantToken('htk_2'))?.tenantId).to.equal('globex');
      expect(await store.getTenantToken('htk_unknown')).to.equal(undefined);
    });

    it('refuses a second token with the same id with HERALD_CONFLICT, keeping the first', async () => {
      await store.createTenantToken(token('htk_1', 'acme'));
      const error = await rejection(store.createTenantToken(token('htk_1', 'globex', { secretHash: 'cd'.repeat(32) })));
      expect(error.code).to.equal(ErrorCode.CONFLICT);
      expect((await store.getTenantToken('htk_1'))?.tenantId).to.equal('acme');
    });

    it("lists a tenant's tokens only, oldest first, ties by id", async () => {
      await store.createTenantToken(token('htk_b', 'acme'));
      await store.createTenantToken(token('htk_a', 'acme'));
      await store.createTenantToken(token('htk_other', 'globex'));
      clock.advance(SECOND);
      await store.createTenantToken(token('htk_0', 'acme'));
      expect((await store.listTenantTokens('acme')).map((t) => t.id)).to.deep.equal(['htk_a', 'htk_b', 'htk_0']);
      expect((await store.listTenantTokens('globex')).map((t) => t.id)).to.deep.equal(['htk_other']);
      expect(await store.listTenantTokens('initech')).to.deep.equal([]);
    });

    it("deletes a token only for its own tenant: another tenant's id is left alone and answers false", async () => {
      await store.createTenantToken(token('htk_1', 'acme'));
      await store.createTenantToken(token('htk_2', 'globex'));
      expect(await store.deleteTenantToken('acme', 'htk_2')).to.equal(false);
      expect(await store.getTenantToken('htk_2')).to.not.equal(undefined);
      expect(await store.deleteTenantToken('acme', 'htk_1')).to.equal(true);
      expect(await store.getTenantToken('htk_1')).to.equal(undefined);
      expect(await store.deleteTenantToken('acme', 'htk_1'), 'deleted already').to.equal(false);
      expect((await store.listTenantTokens('acme'))).to.deep.equal([]);
    });
  });
}
