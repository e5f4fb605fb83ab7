import { expect } from 'chai';
import { deliveryIdFor, newEventId, newId, shortIds, ShortIds, slotOf } from '../lib/ids.ts';

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

  context('when many event ids are made in one millisecond', () => {
    it('have no fixed digit in their 20 random ones (a UUID\'s version and variant digits left out)', () => {
      const ids = Array.from({ length: 400 }, () => newEventId(Date.UTC(2026, 10, 30)));
      for (let at = 16; at < 36; at++) expect(new Set(ids.map((id) => id[at])).size, `digit ${at - 4}`).to.be.at.least(12);
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

  describe('shortIds', () => {
    context('when two events are made in the same millisecond', () => {
      it('tells them apart by their random tails, keeping the kind prefix', () => {
        const at = Date.UTC(2026, 10, 30);
        const [a, b] = [newEventId(at), newEventId(at)] as [string, string];
        const short = shortIds([a, b]);
        expect(short.get(a)).to.match(/^evt_…[0-9a-f]{6}$/).and.equal(`evt_…${a.slice(-6)}`);
        expect(short.get(b)).to.not.equal(short.get(a));
      });
    });

    context('when 10 000 events of one run and their deliveries are shown together', () => {
      it('gives each its own short form, all of one length, longer than the minimum only as needed', () => {
        const start = Date.UTC(2026, 10, 30);
        const events = Array.from({ length: 10_000 }, (_, i) => newEventId(start + Math.floor(i / 7)));
        const deliveries = events.map((id, i) => deliveryIdFor(id, 'ep_1', start + Math.floor(i / 7)));
        for (const ids of [events, deliveries]) {
          const short = shortIds(ids);
          const forms = [...short.values()];
          expect(new Set(forms).size).to.equal(10_000);
          expect(new Set(forms.map((form) => form.length)).size).to.equal(1);
          for (const id of ids.slice(0, 100)) expect(id.endsWith(short.get(id)!.slice(5))).to.equal(true);
          const tailChars = forms[0]!.length - 'evt_…'.length;
          const oneShorter = new Set(ids.map((id) => id.slice(-(tailChars - 1))));
          expect(tailChars === 6 || oneShorter.size < ids.length, 'the shortest unambiguous length').to.equal(true);
        }
      });
    });

    context('when two ids share their last characters', () => {
      it('shows more of every tail until the two differ (at least minChars)', () => {
        const ids = ['evt_0000000000001111aa123456', 'evt_0000000000002222bb123456', 'evt_00000000000033333333cccc'];
        expect([...shortIds(ids).values()]).to.deep.equal(['evt_…a123456', 'evt_…b123456', 'evt_…333cccc']);
        expect([...shortIds(ids, 10).values()]).to.deep.equal(['evt_…11aa123456', 'evt_…22bb123456', 'evt_…333333cccc']);
      });
    });

    context('when ids of different kinds share a tail', () => {
      it('keeps the minimum: the prefix tells them apart', () => {
        expect([...shortIds(['evt_0001aaaaaa123456', 'dlv_0001bbbbbb123456']).values()]).to.deep.equal(['evt_…123456', 'dlv_…123456']);
      });
    });

    context('when an id is short or has no kind prefix', () => {
      it('shows a short one whole and a long one by its tail', () => {
        const short = shortIds(['orders', 'crm-webhook-for-billing', 'ep_1']);
        expect([...short.values()]).to.deep.equal(['orders', '…illing', 'ep_1']);
      });

      it('never shows one id whole and another by the same tail', () => {
        expect([...shortIds(['x_abcdef', 'x_…0abcdef']).values()]).to.deep.equal(['x_abcdef', 'x_…0abcdef']);
      });
    });
  });

  describe('ShortIds', () => {
    context('when ids arrive one by one', () => {
      it('shows each the same way every time, by 8 tail characters', () => {
        const ids = new ShortIds();
        const event = newEventId(Date.UTC(2026, 10, 30));
        const endpoint = newId('ep');
        expect(ids.of(event)).to.equal(`evt_…${event.slice(-8)}`);
        expect(ids.of(endpoint)).to.equal(`ep_…${endpoint.slice(-8)}`);
        expect(ids.of(event)).to.equal(ids.of(event));
      });
    });

    context('when a later id ends like one shown before', () => {
      it('gives the later one a longer tail and leaves the earlier one as it was shown', () => {
        const ids = new ShortIds(4);
        expect(ids.of('evt_00000000aaaa1234')).to.equal('evt_…1234');
        expect(ids.of('evt_00000000bbbb1234')).to.equal('evt_…b1234');
        expect(ids.of('evt_00000000cccb1234')).to.equal('evt_…cb1234');
        expect(ids.of('evt_00000000aaaa1234')).to.equal('evt_…1234');
      });
    });

    context('when 10 000 events of one run are shown as they come', () => {
      it('never shows two of them the same way', () => {
        const ids = new ShortIds();
        const start = Date.UTC(2026, 10, 30);
        const forms = new Set(Array.from({ length: 10_000 }, (_, i) => ids.of(newEventId(start + Math.floor(i / 7)))));
        expect(forms.size).to.equal(10_000);
      });
    });
  });
});
