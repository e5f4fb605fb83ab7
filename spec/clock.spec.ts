import { expect } from 'chai';
import { durationText, ManualClock, parseDate, seededRandom } from '../lib/clock.ts';

describe('ManualClock', () => {
  context('when advanced past one-shot timers', () => {
    it('fires them in due order with now() at each due time', () => {
      const clock = new ManualClock(1_000);
      const fired: Array<[string, number]> = [];
      clock.setTimeout(() => fired.push(['b', clock.now()]), 200);
      clock.setTimeout(() => fired.push(['a', clock.now()]), 100);
      clock.advance(500);
      expect(fired).to.deep.equal([['a', 1_100], ['b', 1_200]]);
      expect(clock.now()).to.equal(1_500);
    });

    it('does not fire cancelled timers', () => {
      const clock = new ManualClock(0);
      let fired = false;
      clock.setTimeout(() => { fired = true; }, 10).cancel();
      clock.advance(20);
      expect(fired).to.equal(false);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when an interval falls due many times in one advance', () => {
    it('fires it once, coalesced, like a busy event loop', () => {
      const clock = new ManualClock(0);
      const seen: number[] = [];
      clock.setInterval(() => seen.push(clock.now()), 100);
      clock.advance(1_000);
      expect(seen).to.deep.equal([1_000]);
      clock.advance(100);
      expect(seen).to.deep.equal([1_000, 1_100]);
    });

    it('fires it before a one-shot timer that falls due later in the same advance', () => {
      const clock = new ManualClock(0);
      const order: string[] = [];
      clock.setInterval(() => order.push(`tick@${clock.now()}`), 100);
      clock.setTimeout(() => order.push(`once@${clock.now()}`), 450);
      clock.advance(450);
      expect(order).to.deep.equal(['tick@450', 'once@450']);
    });
  });
});

describe('seededRandom', () => {
  it('is deterministic per seed and stays in [0, 1)', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const draws = Array.from({ length: 1_000 }, () => a());
    expect(draws).to.deep.equal(Array.from({ length: 1_000 }, () => b()));
    expect(draws.every((x) => x >= 0 && x < 1)).to.equal(true);
  });
});

describe('parseDate', () => {
  context('when the text is an ISO-8601 date', () => {
    it('reads it as midnight UTC', () => {
      expect(parseDate('2026-01-31')).to.equal(Date.UTC(2026, 0, 31));
      expect(parseDate('2024-02-29')).to.equal(Date.UTC(2024, 1, 29));
      expect(parseDate('2000-02-29')).to.equal(Date.UTC(2000, 1, 29));
      expect(parseDate('1970-01-01')).to.equal(0);
    });
  });

  context('when the text is an ISO-8601 date-time with Z or an offset', () => {
    it('reads it, with optional seconds and fraction', () => {
      expect(parseDate('2026-01-31T09:30Z')).to.equal(Date.UTC(2026, 0, 31, 9, 30));
      expect(parseDate('2026-01-31T09:30:15Z')).to.equal(Date.UTC(2026, 0, 31, 9, 30, 15));
      expect(parseDate('2026-01-31T09:30:15.250Z')).to.equal(Date.UTC(2026, 0, 31, 9, 30, 15, 250));
      expect(parseDate('2026-01-31T09:30:15.5Z')).to.equal(Date.UTC(2026, 0, 31, 9, 30, 15, 500));
      expect(parseDate('2026-01-31T09:30:15.123456789Z')).to.equal(Date.UTC(2026, 0, 31, 9, 30, 15, 123));
      expect(parseDate('2026-01-31T09:30:00+02:00')).to.equal(Date.UTC(2026, 0, 31, 7, 30));
      expect(parseDate('2026-01-31T00:30:00-05:30')).to.equal(Date.UTC(2026, 0, 31, 6, 0));
      expect(parseDate('2024-02-29T23:59:59Z')).to.equal(Date.UTC(2024, 1, 29, 23, 59, 59));
    });

    it('reads years before 100 as written', () => {
      expect(new Date(parseDate('0099-12-31T00:00:00Z') ?? Number.NaN).toISOString()).to.equal('0099-12-31T00:00:00.000Z');
      expect(new Date(parseDate('0000-01-01') ?? Number.NaN).toISOString()).to.equal('0000-01-01T00:00:00.000Z');
    });
  });

  context('when a calendar field does not exist', () => {
    for (const text of [
      '2026-02-29', '2026-02-30', '2100-02-29', '2026-04-31', '2026-13-01', '2026-00-10', '2026-01-00', '2026-01-32',
      '2026-01-31T24:00:00Z', '2026-01-31T23:60:00Z', '2026-01-31T23:59:60Z', '2026-01-31T10:00:00+24:00', '2026-01-31T10:00:00+01:60',
    ]) {
      it(`refuses ${text} (Date.parse would roll it over or accept it)`, () => {
        expect(parseDate(text)).to.equal(undefined);
      });
    }
  });

  context('when the text is not a strict ISO-8601 date or date-time', () => {
    for (const text of [
      '', 'yesterday', '2026', '2026-1-31', '2026-01-31T09:30:00', '2026-01-31 09:30:00Z', '2026-01-31t09:30:00z',
      '2026-01-31T9:30Z', '2026-01-31T09:30:00.Z', '2026-01-31T09:30:00+0200', 'Sat, 31 Jan 2026 00:00:00 GMT', '31/01/2026',
      ' 2026-01-31', '2026-01-31\n', '+002026-01-31',
    ]) {
      it(`refuses ${JSON.stringify(text)}`, () => {
        expect(parseDate(text)).to.equal(undefined);
      });
    }
  });
});

describe('durationText', () => {
  const SECOND = 1_000;
  const MINUTE = 60 * SECOND;
  const HOUR = 60 * MINUTE;
  const DAY = 24 * HOUR;
  const shown = (cases: ReadonlyArray<readonly [number, string]>): void => {
    expect(cases.map(([ms]) => durationText(ms))).to.deep.equal(cases.map(([, text]) => text));
  };

  context('when a duration is under 10 seconds', () => {
    it('gives whole milliseconds below a second, then seconds with one decimal, rounded down', () => {
      shown([[0, '0 ms'], [0.9, '0 ms'], [250, '250 ms'], [999, '999 ms'], [SECOND, '1 s'], [1_099, '1 s'], [1_500, '1.5 s'], [9_999, '9.9 s']]);
    });
  });

  context('when a duration is 10 seconds or more', () => {
    it('gives its two largest units, rounded down, leaving out a zero second unit', () => {
      shown([
        [10 * SECOND, '10 s'],
        [59_999, '59 s'],
        [MINUTE, '1 min'],
        [90 * SECOND, '1 min 30 s'],
        [HOUR - 1, '59 min 59 s'],
        [HOUR, '1 h'],
        [90 * MINUTE, '1 h 30 min'],
        [DAY - 1, '23 h 59 min'],
        [DAY, '1 d'],
        [2 * DAY + 59 * MINUTE, '2 d'],
        [DAY + 3 * HOUR + 59 * MINUTE, '1 d 3 h'],
        [30 * DAY, '30 d'],
      ]);
    });
  });

  context('when a duration is negative or not finite', () => {
    it('shows a negative one as 0 ms and any other as the number', () => {
      shown([[-5, '0 ms'], [Infinity, 'Infinity'], [NaN, 'NaN']]);
    });
  });
});
