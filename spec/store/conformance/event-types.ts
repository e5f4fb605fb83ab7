/**
 * The event-type catalog: types kept as given with their versions, listed by name, changed
 * atomically (a new schema is a new version, numbered after the last), deleted; every write
 * bumps the catalog's version, which producers read to tell whether their copy is current.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode } from '../../../lib/errors.ts';
import type { EventType } from '../../../lib/store/event-type-port.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, rejection, type ConformanceSuite } from './fixtures.ts';

const AMOUNT = { type: 'object', required: ['amount'], properties: { amount: { type: 'number', minimum: 0 }, 'a.b': { $ref: '#/$defs/x' } }, $defs: { x: { type: 'string' } } };

export function describeEventTypes(suite: ConformanceSuite): void {
  describe('event types', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    function eventType(name: string, overrides: Partial<EventType> = {}): EventType {
      const now = clock.now();
      return {
        name,
        description: `the ${name} type — é`,
        versions: [{ version: 1, schema: AMOUNT, createdAt: now }],
        deprecated: false,
        deprecatedAt: null,
        deprecationNote: null,
        createdAt: now,
        updatedAt: now,
        ...overrides,
      };
    }

    it('keeps a type as given, schema keys with $ and dots included, and lists every type by name', async () => {
      const paid = eventType('invoice.paid');
      const old = eventType('lead.created', { versions: [{ version: 1, schema: null, createdAt: clock.now() }], deprecated: true, deprecatedAt: clock.now(), deprecationNote: 'use lead.opened' });
      await store.createEventType(paid);
      await store.createEventType(old);
      expect(await store.getEventType('invoice.paid')).to.deep.equal(paid);
      expect(await store.getEventType('lead.created')).to.deep.equal(old);
      expect(await store.getEventType('unknown.type')).to.equal(undefined);
      expect((await store.listEventTypes()).map((t) => t.name)).to.deep.equal(['invoice.paid', 'lead.created']);
    });

    it('refuses a second type of the same name with HERALD_CONFLICT, keeping the first, and leaves the version alone', async () => {
      await store.createEventType(eventType('invoice.paid'));
      const version = await store.eventTypeCatalogVersion();
      const error = await rejection(store.createEventType(eventType('invoice.paid', { description: 'other' })));
      expect(error.code).to.equal(ErrorCode.CONFLICT);
      expect((await store.getEventType('invoice.paid'))?.description).to.not.equal('other');
      expect(await store.eventTypeCatalogVersion()).to.equal(version);
    });

    it('appends a new schema as the next version, keeps the others, and changes description and deprecation', async () => {
      await store.createEventType(eventType('invoice.paid'));
      clock.advance(SECOND);
      const later = clock.now();
      const schema = { type: 'object', required: ['amount', 'currency'] };
      const updated = await store.updateEventType('invoice.paid', { schema, description: 'paid', deprecation: { note: 'use v2' } }, later);
      expect(updated?.versions.map((v) => [v.version, v.createdAt])).to.deep.equal([[1, later - SECOND], [2, later]]);
      expect(updated).to.deep.include({ description: 'paid', deprecated: true, deprecatedAt: later, deprecationNote: 'use v2', updatedAt: later });
      expect(await store.getEventType('invoice.paid')).to.deep.equal(updated);

      clock.advance(SECOND);
      const removed = await store.updateEventType('invoice.paid', { schema: null, deprecation: null }, clock.now());
      expect(removed?.versions.at(-1)).to.deep.equal({ version: 3, schema: null, createdAt: clock.now() });
      expect(removed).to.deep.include({ deprecated: false, deprecatedAt: null, deprecationNote: null, description: 'paid' });
      expect(await store.getEventType('invoice.paid')).to.deep.equal(removed);
      expect(await store.updateEventType('unknown.type', { description: 'x' }, clock.now())).to.equal(undefined);
    });

    it('deletes a type: false when there was none', async () => {
      await store.createEventType(eventType('invoice.paid'));
      expect(await store.deleteEventType('invoice.paid')).to.equal(true);
      expect(await store.getEventType('invoice.paid')).to.equal(undefined);
      expect(await store.deleteEventType('invoice.paid')).to.equal(false);
    });

    it('bumps the catalog version with every write, and reads the newest version of each type with it', async () => {
      expect(await store.eventTypeCatalogVersion()).to.equal(0);
      expect(await store.eventTypeCatalog()).to.deep.equal({ version: 0, entries: [] });
      await store.createEventType(eventType('invoice.paid'));
      await store.createEventType(eventType('lead.created', { versions: [{ version: 1, schema: null, createdAt: clock.now() }] }));
      await store.updateEventType('invoice.paid', { schema: { type: 'object' } }, clock.now());
      expect(await store.eventTypeCatalogVersion()).to.equal(3);
      expect(await store.eventTypeCatalog()).to.deep.equal({
        version: 3,
        entries: [
          { name: 'invoice.paid', version: 2, schema: { type: 'object' } },
          { name: 'lead.created', version: 1, schema: null },
        ],
      });
      await store.deleteEventType('lead.created');
      expect(await store.deleteEventType('lead.created'), 'nothing to delete').to.equal(false);
      expect(await store.eventTypeCatalogVersion()).to.equal(4);
    });
  });
}
