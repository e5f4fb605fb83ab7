import { expect } from 'chai';
import {
  failureGroupsLimit,
  failureSample,
  mergeFailureGroups,
  SAMPLE_BODY_CHARS,
  withSamples,
  type FailureGroupCount,
} from '../../lib/store/failure-groups.ts';
import { validateFailureGroupInput } from '../../lib/dead-letters/failure-group-input.ts';
import { ValidationError } from '../../lib/errors.ts';
import type { Outcome } from '../../lib/model.ts';

const count = (endpointId: string, kind: string, n: number, firstSeen: number, lastSeen: number): FailureGroupCount => ({
  endpointId,
  tenantId: 'acme',
  kind,
  count: n,
  firstSeen,
  lastSeen,
});

describe('mergeFailureGroups', () => {
  context('when a group has retrying deliveries and dead letters', () => {
    it('adds the counts, spans both sides\' times, and samples the side with the latest failure', () => {
      const [group] = mergeFailureGroups([count('ep_1', 'timeout', 1_200, 100, 900)], [count('ep_1', 'timeout', 30, 50, 950)], 10);
      expect(group).to.deep.equal({
        endpointId: 'ep_1',
        tenantId: 'acme',
        kind: 'timeout',
        count: { retrying: 1_200, dead: 30, total: 1_230 },
        firstSeen: 50,
        lastSeen: 950,
        sampleFrom: 'dead',
      });
      expect(mergeFailureGroups([count('ep_1', 'timeout', 1, 100, 990)], [count('ep_1', 'timeout', 1, 50, 950)], 10)[0]?.sampleFrom).to.equal('retrying');
    });
  });

  context('when there are more groups than the limit', () => {
    it('keeps the largest, then the latest, then by endpoint and kind', () => {
      const groups = mergeFailureGroups(
        [count('ep_2', 'dns', 5, 0, 10), count('ep_1', 'http-503', 5, 0, 20), count('ep_3', 'tls', 1, 0, 99)],
        [count('ep_1', 'dns', 5, 0, 10), count('ep_9', 'redirect', 9, 0, 1)],
        4,
      );
      expect(groups.map((g) => `${g.endpointId}/${g.kind}`)).to.deep.equal(['ep_9/redirect', 'ep_1/http-503', 'ep_1/dns', 'ep_2/dns']);
    });
  });

  context('when a driver hands counts and times back as strings (bigint columns)', () => {
    it('reads them as numbers', () => {
      const raw = { ...count('ep_1', 'dns', 0, 0, 0), count: '3', firstSeen: '5', lastSeen: '8' } as unknown as FailureGroupCount;
      expect(mergeFailureGroups([raw], [], 1)[0]).to.deep.include({ count: { retrying: 3, dead: 0, total: 3 }, firstSeen: 5, lastSeen: 8 });
    });
  });
});

describe('failureGroupsLimit', () => {
  it('defaults to 100 and keeps a limit within 1 and 1 000', () => {
    expect([{}, { limit: 0 }, { limit: 7.9 }, { limit: 5_000 }, { limit: Number.NaN }].map((f) => failureGroupsLimit(f))).to.deep.equal([100, 1, 7, 1_000, 100]);
  });
});

describe('failureSample', () => {
  it('keeps a response\'s status and the first bytes of its body, and an error\'s summary', () => {
    const long: Outcome = { kind: 'response', status: 503, location: null, retryAfter: null, body: 'x'.repeat(1_000) };
    expect(failureSample(long)).to.deep.equal({ summary: 'HTTP 503', status: 503, body: 'x'.repeat(SAMPLE_BODY_CHARS) });
    expect(failureSample({ kind: 'timeout', timeoutMs: 5_000 })).to.deep.equal({ summary: 'timeout after 5 s', status: null, body: null });
  });
});

describe('withSamples', () => {
  it('asks the store for each group\'s latest outcome on the side named, and gives none when it is gone', async () => {
    const groups = mergeFailureGroups([count('ep_1', 'timeout', 2, 0, 5)], [count('ep_2', 'dns', 1, 0, 3)], 10);
    const asked: string[] = [];
    const sampled = await withSamples(groups, async (source, key) => {
      asked.push(`${source}:${key.endpointId}/${key.kind}`);
      return key.kind === 'timeout' ? { kind: 'timeout', timeoutMs: 10 } : undefined;
    });
    expect(asked).to.deep.equal(['retrying:ep_1/timeout', 'dead:ep_2/dns']);
    expect(sampled.map((g) => g.sample)).to.deep.equal([{ summary: 'timeout after 10 ms', status: null, body: null }, null]);
    expect(sampled[0]).to.not.have.property('sampleFrom');
  });
});

describe('validateFailureGroupInput', () => {
  it('takes {endpointId, kind}', () => {
    expect(validateFailureGroupInput({ endpointId: 'ep_1', kind: 'http-503' })).to.deep.equal({ endpointId: 'ep_1', kind: 'http-503' });
  });

  it('names the field and the rule it broke', () => {
    const cases: Array<[unknown, string]> = [
      [null, 'body'],
      [['ep_1'], 'body'],
      [{ kind: 'dns' }, 'endpointId'],
      [{ endpointId: ' ', kind: 'dns' }, 'endpointId'],
      [{ endpointId: 'ep_1' }, 'kind'],
      [{ endpointId: 'ep_1', kind: 'HTTP 503' }, 'kind'],
      [{ endpointId: 'ep_1', kind: 'dns', tenantId: 'acme' }, 'tenantId'],
    ];
    for (const [input, field] of cases) {
      try {
        validateFailureGroupInput(input);
        expect.fail(`accepted ${JSON.stringify(input)}`);
      } catch (error) {
        expect(error, JSON.stringify(input)).to.be.instanceOf(ValidationError);
        expect((error as ValidationError).field, JSON.stringify(input)).to.equal(field);
      }
    }
  });
});
