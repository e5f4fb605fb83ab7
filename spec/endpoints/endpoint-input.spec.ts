import { expect } from 'chai';
import { ValidationError } from '../../lib/errors.ts';
import { DeliveryMode } from '../../lib/model.ts';
import { validateEndpointChanges, validateNewEndpoint } from '../../lib/endpoints/endpoint-input.ts';
import type { EndpointDefaults } from '../../lib/endpoints/endpoint-input.ts';

const DEFAULTS: EndpointDefaults = { timeoutMs: 10_000, concurrency: 4, retry: { preset: 'default' }, adaptiveConcurrency: false };

const INJECTED = 'http://host/a\r\nX-Injected: 1';
const RULE = 'must not contain control characters or surrounding spaces (found "\\r" at index 13)';

function thrown(run: () => unknown): ValidationError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  return expect.fail('expected a ValidationError');
}

describe('endpoint input', () => {
  describe('validateNewEndpoint', () => {
    context('when the url holds CR LF', () => {
      it('refuses it with a ValidationError naming url and the rule', () => {
        const error = thrown(() => validateNewEndpoint({ tenantId: 'acme', url: INJECTED }, DEFAULTS));
        expect(error.field).to.equal('url');
        expect(error.rule).to.equal(RULE);
      });
    });

    context('when the url has surrounding spaces', () => {
      it('refuses it rather than trimming it', () => {
        const error = thrown(() => validateNewEndpoint({ tenantId: 'acme', url: '  https://hooks.example/in' }, DEFAULTS));
        expect(error.field).to.equal('url');
        expect(error.rule).to.match(/^must not contain control characters or surrounding spaces \(found " " at index 0\)$/);
      });
    });

    context('when timeoutMs is out of range', () => {
      it('names the range in milliseconds and in human units, showing the value', () => {
        const error = thrown(() => validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in', timeoutMs: 31_000 }, DEFAULTS));
        expect(error.field).to.equal('timeoutMs');
        expect(error.rule).to.equal('must be an integer of milliseconds from 1000 (1 s) to 30000 (30 s) (got 31000)');
      });
    });

    context('when the url is acceptable', () => {
      it('keeps the normalised URL, not the raw string', () => {
        const fields = validateNewEndpoint({ tenantId: 'acme', url: 'HTTPS://Hooks.Example:443' }, DEFAULTS);
        expect(fields).to.deep.include({ tenantId: 'acme', url: 'https://hooks.example/', mode: DeliveryMode.AT_LEAST_ONCE });
      });
    });
  });

  describe('ordering', () => {
    it('defaults to none, takes fifo, and refuses anything else naming the field and the values allowed', () => {
      expect(validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/' }, DEFAULTS).ordering).to.equal('none');
      expect(validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/', ordering: 'fifo' }, DEFAULTS).ordering).to.equal('fifo');
      expect(validateEndpointChanges({ ordering: 'none' })).to.deep.equal({ ordering: 'none' });
      for (const bad of ['FIFO', 'lifo', true, null]) {
        const error = thrown(() => validateEndpointChanges({ ordering: bad }));
        expect(error.field).to.equal('ordering');
        expect(error.rule).to.equal(`must be one of none, fifo (got ${JSON.stringify(bad)})`);
      }
    });
  });

  describe('validateEndpointChanges (PATCH)', () => {
    context('when the url holds CR LF', () => {
      it('refuses it with a ValidationError naming url and the rule', () => {
        const error = thrown(() => validateEndpointChanges({ url: INJECTED }));
        expect(error.field).to.equal('url');
        expect(error.rule).to.equal(RULE);
      });
    });

    context('when the url holds a NUL or DEL', () => {
      it('refuses it', () => {
        expect(thrown(() => validateEndpointChanges({ url: 'https://hooks.example/\u0000' })).field).to.equal('url');
        expect(thrown(() => validateEndpointChanges({ url: 'https://hooks.example/\u007f' })).field).to.equal('url');
      });
    });

    context('when the url is acceptable', () => {
      it('returns the normalised URL', () => {
        expect(validateEndpointChanges({ url: 'http://hooks.example/a b' })).to.deep.equal({ url: 'http://hooks.example/a%20b' });
      });
    });
  });

  describe('rateLimit', () => {
    const create = (rateLimit: unknown): ReturnType<typeof validateNewEndpoint> =>
      validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in', rateLimit }, DEFAULTS);

    context('when it is left out or null', () => {
      it('creates an endpoint without a limit', () => {
        expect(validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in' }, DEFAULTS)).to.not.have.property('rateLimit');
        expect(create(null)).to.not.have.property('rateLimit');
      });
    });

    context('when the burst is left out', () => {
      it('makes it a second of tokens, at least one', () => {
        expect(create({ perSecond: 10 }).rateLimit).to.deep.equal({ perSecond: 10, burst: 10 });
        expect(create({ perSecond: 2.5 }).rateLimit).to.deep.equal({ perSecond: 2.5, burst: 3 });
        expect(create({ perSecond: 0.01 }).rateLimit).to.deep.equal({ perSecond: 0.01, burst: 1 });
        expect(create({ perSecond: 10_000 }).rateLimit).to.deep.equal({ perSecond: 10_000, burst: 10_000 });
      });
    });

    context('when a burst is given', () => {
      it('keeps it', () => {
        expect(create({ perSecond: 5, burst: 1 }).rateLimit).to.deep.equal({ perSecond: 5, burst: 1 });
        expect(create({ perSecond: 0.5, burst: 10_000 }).rateLimit).to.deep.equal({ perSecond: 0.5, burst: 10_000 });
      });
    });

    context('when it breaks a rule', () => {
      it('names the field and the rule, showing the value', () => {
        const cases: Array<[unknown, string, string]> = [
          [{ perSecond: 0.001 }, 'rateLimit.perSecond', 'must be a number from 0.01 to 10000 (got 0.001)'],
          [{ perSecond: 10_001 }, 'rateLimit.perSecond', 'must be a number from 0.01 to 10000 (got 10001)'],
          [{ perSecond: '10' }, 'rateLimit.perSecond', 'must be a number from 0.01 to 10000 (got "10")'],
          [{ burst: 5 }, 'rateLimit.perSecond', 'must be a number from 0.01 to 10000 (got null)'],
          [{ perSecond: 10, burst: 0 }, 'rateLimit.burst', 'must be an integer from 1 to 10000 (got 0)'],
          [{ perSecond: 10, burst: 1.5 }, 'rateLimit.burst', 'must be an integer from 1 to 10000 (got 1.5)'],
          [{ perSecond: 10, burst: 10_001 }, 'rateLimit.burst', 'must be an integer from 1 to 10000 (got 10001)'],
          [{ perSecond: 10, window: 'PT1S' }, 'rateLimit.window', 'is not a known field (allowed: perSecond, burst)'],
          ['10/s', 'rateLimit', 'must be an object {"perSecond", "burst"?}, or null for no limit (got "10/s")'],
          [[10], 'rateLimit', 'must be an object {"perSecond", "burst"?}, or null for no limit (got [10])'],
        ];
        for (const [value, field, rule] of cases) {
          const error = thrown(() => create(value));
          expect([error.field, error.rule], JSON.stringify(value)).to.deep.equal([field, rule]);
          expect(thrown(() => validateEndpointChanges({ rateLimit: value })).field).to.equal(field);
        }
      });
    });

    context('when patched', () => {
      it('replaces the limit whole (the burst defaults again), or lifts it with null', () => {
        expect(validateEndpointChanges({ rateLimit: { perSecond: 3 } })).to.deep.equal({ rateLimit: { perSecond: 3, burst: 3 } });
        expect(validateEndpointChanges({ rateLimit: null })).to.deep.equal({ rateLimit: null });
        expect(validateEndpointChanges({ concurrency: 2 })).to.not.have.property('rateLimit');
      });
    });
  });

  describe('adaptiveConcurrency', () => {
    const create = (adaptiveConcurrency: unknown, defaults: EndpointDefaults = DEFAULTS): ReturnType<typeof validateNewEndpoint> =>
      validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in', adaptiveConcurrency }, defaults);
    const ADAPTIVE_BY_DEFAULT: EndpointDefaults = { ...DEFAULTS, adaptiveConcurrency: true };

    context('when it is left out', () => {
      it('is fixed unless the node makes new endpoints adaptive, then adaptive with the defaults', () => {
        expect(validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in' }, DEFAULTS)).to.not.have.property('adaptiveConcurrency');
        expect(validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in' }, ADAPTIVE_BY_DEFAULT).adaptiveConcurrency).to.deep.equal({
          initial: 1,
          targetLatencyMs: 2_000,
        });
      });
    });

    context('when it is null', () => {
      it('is fixed, whatever the node default', () => {
        expect(create(null)).to.not.have.property('adaptiveConcurrency');
        expect(create(null, ADAPTIVE_BY_DEFAULT)).to.not.have.property('adaptiveConcurrency');
      });
    });

    context('when it is given', () => {
      it('fills in what is left out with the defaults', () => {
        expect(create({}).adaptiveConcurrency).to.deep.equal({ initial: 1, targetLatencyMs: 2_000 });
        expect(create({ initial: 8 }).adaptiveConcurrency).to.deep.equal({ initial: 8, targetLatencyMs: 2_000 });
        expect(create({ initial: 256, targetLatencyMs: 30_000 }).adaptiveConcurrency).to.deep.equal({ initial: 256, targetLatencyMs: 30_000 });
      });
    });

    context('when it breaks a rule', () => {
      it('names the field and the rule, showing the value', () => {
        const shape = 'must be an object {"initial"?, "targetLatencyMs"?} ({} for the defaults), or null for a fixed concurrency';
        const cases: Array<[unknown, string, string]> = [
          [{ initial: 0 }, 'adaptiveConcurrency.initial', 'must be an integer from 1 to 256 (got 0)'],
          [{ initial: 257 }, 'adaptiveConcurrency.initial', 'must be an integer from 1 to 256 (got 257)'],
          [{ initial: 2.5 }, 'adaptiveConcurrency.initial', 'must be an integer from 1 to 256 (got 2.5)'],
          [{ targetLatencyMs: 0 }, 'adaptiveConcurrency.targetLatencyMs', 'must be an integer from 1 to 30000 (got 0)'],
          [{ targetLatencyMs: '1s' }, 'adaptiveConcurrency.targetLatencyMs', 'must be an integer from 1 to 30000 (got "1s")'],
          [{ max: 10 }, 'adaptiveConcurrency.max', 'is not a known field (allowed: initial, targetLatencyMs)'],
          [true, 'adaptiveConcurrency', `${shape} (got true)`],
          ['adaptive', 'adaptiveConcurrency', `${shape} (got "adaptive")`],
        ];
        for (const [value, field, rule] of cases) {
          const error = thrown(() => create(value));
          expect([error.field, error.rule], JSON.stringify(value)).to.deep.equal([field, rule]);
          expect(thrown(() => validateEndpointChanges({ adaptiveConcurrency: value })).field).to.equal(field);
        }
      });
    });

    context('when patched', () => {
      it('replaces the settings whole (defaults filled in again), or makes it fixed with null', () => {
        expect(validateEndpointChanges({ adaptiveConcurrency: { targetLatencyMs: 300 } })).to.deep.equal({
          adaptiveConcurrency: { initial: 1, targetLatencyMs: 300 },
        });
        expect(validateEndpointChanges({ adaptiveConcurrency: null })).to.deep.equal({ adaptiveConcurrency: null });
        expect(validateEndpointChanges({ concurrency: 2 })).to.not.have.property('adaptiveConcurrency');
      });
    });
  });
});
