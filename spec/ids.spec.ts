import { expect } from 'chai';
import { deliveryIdFor, newEventId, slotOf } from '../lib/ids.ts';

describe('Identifiers', () => {
  context('when event ids are made at increasing times', () => {
    it('are 32 hex digits that sort by their time, and differ within one millisecond', () => {
      const at = Date.UTC(2026, 10, 30);
      const ids = [newEventId(at + 1_000), newEventId(at), newEventId(at + 1), newEventId(at)];
      for (const id of ids) expect(id).to.match(/^evt_[0-9a-f]{32}$/);
      expect([...ids].sort().slice(0, 2).every((id) => id.startsWith(`evt_${at.toString(16).padStart(12, '0')}`))).to.equal(true);
      expect([...ids].sort().slice(2)).to.deep.equal([ids[2], ids[0]]);
      expect(ids[1]).to.not.equal(ids[3]);
    });
  });

  context('when a delivery id is derived', () => {
    it('is the same for the same pair, another for another endpoint, and sorts by the event\'s time', () => {
      const a = deliveryIdFor('evt_x', 'ep_1', 1_000);
      expect(deliveryIdFor('evt_x', 'ep_1', 1_000)).to.equal(a);
      expect(deliveryIdFor('evt_x', 'ep_2', 1_000)).to.not.equal(a);
      expect(a).to.match(/^dlv_[0-9a-f]{12}[A-Za-z0-9_-]{20}$/);
      expect(deliveryIdFor('evt_y', 'ep_1', 999) < a).to.equal(true);
      expect(deliveryIdFor('evt_y', 'ep_1', 1_001) > a).to.equal(true);
    });
  });

  context('when an endpoint id is hashed into slots', () => {
    it('always gives the same slot within range', () => {
      expect(slotOf('ep_1', 256)).to.equal(slotOf('ep_1', 256));
      for (const id of ['ep_1', 'ep_2', 'x']) expect(slotOf(id, 7)).to.be.within(0, 6);
    });
  });
});
