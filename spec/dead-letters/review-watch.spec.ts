import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ReviewWatch, reviewStep, UNREVIEWED_COUNT_CAP } from '../../lib/dead-letters/review-watch.ts';
import type { UnreviewedDeadLettersEvent } from '../../lib/engine/engine-events.ts';
import type { UnreviewedDeadLetters } from '../../lib/store/port.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe('ReviewWatch (deadletters.unreviewed)', () => {
  describe('reviewStep', () => {
    it('is overdue only past the limit, and news only on the crossing', () => {
      const at = (oldestAt: number | null, count = 1): UnreviewedDeadLetters => ({ count, oldestAt });
      expect(reviewStep(false, at(null, 0), DAY, DAY)).to.deep.equal({ overdue: false, alert: false });
      expect(reviewStep(false, at(0), DAY, DAY), 'exactly the limit is not over it').to.deep.equal({ overdue: false, alert: false });
      expect(reviewStep(false, at(0), DAY + 1, DAY)).to.deep.equal({ overdue: true, alert: true });
      expect(reviewStep(true, at(0, 500), 3 * DAY, DAY)).to.deep.equal({ overdue: true, alert: false });
      expect(reviewStep(true, at(2 * DAY), 3 * DAY, DAY), 'only younger ones left').to.deep.equal({ overdue: false, alert: false });
    });
  });

  describe('on the clock, against a queue the test scripts', () => {
    let clock: ManualClock;
    let queue: UnreviewedDeadLetters;
    let checker: boolean;
    let failure: Error | undefined;
    let watch: ReviewWatch;
    const events: UnreviewedDeadLettersEvent[] = [];
    const errors: unknown[] = [];
    let reads = 0;

    beforeEach(() => {
      clock = new ManualClock(Date.UTC(2026, 0, 1));
      queue = { count: 0, oldestAt: null };
      checker = true;
      failure = undefined;
      events.length = 0;
      errors.length = 0;
      reads = 0;
      watch = new ReviewWatch(
        { reviewWithinMs: DAY, checkIntervalMs: MINUTE },
        {
          clock,
          unreviewed: async () => {
            reads++;
            if (failure !== undefined) throw failure;
            return queue;
          },
          isChecker: () => checker,
          emit: (event) => events.push(event),
          onError: (error) => errors.push(error),
        },
      );
      watch.start();
    });

    afterEach(() => {
      watch.close();
    });

    /** Moves the clock, then lets the check the interval started finish. */
    async function advance(ms: number): Promise<void> {
      clock.advance(ms);
      await watch.check();
    }

    it('emits once when the oldest unreviewed dead letter passes 24 h, with the count and its age, and not again while it stays overdue', async () => {
      const diedAt = clock.now();
      queue = { count: 1, oldestAt: diedAt };
      await advance(DAY);
      expect(events, 'at exactly 24 h it is not late yet').to.deep.equal([]);
      await advance(MINUTE);
      expect(events).to.deep.equal([
        {
          type: 'deadletters.unreviewed',
          at: diedAt + DAY + MINUTE,
          detail: '1 dead letter(s) wait for review; the oldest has waited 1 d (review within 1 d)',
          count: 1,
          oldestAgeMs: DAY + MINUTE,
          oldestCreatedAt: diedAt,
          reviewWithinMs: DAY,
        },
      ]);
      expect(watch.overdue).to.equal(true);
      queue = { count: 40, oldestAt: diedAt };
      for (let i = 0; i < 5; i++) await advance(6 * HOUR);
      expect(events).to.have.length(1);
    });

    it('emits again only after the overdue backlog was reviewed and a new dead letter aged past the limit', async () => {
      const first = clock.now();
      queue = { count: 2, oldestAt: first };
      await advance(DAY + MINUTE);
      expect(events).to.have.length(1);

      // Reviewed: what is left is younger than 24 h.
      const second = clock.now() - HOUR;
      queue = { count: 1, oldestAt: second };
      await advance(MINUTE);
      expect(watch.overdue).to.equal(false);
      expect(events).to.have.length(1);

      await advance(DAY - HOUR);
      expect(events.map((e) => e.oldestCreatedAt)).to.deep.equal([first, second]);
      expect(events[1]?.oldestAgeMs).to.equal(DAY + MINUTE);
    });

    it('re-arms when the queue is emptied, and says when the count reached the cap', async () => {
      queue = { count: 3, oldestAt: clock.now() };
      await advance(DAY + MINUTE);
      queue = { count: 0, oldestAt: null };
      await advance(MINUTE);
      expect(watch.overdue).to.equal(false);
      queue = { count: UNREVIEWED_COUNT_CAP, oldestAt: clock.now() - 2 * DAY - 3 * HOUR };
      await advance(MINUTE);
      expect(events).to.have.length(2);
      expect(events[1]?.detail).to.equal('100000+ dead letter(s) wait for review; the oldest has waited 2 d 3 h (review within 1 d)');
    });

    it('does not look while this node is not the checker (it does not hold slot 0)', async () => {
      checker = false;
      queue = { count: 1, oldestAt: clock.now() };
      await advance(2 * DAY);
      expect(reads).to.equal(0);
      checker = true;
      await advance(MINUTE);
      expect(events).to.have.length(1);
    });

    it('reports a store failure and judges again at the next check', async () => {
      queue = { count: 1, oldestAt: clock.now() };
      failure = new Error('database is locked');
      await advance(2 * DAY);
      expect(errors).to.deep.equal([failure]);
      expect(events).to.deep.equal([]);
      failure = undefined;
      await advance(MINUTE);
      expect(events).to.have.length(1);
    });

    it('checks every checkIntervalMs on the injected clock, and never after close()', async () => {
      clock.advance(MINUTE - 1);
      expect(reads).to.equal(0);
      await advance(1);
      expect(reads).to.equal(1);
      watch.close();
      queue = { count: 1, oldestAt: clock.now() - 2 * DAY };
      clock.advance(10 * MINUTE);
      await watch.check();
      expect(reads).to.equal(1);
      expect(events).to.deep.equal([]);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });
});
