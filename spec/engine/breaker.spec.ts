import { expect } from 'chai';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { BreakerFamily, BreakerState, type BreakerOptions, type Circuit, type EndpointBreaker } from '../../lib/engine/breaker.ts';
import type { Outcome } from '../../lib/model.ts';

const OK: Outcome = { kind: 'response', status: 200, location: null, retryAfter: null, body: '' };
const FAILED: Outcome = { kind: 'response', status: 503, location: null, retryAfter: null, body: '' };
const WINDOW_MS = 60_000;
const BUCKET_MS = WINDOW_MS / 10;

function setup(options: Partial<BreakerOptions> = {}) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const family = new BreakerFamily(clock, { errorThresholdPercentage: 50, volumeThreshold: 10, windowMs: WINDOW_MS, cooldownMs: 30_000, ...options });
  const changes: BreakerState[] = [];
  const breaker = family.create({ onBreakerChange: (state) => changes.push(state) });
  return { clock, family, breaker, changes };
}

/** Sends one attempt with this outcome through the breaker, as the actor does: permit, then run. */
async function attempt(breaker: EndpointBreaker, clock: ManualClock, outcome: Outcome): Promise<Outcome | undefined> {
  const permit = breaker.permit(clock.now());
  if (permit === 'wait') return undefined;
  return breaker.run(permit, () => Promise.resolve(outcome));
}

/** How many failures in a row it takes to open the breaker (at most `limit`). */
async function failuresToOpen(breaker: EndpointBreaker, clock: ManualClock, limit = 100): Promise<number> {
  for (let n = 1; n <= limit; n++) {
    await attempt(breaker, clock, FAILED);
    if (breaker.state === BreakerState.OPEN) return n;
  }
  return Infinity;
}

/** Moves time on by whole window buckets, one at a time (ManualClock fires a coalesced interval once per advance). */
function rotate(clock: ManualClock, buckets: number): void {
  for (let n = 0; n < buckets; n++) clock.advance(BUCKET_MS);
}

