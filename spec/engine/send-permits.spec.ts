import { expect } from 'chai';
import type { ReleasePermit } from '../../lib/engine/in-flight-limiter.ts';
import { originOf, SendLane, SendPermits } from '../../lib/engine/send-permits.ts';
import { ConfigError } from '../../lib/errors.ts';

/** Lets granted permits' promise callbacks run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function endpoint(tenantId: string, id: string, url: string) {
  return { tenantId, id, url };
}

describe('SendPermits', () => {
  context('when one origin has more attempts than its depth', () => {
    it('lets only `originDepth` of them hold node permits, so another origin\'s attempt is granted at once', async () => {
      const permits = new SendPermits({ maxInFlight: 8, originDepth: 2 });
      const granted: string[] = [];
      const held: ReleasePermit[] = [];
      for (let i = 0; i < 6; i++) {
        void permits.acquire(endpoint('bulk', `b${i}`, `http://shared.example:8080/${i}`)).then((release) => {
          granted.push(`b${i}`);
          held.push(release);
        });
      }
      await turn();
      // 6 attempts at one origin: 2 hold node permits, 4 wait for their origin holding none.
      expect(granted).to.deep.equal(['b0', 'b1']);
      expect(permits.inFlight).to.equal(2);
      expect(permits.waiting).to.equal(0);

      const quiet = await permits.acquire(endpoint('quiet', 'q', 'https://quiet.example/hook'));
      expect(permits.inFlight).to.equal(3);
      expect(permits.origins).to.equal(2);

      // A release at the shared origin lets its next attempt through, round-robin by tenant and endpoint.
      held.shift()!();
      await turn();
      expect(granted).to.deep.equal(['b0', 'b1', 'b2']);
      quiet();
      expect(permits.origins).to.equal(1);
    });
  });

  context('when the node permits are all out', () => {
    it('queues an attempt with a place at its origin for a node permit, by tenant turn', async () => {
      const permits = new SendPermits({ maxInFlight: 1, originDepth: 4 });
      const first = await permits.acquire(endpoint('bulk', 'b0', 'http://a.example/0'));
      let quietGranted = false;
      let bulkGranted = false;
      void permits.acquire(endpoint('bulk', 'b1', 'http://a.example/1')).then(() => (bulkGranted = true));
      void permits.acquire(endpoint('quiet', 'q', 'http://b.example/')).then(() => (quietGranted = true));
      await turn();
      expect(permits.waiting).to.equal(2);
      first();
      await turn();
      // bulk queued first: one grant to it (its weight), then quiet's turn.
      expect([bulkGranted, quietGranted]).to.deep.equal([true, false]);
    });
  });

  context('when every attempt has been released', () => {
    it('keeps no limiter for the origins seen, and a release twice frees one place', async () => {
      const permits = new SendPermits({ maxInFlight: 2, originDepth: 1 });
      const release = await permits.acquire(endpoint('t', 'e', 'http://once.example/'));
      release();
      release();
      expect(permits.inFlight).to.equal(0);
      expect(permits.origins).to.equal(0);
    });
  });

  context('when replays want every connection of an origin', () => {
    it('lets them hold three quarters of its connections, so a new event is granted at once', async () => {
      // Depth 8: 4 connections, 3 of them for replays.
      const permits = new SendPermits({ maxInFlight: 100, originDepth: 8 });
      const granted: string[] = [];
      const held: ReleasePermit[] = [];
      for (let i = 0; i < 6; i++) {
        void permits.acquire(endpoint('acme', `e${i % 2}`, 'http://sink.example/'), SendLane.REPLAY).then((release) => {
          granted.push(`replay-${i}`);
          held.push(release);
        });
      }
      await turn();
      expect(granted).to.deep.equal(['replay-0', 'replay-1', 'replay-2']);
      held.push(await permits.acquire(endpoint('acme', 'e0', 'http://sink.example/'), SendLane.NEW));
      expect(permits.inFlight).to.equal(4);

      // A replay's release lets the next replay through, in turn between endpoints.
      held.shift()!();
      await turn();
      expect(granted).to.deep.equal(['replay-0', 'replay-1', 'replay-2', 'replay-3']);
      for (const release of held.splice(0)) release();
      await turn();
      for (const release of held.splice(0)) release();
      expect(permits.inFlight).to.equal(0);
      expect([permits.origins, permits.replayOrigins]).to.deep.equal([0, 0]);
    });
  });

  context('when replays at many origins want every node permit', () => {
    it('lets them hold three quarters of the permits, so a new event at another origin is granted at once', async () => {
      const permits = new SendPermits({ maxInFlight: 4, originDepth: 8 });
      let replaysGranted = 0;
      for (let i = 0; i < 4; i++) {
        void permits.acquire(endpoint('acme', `e${i}`, `http://sink-${i}.example/`), SendLane.REPLAY).then(() => replaysGranted++);
      }
      await turn();
      expect(replaysGranted).to.equal(3);
      await permits.acquire(endpoint('acme', 'new', 'http://other.example/'));
      expect(permits.inFlight).to.equal(4);
    });
  });

  context('when an option is out of range', () => {
    it('throws a ConfigError naming it', () => {
      expect(() => new SendPermits({ maxInFlight: 1, originDepth: 0 })).to.throw(ConfigError, /originDepth/);
      expect(() => new SendPermits({ maxInFlight: 0, originDepth: 1 })).to.throw(ConfigError, /delivery.maxInFlight/);
    });
  });

  describe('originOf', () => {
    it('keys by scheme, host and port, and keeps a URL that does not parse as its own key', () => {
      expect(originOf('https://hooks.example.com:8443/a?b=1')).to.equal('https://hooks.example.com:8443');
      expect(originOf('https://hooks.example.com/b')).to.equal(originOf('https://hooks.example.com:443/c'));
      expect(originOf('not a url')).to.equal('not a url');
    });
  });
});
