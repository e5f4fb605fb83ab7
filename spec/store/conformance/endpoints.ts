/**
 * Endpoints: created, read, updated, deleted and listed; the numbered log of endpoint changes
 * other nodes catch up from; an endpoint's waiting deliveries resumed when it is re-enabled.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode, type HeraldError } from '../../../lib/errors.ts';
import type { Endpoint, PayloadFilter } from '../../../lib/model.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, MINUTE, HOUR, DAY, OK, makeEndpoint, attempt, rejection, type ConformanceSuite } from './fixtures.ts';

export function describeEndpoints(suite: ConformanceSuite): void {
  const { addEndpoint, seed, claimedDelivery } = suite;
  describe('endpoints', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when an endpoint is created', () => {
      it('reads it back exactly, nulls and JSON fields included', async () => {
        const created = await addEndpoint('ep_1', 'acme', {
          retry: { schedule: ['PT1M', 'PT5M'] },
          mode: 'at-most-once', ordering: 'none',
          secrets: [
            { secret: 'whsec_bmV3', createdAt: clock.now(), expiresAt: null },
            { secret: 'whsec_b2xk', createdAt: clock.now() - DAY, expiresAt: clock.now() + DAY },
          ],
        });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(created);
      });

      it('keeps an ed25519 key\'s public key beside its secret, on create and on patch, and reads an older secret without one', async () => {
        const ed25519 = { secret: 'enc:v1:0badc0de:bm9uY2U=:c2VhbGVk', createdAt: clock.now(), expiresAt: null, publicKey: 'whpk_cHVibGlj' };
        const hmac = { secret: 'whsec_b2xk', createdAt: clock.now() - DAY, expiresAt: clock.now() + DAY };
        const created = await addEndpoint('ep_1', 'acme', { secrets: [ed25519, hmac] });
        const read = await store.getEndpoint('ep_1');
        expect(read).to.deep.equal(created);
        expect(read?.secrets[1]).to.not.have.property('publicKey');
        const back = [{ ...hmac, createdAt: clock.now(), expiresAt: null }, { ...ed25519, expiresAt: clock.now() + DAY }];
        const patched = await store.updateEndpoint('ep_1', { secrets: back, expectedSecrets: [ed25519.secret, hmac.secret] }, clock.now());
        expect(patched?.secrets).to.deep.equal(back);
        expect((await store.getEndpoint('ep_1'))?.secrets).to.deep.equal(back);
        expect((await store.listEndpoints({}))[0]?.secrets).to.deep.equal(back);
      });

      it('keeps every form of retry policy whole, jitter included, on create and on patch', async () => {
        const formula = { initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9, window: 'P2D', jitter: 'full' } as const;
        const decorrelated = { initial: 'PT10S', max: 'PT1H', window: 'P1D', jitter: 'decorrelated' } as const;
        const created = await addEndpoint('ep_1', 'acme', { retry: formula });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(created);
        for (const retry of [decorrelated, { preset: 'relaxed', jitter: 'equal' }, { schedule: ['PT1M'], jitter: '±20%' }] as const) {
          const patched = await store.updateEndpoint('ep_1', { retry }, clock.now());
          expect(patched?.retry).to.deep.equal(retry);
          expect((await store.getEndpoint('ep_1'))?.retry).to.deep.equal(retry);
        }
      });

      it('writes a patch with expectedSecrets only while the stored secrets are those (HERALD_CONFLICT otherwise, nothing written)', async () => {
        const created = await addEndpoint('ep_1');
        const read = created.secrets.map((s) => s.secret);
        const rotated = [{ secret: 'whsec_bmV3', createdAt: clock.now(), expiresAt: null }];
        const first = await store.updateEndpoint('ep_1', { secrets: rotated, expectedSecrets: read }, clock.now());
        expect(first).to.deep.equal({ ...created, secrets: rotated });
        const stale = await rejection(
          store.updateEndpoint('ep_1', { secrets: [{ secret: 'whsec_c3RhbGU=', createdAt: 0, expiresAt: null }], url: 'https://moved.example/', expectedSecrets: read }, clock.now()),
        );
        expect(stale.code).to.equal(ErrorCode.CONFLICT);
        expect(stale.message).to.include('ep_1');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(first);
        expect(await store.updateEndpoint('ep_missing', { secrets: rotated, expectedSecrets: [] }, clock.now())).to.equal(undefined);
      });

      it('refuses a second endpoint with the same id (HERALD_CONFLICT)', async () => {
        await addEndpoint('ep_1');
        const error = await rejection(store.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now())));
        expect(error.code).to.equal(ErrorCode.CONFLICT);
      });

      it('makes its tenant exist', async () => {
        expect(await store.tenantExists('acme')).to.equal(false);
        await addEndpoint('ep_1', 'acme');
        expect(await store.tenantExists('acme')).to.equal(true);
        expect(await store.tenantExists('globex')).to.equal(false);
      });
    });

    context('when an endpoint has a rate limit', () => {
      it('reads it back exactly, and one without a limit has no rateLimit', async () => {
        const limited = await addEndpoint('ep_1', 'acme', { rateLimit: { perSecond: 0.25, burst: 3 } });
        const unlimited = await addEndpoint('ep_2', 'acme');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(limited);
        expect(await store.getEndpoint('ep_2')).to.deep.equal(unlimited);
        expect(await store.getEndpoint('ep_2')).to.not.have.property('rateLimit');
        expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([limited, unlimited]);
      });

      it('sets, changes and lifts it by patch (null), leaving the other fields alone', async () => {
        const created = await addEndpoint('ep_1', 'acme');
        const set = await store.updateEndpoint('ep_1', { rateLimit: { perSecond: 10, burst: 10 } }, clock.now());
        expect(set).to.deep.equal({ ...created, rateLimit: { perSecond: 10, burst: 10 } });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
        const changed = await store.updateEndpoint('ep_1', { rateLimit: { perSecond: 10_000, burst: 1 }, concurrency: 2 }, clock.now());
        expect(await store.getEndpoint('ep_1')).to.deep.equal(changed);
        expect(changed?.rateLimit).to.deep.equal({ perSecond: 10_000, burst: 1 });
        const kept = await store.updateEndpoint('ep_1', { url: 'https://hooks.example.com/moved' }, clock.now());
        expect(kept?.rateLimit, 'a patch without rateLimit keeps it').to.deep.equal({ perSecond: 10_000, burst: 1 });
        const lifted = await store.updateEndpoint('ep_1', { rateLimit: null }, clock.now());
        expect(lifted).to.deep.equal({ ...created, url: 'https://hooks.example.com/moved', concurrency: 2 });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(lifted);
        expect(await store.getEndpoint('ep_1')).to.not.have.property('rateLimit');
      });
    });

    context('when an endpoint has adaptive concurrency', () => {
      it('reads it back exactly, and a fixed one has no adaptiveConcurrency', async () => {
        const adaptive = await addEndpoint('ep_1', 'acme', { concurrency: 64, adaptiveConcurrency: { initial: 2, targetLatencyMs: 750 } });
        const fixed = await addEndpoint('ep_2', 'acme');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(adaptive);
        expect(await store.getEndpoint('ep_2')).to.not.have.property('adaptiveConcurrency');
        expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([adaptive, fixed]);
      });

      it('sets, changes and removes it by patch (null), leaving the other fields alone', async () => {
        const created = await addEndpoint('ep_1', 'acme', { rateLimit: { perSecond: 5, burst: 5 } });
        const set = await store.updateEndpoint('ep_1', { adaptiveConcurrency: { initial: 1, targetLatencyMs: 2_000 } }, clock.now());
        expect(set).to.deep.equal({ ...created, adaptiveConcurrency: { initial: 1, targetLatencyMs: 2_000 } });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
        const kept = await store.updateEndpoint('ep_1', { concurrency: 9, rateLimit: null }, clock.now());
        expect(kept?.adaptiveConcurrency, 'a patch without adaptiveConcurrency keeps it').to.deep.equal({ initial: 1, targetLatencyMs: 2_000 });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(kept);
        const fixed = await store.updateEndpoint('ep_1', { adaptiveConcurrency: null }, clock.now());
        const { rateLimit: _, ...unlimited } = created;
        expect(fixed).to.deep.equal({ ...unlimited, concurrency: 9 });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(fixed);
      });
    });

    context('when an endpoint has custom headers and auth', () => {
      const headers = [
        { name: 'X-Team', value: 'payments', secret: false },
        { name: 'X-Api-Key', value: 'enc:v1:0a1b2c3d:bm9uY2U=:c2VhbGVk', secret: true },
      ];
      const oauth = { type: 'oauth2', tokenUrl: 'https://auth.example/token', clientId: 'c1', clientSecret: 'enc:v1:0a1b2c3d:bg==:cw==', scope: 'hooks' } as const;

      it('reads them back exactly, in order, and an endpoint without them has neither', async () => {
        const withThem = await addEndpoint('ep_1', 'acme', { headers, auth: oauth });
        const basic = await addEndpoint('ep_2', 'acme', { auth: { type: 'basic', username: 'u', password: 'enc:v1:0a1b2c3d:bg==:cA==' } });
        const plain = await addEndpoint('ep_3', 'acme');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(withThem);
        expect(await store.getEndpoint('ep_2')).to.deep.equal(basic);
        expect(await store.getEndpoint('ep_3')).to.not.have.any.keys('headers', 'auth');
        expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([withThem, basic, plain]);
      });

      it('sets, replaces and removes them by patch (null), leaving the other fields alone', async () => {
        const created = await addEndpoint('ep_1', 'acme');
        const set = await store.updateEndpoint('ep_1', { headers, auth: { type: 'bearer', token: 'enc:v1:0a1b2c3d:bg==:dA==' } }, clock.now());
        expect(set).to.deep.equal({ ...created, headers, auth: { type: 'bearer', token: 'enc:v1:0a1b2c3d:bg==:dA==' } });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
        const kept = await store.updateEndpoint('ep_1', { concurrency: 9, auth: oauth }, clock.now());
        expect(kept?.headers, 'a patch without headers keeps them').to.deep.equal(headers);
        expect(await store.getEndpoint('ep_1')).to.deep.equal(kept);
        const removed = await store.updateEndpoint('ep_1', { headers: null, auth: null }, clock.now());
        expect(removed).to.deep.equal({ ...created, concurrency: 9 });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(removed);
      });

      it('writes a patch with expectedCredentials only while the stored headers and auth are those (HERALD_CONFLICT otherwise)', async () => {
        await addEndpoint('ep_1', 'acme', { headers, auth: oauth });
        const resealed = headers.map((h) => (h.secret ? { ...h, value: 'enc:v1:99999999:bg==:bmV3' } : h));
        const first = await store.updateEndpoint('ep_1', { headers: resealed, expectedCredentials: { headers, auth: oauth } }, clock.now());
        expect(first?.headers).to.deep.equal(resealed);
        const stale = await rejection(store.updateEndpoint('ep_1', { headers, auth: null, expectedCredentials: { headers, auth: oauth } }, clock.now()));
        expect(stale.code).to.equal(ErrorCode.CONFLICT);
        expect(await store.getEndpoint('ep_1')).to.deep.equal(first);
        await addEndpoint('ep_2', 'acme');
        const none = await store.updateEndpoint('ep_2', { auth: oauth, expectedCredentials: { headers: null, auth: null } }, clock.now());
        expect(none?.auth).to.deep.equal(oauth);
      });
    });

    context('when an endpoint has a payload filter', () => {
      // Dotted keys, `$` operators, nesting, a literal object and unicode: all kept as given, key order included.
      const filter: PayloadFilter = {
        'payload.amount': { $gte: 100, $lt: 1e6 },
        type: { $in: ['order.paid', 'order.refunded'] },
        $or: [{ 'payload.country': 'BR' }, { 'payload.meta': { $eq: { tier: 'gold', 'a.b': [1, null, 'ç'] } } }],
        'payload.items.0.sku': { $exists: true },
      };

      it('reads it back exactly, keys in order, and one without a filter has no filter', async () => {
        const filtered = await addEndpoint('ep_1', 'acme', { filter });
        const plain = await addEndpoint('ep_2', 'acme');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(filtered);
        expect(Object.keys((await store.getEndpoint('ep_1'))?.filter ?? {})).to.deep.equal(Object.keys(filter));
        expect(await store.getEndpoint('ep_2')).to.not.have.property('filter');
        expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([filtered, plain]);
      });

      it('sets, replaces and removes it by patch (null), leaving the other fields alone', async () => {
        const created = await addEndpoint('ep_1', 'acme');
        const set = await store.updateEndpoint('ep_1', { filter }, clock.now());
        expect(set).to.deep.equal({ ...created, filter });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(set);
        const kept = await store.updateEndpoint('ep_1', { concurrency: 3 }, clock.now());
        expect(kept?.filter, 'a patch without filter keeps it').to.deep.equal(filter);
        const replaced = await store.updateEndpoint('ep_1', { filter: { 'payload.x': 1 } }, clock.now());
        expect(await store.getEndpoint('ep_1')).to.deep.equal(replaced);
        expect(replaced?.filter).to.deep.equal({ 'payload.x': 1 });
        const removed = await store.updateEndpoint('ep_1', { filter: null }, clock.now());
        expect(removed).to.deep.equal({ ...created, concurrency: 3 });
        expect(await store.getEndpoint('ep_1')).to.not.have.property('filter');
      });
    });

    context('when an endpoint has a client certificate', () => {
      const tls = (key: string): NonNullable<Endpoint['clientTls']> => ({
        cert: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
        key,
        passphrase: key === 'enc:v1:aaaaaaaa:k2' ? 'enc:v1:aaaaaaaa:p2' : null,
        subject: 'CN=herald-client\nO=Herald Tests',
        issuer: 'CN=Herald Test CA',
        fingerprint: 'AB:CD:EF',
        notAfter: clock.now() + 365 * DAY,
      });

      it('reads it back exactly, and one without has no clientTls', async () => {
        const withCert = await addEndpoint('ep_1', 'acme', { clientTls: tls('enc:v1:aaaaaaaa:k1') });
        const without = await addEndpoint('ep_2', 'acme');
        expect(await store.getEndpoint('ep_1')).to.deep.equal(withCert);
        expect(await store.getEndpoint('ep_2')).to.not.have.property('clientTls');
        expect(await store.listEndpoints({ tenantId: 'acme' })).to.deep.equal([withCert, without]);
      });

      it('sets, keeps, replaces and removes it by patch (null), leaving the other fields alone', async () => {
        const created = await addEndpoint('ep_1');
        const set = await store.updateEndpoint('ep_1', { clientTls: tls('enc:v1:aaaaaaaa:k1') }, clock.now());
        expect(set).to.deep.equal({ ...created, clientTls: tls('enc:v1:aaaaaaaa:k1') });
        const kept = await store.updateEndpoint('ep_1', { concurrency: 3 }, clock.now());
        expect(kept?.clientTls, 'a patch without clientTls keeps it').to.deep.equal(tls('enc:v1:aaaaaaaa:k1'));
        const replaced = await store.updateEndpoint('ep_1', { clientTls: tls('enc:v1:aaaaaaaa:k2') }, clock.now());
        expect(await store.getEndpoint('ep_1')).to.deep.equal(replaced);
        expect(replaced?.clientTls?.passphrase).to.equal('enc:v1:aaaaaaaa:p2');
        const removed = await store.updateEndpoint('ep_1', { clientTls: null }, clock.now());
        expect(removed).to.deep.equal({ ...created, concurrency: 3 });
        expect(await store.getEndpoint('ep_1')).to.deep.equal(removed);
      });

      it('writes a patch with expectedClientTlsKey only while the stored key is that (HERALD_CONFLICT otherwise, nothing written)', async () => {
        await addEndpoint('ep_1', 'acme', { clientTls: tls('enc:v1:aaaaaaaa:k1') });
        const error = await rejection(store.updateEndpoint('ep_1', { clientTls: tls('enc:v1:aaaaaaaa:k2'), expectedClientTlsKey: 'enc:v1:aaaaaaaa:k0' }, clock.now()));
        expect((error as HeraldError).code).to.equal(ErrorCode.CONFLICT);
        expect((await store.getEndpoint('ep_1'))?.clientTls?.key).to.equal('enc:v1:aaaaaaaa:k1');
        const written = await store.updateEndpoint('ep_1', { clientTls: tls('enc:v1:aaaaaaaa:k2'), expectedClientTlsKey: 'enc:v1:aaaaaaaa:k1' }, clock.now());
        expect(written?.clientTls?.key).to.equal('enc:v1:aaaaaaaa:k2');
        await addEndpoint('ep_2');
        const none = await rejection(store.updateEndpoint('ep_2', { concurrency: 2, expectedClientTlsKey: 'enc:v1:aaaaaaaa:k1' }, clock.now()));
        expect((none as HeraldError).code).to.equal(ErrorCode.CONFLICT);
        expect((await store.updateEndpoint('ep_2', { concurrency: 2, expectedClientTlsKey: null }, clock.now()))?.concurrency).to.equal(2);
      });
    });

    context('when an endpoint does not exist', () => {
      it('returns undefined from get and update, false from delete', async () => {
        expect(await store.getEndpoint('ep_missing')).to.equal(undefined);
        expect(await store.updateEndpoint('ep_missing', { url: 'https://x.example' }, clock.now())).to.equal(undefined);
        expect(await store.deleteEndpoint('ep_missing', clock.now())).to.equal(false);
      });
    });

    context('when listing', () => {
      it('lists all endpoints or those of one tenant', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'globex');
        await addEndpoint('ep_3', 'acme');
        expect((await store.listEndpoints()).map((e) => e.id).sort()).to.deep.equal(['ep_1', 'ep_2', 'ep_3']);
        expect((await store.listEndpoints({ tenantId: 'acme' })).map((e) => e.id).sort()).to.deep.equal(['ep_1', 'ep_3']);
        expect(await store.listEndpoints({ tenantId: 'initech' })).to.deep.equal([]);
      });
    });

    context('when patched', () => {
      it('changes only the given fields, sets updatedAt and returns the new endpoint', async () => {
        const created = await addEndpoint('ep_1', 'acme', { failingSince: clock.now() - HOUR });
        clock.advance(MINUTE);
        const updated = await store.updateEndpoint(
          'ep_1',
          { url: 'https://new.example/hook', status: 'disabled', disabledReason: 'operator', failingSince: null },
          clock.now(),
        );
        const expected: Endpoint = {
          ...created,
          url: 'https://new.example/hook',
          status: 'disabled',
          disabledReason: 'operator',
          failingSince: null,
          updatedAt: clock.now(),
        };
        expect(updated).to.deep.equal(expected);
        expect(await store.getEndpoint('ep_1')).to.deep.equal(expected);
      });
    });

    context('when deleted', () => {
      it('removes it and cancels its undelivered deliveries, leaving finished ones alone', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const { delivery: inFlight } = await claimedDelivery('ep_1');
        const { delivery: done } = await claimedDelivery('ep_1');
        await store.settle(
          [{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        const { deliveryIds: [pendingId] } = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
        const { deliveryIds: [otherId] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
        clock.advance(SECOND);

        expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(true);
        expect(await store.getEndpoint('ep_1')).to.equal(undefined);
        expect((await store.getDelivery(inFlight.id))?.status).to.equal('cancelled');
        expect((await store.getDelivery(pendingId!))?.status).to.equal('cancelled');
        expect((await store.getDelivery(pendingId!))?.updatedAt).to.equal(clock.now());
        expect((await store.getDelivery(done.id))?.status).to.equal('delivered');
        expect((await store.getDelivery(otherId!))?.status).to.equal('pending');
        expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(false);
      });
    });
  });
}

export function describeEndpointChanges(suite: ConformanceSuite): void {
  const { addEndpoint } = suite;
  describe('endpoint changes', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when endpoints are created, updated and deleted', () => {
      it('numbers every change 1, 2, 3, … in order, and lists those after a cursor, at most a limit', async () => {
        expect(await store.lastEndpointChange()).to.equal(0);
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        await store.updateEndpoint('ep_1', { url: 'https://hooks.example.com/moved' }, clock.now());
        await store.updateEndpoint('ep_2', { status: 'disabled', disabledReason: 'operator' }, clock.now());
        expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(true);
        expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([
          { version: 1, endpointId: 'ep_1' },
          { version: 2, endpointId: 'ep_2' },
          { version: 3, endpointId: 'ep_1' },
          { version: 4, endpointId: 'ep_2' },
          { version: 5, endpointId: 'ep_1' },
        ]);
        expect(await store.endpointChangesAfter(3, 1)).to.deep.equal([{ version: 4, endpointId: 'ep_2' }]);
        expect(await store.endpointChangesAfter(5, 100)).to.deep.equal([]);
        expect(await store.lastEndpointChange()).to.equal(5);
      });
    });

    context('when a write changes nothing', () => {
      it('takes no number: an unknown id updated or deleted, a duplicate created, a secrets precondition that fails', async () => {
        const created = await addEndpoint('ep_1');
        expect(await store.updateEndpoint('ep_nope', { url: 'https://hooks.example.com/x' }, clock.now())).to.equal(undefined);
        expect(await store.deleteEndpoint('ep_nope', clock.now())).to.equal(false);
        const duplicate = await store.createEndpoint(created).then(() => 'created', (error: unknown) => error);
        expect((duplicate as HeraldError).code).to.equal(ErrorCode.CONFLICT);
        const conflict = await store
          .updateEndpoint('ep_1', { secrets: [], expectedSecrets: ['whsec_not_the_stored_one'] }, clock.now())
          .then(() => 'written', (error: unknown) => error);
        expect((conflict as HeraldError).code).to.equal(ErrorCode.CONFLICT);
        expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 1, endpointId: 'ep_1' }]);
        expect(await store.lastEndpointChange()).to.equal(1);
      });
    });

    context('when the changes are purged', () => {
      it('deletes those recorded before the horizon and never reuses their numbers', async () => {
        await addEndpoint('ep_1');
        clock.advance(DAY);
        await store.updateEndpoint('ep_1', { description: 'later' }, clock.now());
        await store.purge(clock.now() - HOUR);
        expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 2, endpointId: 'ep_1' }]);
        await store.purge(clock.now() + HOUR);
        expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([]);
        expect(await store.lastEndpointChange()).to.equal(2);
        await addEndpoint('ep_2');
        expect(await store.endpointChangesAfter(0, 100)).to.deep.equal([{ version: 3, endpointId: 'ep_2' }]);
      });
    });
  });
}

export function describeResumeDeliveries(suite: ConformanceSuite): void {
  const { addEndpoint, seed } = suite;
  describe('resumeDeliveries', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when an endpoint is re-enabled with deliveries waiting for later', () => {
      it('makes its pending deliveries due now and leaves other endpoints and earlier ones alone', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const { deliveryIds: [later] } = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
        const { deliveryIds: [earlier] } = await seed(['ep_1'], { dueAt: clock.now() - HOUR });
        const { deliveryIds: [other] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
        expect(await store.resumeDeliveries('ep_1', clock.now())).to.equal(1);
        expect((await store.getDelivery(later!))?.nextAttemptAt).to.equal(clock.now());
        expect((await store.getDelivery(earlier!))?.nextAttemptAt).to.equal(clock.now() - HOUR);
        expect((await store.getDelivery(other!))?.nextAttemptAt).to.equal(clock.now() + HOUR);
      });
    });
  });
}