/** A send the test settles by hand. */
function deferred(): { promise: Promise<Outcome>; resolve(outcome: Outcome): void; reject(error: Error): void } {
  let resolve!: (outcome: Outcome) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<Outcome>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('EndpointBreaker', () => {
  let family: BreakerFamily | undefined;
  afterEach(() => family?.close());

  context('when an endpoint only succeeds', () => {
    it('never makes a circuit, and stays closed', async () => {
      const s = setup();
      family = s.family;
      for (let n = 0; n < 50; n++) {
        expect(await attempt(s.breaker, s.clock, OK)).to.deep.equal(OK);
        s.clock.advance(BUCKET_MS / 2);
      }
      expect(s.breaker.hasCircuit).to.equal(false);
      expect(s.breaker.state).to.equal(BreakerState.CLOSED);
      expect(s.changes).to.deep.equal([]);
    });
  });

  context('when it fails for the first time', () => {
    it('makes the circuit, which then opens after the threshold with a cooldown on the clock', async () => {
      const s = setup({ volumeThreshold: 3 });
      family = s.family;
      expect(await attempt(s.breaker, s.clock, FAILED)).to.deep.equal(FAILED);
      expect(s.breaker.hasCircuit).to.equal(true);
      expect(s.breaker.state).to.equal(BreakerState.CLOSED);
      await attempt(s.breaker, s.clock, FAILED);
      expect(s.breaker.state).to.equal(BreakerState.CLOSED);
      await attempt(s.breaker, s.clock, FAILED);
      expect(s.breaker.state).to.equal(BreakerState.OPEN);
      expect(s.breaker.probeAt).to.equal(s.clock.now() + 30_000);
      expect(s.changes).to.deep.equal(['open']);
      expect(s.breaker.permit(s.clock.now()), 'nothing goes while open').to.equal('wait');
    });

    it('counts the successes before it in the ratio, as a circuit made at the start would', async () => {
      const s = setup();
      family = s.family;
      for (let n = 0; n < 20; n++) await attempt(s.breaker, s.clock, OK);
      // 20 successes in the window: failures must exceed them before the ratio passes 50 %.
      expect(await failuresToOpen(s.breaker, s.clock)).to.equal(21);
    });

    it('leaves out the successes that have left the window', async () => {
      const s = setup();
      family = s.family;
      for (let n = 0; n < 20; n++) await attempt(s.breaker, s.clock, OK);
      rotate(s.clock, 5);
      for (let n = 0; n < 10; n++) await attempt(s.breaker, s.clock, OK);
      rotate(s.clock, 5);
      // The first 20 have rotated out; the 10 later ones are still in.
      expect(await failuresToOpen(s.breaker, s.clock)).to.equal(11);
    });
  });

  context('when attempts started before the circuit existed fail after it was made', () => {
    it('counts each once: opens when the third of three attempts in the window is the second failure', async () => {
      const s = setup({ volumeThreshold: 3, errorThresholdPercentage: 60 });
      family = s.family;
      await attempt(s.breaker, s.clock, OK);
      const [a, b] = [deferred(), deferred()];
      const runs = [a, b].map((d) => s.breaker.run(s.breaker.permit(s.clock.now()) as 'send', () => d.promise));
      a.resolve(FAILED);
      expect(await runs[0]).to.deep.equal(FAILED);
      expect(s.breaker.state, '2 attempts counted, under the volume threshold').to.equal(BreakerState.CLOSED);
      rotate(s.clock, 1); // b's start stays counted in the bucket it started in
      b.resolve(FAILED);
      expect(await runs[1]).to.deep.equal(FAILED);
      expect(s.breaker.state, '2 failures of 3 attempts: 67 % > 60 %').to.equal(BreakerState.OPEN);
    });
    it('counts one that fails while the circuit is open, for when it has closed again', async () => {
      const s = setup({ volumeThreshold: 3, errorThresholdPercentage: 50 });
      family = s.family;
      const sends = [deferred(), deferred(), deferred(), deferred()];
      const runs = sends.map((d) => s.breaker.run(s.breaker.permit(s.clock.now()) as 'send', () => d.promise));
      for (const d of sends.slice(0, 3)) d.resolve(FAILED);
      await Promise.all(runs.slice(0, 3));
      expect(s.breaker.state, '3 failures of 4 attempts').to.equal(BreakerState.OPEN);
      sends[3]!.resolve(FAILED);
      expect(await runs[3], 'it was sent: its outcome, not a give-back').to.deep.equal(FAILED);
      s.clock.advanceTo(s.breaker.probeAt);
      await s.breaker.run(s.breaker.permit(s.clock.now()) as 'probe', () => Promise.resolve(OK));
      expect(s.breaker.state).to.equal(BreakerState.CLOSED);
      for (let n = 0; n < 4; n++) await attempt(s.breaker, s.clock, OK);
      // In the window: 9 attempts, 5 failures with this one (4 without the late one: 44 %).
      await attempt(s.breaker, s.clock, FAILED);
      expect(s.breaker.state).to.equal(BreakerState.OPEN);
    });
  });

  context('when a send throws', () => {
    it('rethrows it and counts it as a failure', async () => {
      const s = setup({ volumeThreshold: 2 });
      family = s.family;
      const error = new Error('boom');
      const thrown = await s.breaker.run('send', () => Promise.reject(error)).catch((e: unknown) => e);
      expect(thrown).to.equal(error);
      expect(s.breaker.hasCircuit).to.equal(true);
      await attempt(s.breaker, s.clock, FAILED);
      expect(s.breaker.state).to.equal(BreakerState.OPEN);
    });
  });

  context('when open', () => {
    it('sends one probe at probeAt, and closes on its success', async () => {
      const s = setup({ volumeThreshold: 2 });
      family = s.family;
      await failuresToOpen(s.breaker, s.clock);
      s.clock.advanceTo(s.breaker.probeAt);
      expect(s.breaker.permit(s.clock.now())).to.equal('probe');
      expect(s.breaker.permit(s.clock.now()), 'one probe at a time').to.equal('wait');
      expect(await s.breaker.run('probe', () => Promise.resolve(OK))).to.deep.equal(OK);
      expect(s.breaker.state).to.equal(BreakerState.CLOSED);
      expect(s.changes).to.deep.equal(['open', 'half-open', 'closed']);
    });
  });

  context('for any sequence of attempts over time', () => {
    it('opens at the same attempt as a circuit made at the start', async () => {
      const random = seededRandom(11);
      for (let round = 0; round < 40; round++) {
        const s = setup({ volumeThreshold: 1 + Math.floor(random() * 12), errorThresholdPercentage: 10 + Math.floor(random() * 80) });
        family = s.family;
        // The reference: one circuit from the start, every attempt fired through it, as before.
        const eager: Circuit = s.family.createCircuit();
        let eagerOpenAt: number | undefined;
        let lazyOpenAt: number | undefined;
        eager.on('open', () => (eagerOpenAt ??= step));
        let step = 0;
        const failureRate = random();
        for (; step < 200 && (eagerOpenAt === undefined || lazyOpenAt === undefined); step++) {
          const outcome = random() < failureRate ? FAILED : OK;
          await eager.fire(() => Promise.resolve(outcome)).catch(() => undefined);
          if (s.breaker.state === BreakerState.CLOSED) await attempt(s.breaker, s.clock, outcome);
          if (s.breaker.state === BreakerState.OPEN) lazyOpenAt ??= step;
          s.clock.advance(Math.floor(random() * BUCKET_MS * 1.5));
        }
        expect(lazyOpenAt, `round ${round}`).to.equal(eagerOpenAt);
        eager.shutdown();
        s.family.close();
      }
      family = undefined;
    });
  });
});
