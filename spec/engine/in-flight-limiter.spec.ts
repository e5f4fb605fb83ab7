import { expect } from 'chai';
import { InFlightLimiter, type ReleasePermit } from '../../lib/engine/in-flight-limiter.ts';
import { ConfigError } from '../../lib/errors.ts';

/** Lets granted permits' promise callbacks run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Queues `count` waiters for (tenant, endpoint) behind a full limiter and records, in order, who
 * was granted a permit; every grant is released at once by `grantAll`, one at a time.
 */
class Grants {
  readonly order: string[] = [];
  readonly #held: ReleasePermit[] = [];

  constructor(readonly limiter: InFlightLimiter) {}

  wait(tenantId: string, endpointId: string, count = 1): void {
    for (let i = 0; i < count; i++) {
      void this.limiter.acquire(tenantId, endpointId).then((release) => {
        this.order.push(`${tenantId}/${endpointId}`);
        this.#held.push(release);
      });
    }
  }

  /** Releases one held permit after another (each grant frees the next) until `n` grants were made. */
  async release(n: number): Promise<void> {
    const start = this.order.length;
    while (this.order.length - start < n && this.#held.length > 0) {
      (this.#held.shift() as ReleasePermit)();
      await turn();
    }
  }
}

describe('InFlightLimiter', () => {
  /** A limiter of one permit, taken: every acquire from here on waits. */
  async function fullLimiter(tenantWeights?: Record<string, number>): Promise<Grants> {
    const limiter = new InFlightLimiter({ maxInFlight: 1, ...(tenantWeights === undefined ? {} : { tenantWeights }) });
    const grants = new Grants(limiter);
    grants.wait('first', 'e0');
    await turn();
    expect(grants.order).to.deep.equal(['first/e0']);
    grants.order.length = 0;
    return grants;
  }

  context('when permits are free and no one waits', () => {
    it('grants at once, up to maxInFlight', async () => {
      const limiter = new InFlightLimiter({ maxInFlight: 2 });
      await limiter.acquire('a', 'e1');
      await limiter.acquire('a', 'e1');
      let third = false;
      void limiter.acquire('b', 'e2').then(() => (third = true));
      await turn();
      expect(third).to.equal(false);
      expect(limiter.inFlight).to.equal(2);
      expect(limiter.waiting).to.equal(1);
    });
  });

  context('when tenants have the default weight', () => {
    it('alternates between tenants, whatever number of endpoints and waiters each has', async () => {
      const grants = await fullLimiter();
      for (let e = 0; e < 100; e++) grants.wait('big', `e${e}`, 5);
      grants.wait('quiet', 'q1');
      await grants.release(4);
      expect(grants.order).to.deep.equal(['big/e0', 'quiet/q1', 'big/e1', 'big/e2']);
    });

    it('goes round a tenant\'s endpoints in turn, not one endpoint\'s queue first', async () => {
      const grants = await fullLimiter();
      grants.wait('a', 'e1', 3);
      grants.wait('a', 'e2', 1);
      grants.wait('a', 'e3', 2);
      await grants.release(6);
      expect(grants.order).to.deep.equal(['a/e1', 'a/e2', 'a/e3', 'a/e1', 'a/e3', 'a/e1']);
    });
  });

  context('when tenants have weights', () => {
    it('gives each tenant its weight in grants per turn', async () => {
      const grants = await fullLimiter({ heavy: 3 });
      grants.wait('heavy', 'h', 30);
      grants.wait('light', 'l', 30);
      await grants.release(40);
      const heavy = grants.order.filter((g) => g === 'heavy/h').length;
      expect(heavy).to.equal(30);
      expect(grants.order.slice(0, 8)).to.deep.equal(['heavy/h', 'heavy/h', 'heavy/h', 'light/l', 'heavy/h', 'heavy/h', 'heavy/h', 'light/l']);
    });

    it('grants a tenant that starts waiting a permit after at most W grants, W the sum of the waiting tenants\' weights', async () => {
      const weights = { a: 5, b: 3, c: 1 };
      const W = 5 + 3 + 1;
      // Arrive at every point of the busy tenants' turns: the bound holds wherever the turn stands.
      for (let offset = 0; offset < 2 * W; offset++) {
        const grants = await fullLimiter(weights);
        for (let e = 0; e < 50; e++) {
          grants.wait('a', `a${e}`, 4);
          grants.wait('b', `b${e}`, 4);
          grants.wait('c', `c${e}`, 4);
        }
        await grants.release(offset);
        const before = grants.order.length;
        grants.wait('quiet', 'q');
        await grants.release(W + 1);
        const waited = grants.order.indexOf('quiet/q', before) - before;
        expect(waited, `arriving after ${offset} grants`).to.be.within(0, W);
      }
    });
  });

  context('when options break their rule', () => {
    it('throws a ConfigError naming the key', () => {
      expect(() => new InFlightLimiter({ maxInFlight: 0 })).to.throw(ConfigError, /delivery.maxInFlight/);
      expect(() => new InFlightLimiter({ maxInFlight: 1, tenantWeights: { acme: 0 } })).to.throw(ConfigError, /delivery.tenantWeights.acme=0: must be an integer from 1 to 1000/);
    });
  });
});
