import { expect } from 'chai';
import { ErrorCode } from '../../lib/errors.ts';
import { generateSecret, secretKey } from '../../lib/signing/secret.ts';
import { sequenceSignatureHeader, signatureHeader } from '../../lib/signing/signature.ts';
import { SigningPool } from '../../lib/signing/signing-pool.ts';
import type { SignRequest } from '../../lib/signing/signing-pool.ts';

const KiB = 1024;
const TIMESTAMP = 1_767_225_600;

function requests(count: number, bodyBytes: number, keys: readonly Buffer[]): SignRequest[] {
  return Array.from({ length: count }, (_, i) => ({
    keys,
    id: `evt_${i}`,
    timestampSec: TIMESTAMP + i,
    // Distinct bodies, exactly bodyBytes long.
    body: JSON.stringify({ i, pad: '' }).slice(0, -2).padEnd(bodyBytes - 2, 'x') + '"}',
  }));
}

function inline(request: SignRequest): string {
  return signatureHeader(request.keys, request.id, request.timestampSec, request.body);
}

describe('SigningPool', () => {
  const keys = [secretKey(generateSecret()), secretKey(generateSecret())];
  let pool: SigningPool;

  beforeEach(() => {
    pool = new SigningPool({ threads: 2 });
  });

  afterEach(async () => {
    await pool.close();
  });

  context('when 200 requests of 1 KiB are made in one turn', () => {
    it('returns exactly the inline signatures, batched into tasks of at most 64', async () => {
      const batch = requests(200, KiB, keys);
      expect(batch[0]!.body).to.have.length(KiB);
      const headers = await Promise.all(batch.map((r) => pool.sign(r)));
      expect(headers).to.deep.equal(batch.map(inline));
      // 200 KiB is above the 16 KiB inline limit: four tasks (64 + 64 + 64 + 8).
      expect(pool.stats).to.deep.equal({ inline: 0, pooled: 200, tasks: 4 });
    });
  });

  context('when requests carry sequence numbers, mixed with some that do not', () => {
    const expected = (r: SignRequest) => ({
      signature: inline(r),
      sequenceSignature: r.sequence === undefined || r.sequence === null ? null : sequenceSignatureHeader(r.keys, r.id, r.timestampSec, r.sequence),
    });
    const numbered = (count: number, bytes: number): SignRequest[] =>
      requests(count, bytes, keys).map((r, i) => (i % 3 === 0 ? { ...r, sequence: null } : { ...r, sequence: i + 1 }));

    it('signs each sequence with the body, in the worker threads, each request getting its own pair', async () => {
      const batch = numbered(100, KiB);
      expect(await Promise.all(batch.map((r) => pool.signRequest(r)))).to.deep.equal(batch.map(expected));
      expect(pool.stats.pooled).to.equal(100);
    });

    it('signs them inline alike', async () => {
      const batch = numbered(6, KiB);
      expect(await Promise.all(batch.map((r) => pool.signRequest(r)))).to.deep.equal(batch.map(expected));
      expect(pool.stats).to.deep.equal({ inline: 6, pooled: 0, tasks: 0 });
    });

    it('rejects a request with a bad sequence alone, naming sequence', async () => {
      const [good, bad] = numbered(3, KiB).slice(1);
      const results = await Promise.allSettled([pool.signRequest(good!), pool.signRequest({ ...bad!, sequence: 0 })]);
      expect(results[0]).to.deep.equal({ status: 'fulfilled', value: expected(good!) });
      expect(results[1]?.status === 'rejected' && (results[1].reason as { field?: string }).field).to.equal('sequence');
    });
  });

  context('when a flush is small', () => {
    it('signs it inline, without a task', async () => {
      const batch = requests(8, KiB, keys);
      const headers = await Promise.all(batch.map((r) => pool.sign(r)));
      expect(headers).to.deep.equal(batch.map(inline));
      expect(pool.stats).to.deep.equal({ inline: 8, pooled: 0, tasks: 0 });
    });

    it('makes no worker pool: one is made at the first flush too large to sign inline', async () => {
      expect(pool.started).to.equal(false);
      await Promise.all(requests(8, KiB, keys).map((r) => pool.sign(r)));
      expect(pool.started).to.equal(false);
      await Promise.all(requests(40, KiB, keys).map((r) => pool.sign(r)));
      expect(pool.started).to.equal(true);
    });

    it('flushes each turn separately', async () => {
      const [first, second] = requests(2, KiB, keys);
      expect(await pool.sign(first!)).to.equal(inline(first!));
      expect(await pool.sign(second!)).to.equal(inline(second!));
      expect(pool.stats).to.deep.equal({ inline: 2, pooled: 0, tasks: 0 });
    });
  });

  context('when a flush is large', () => {
    it('sends 40 × 64 KiB to the pool in batches sized by bytes', async () => {
      const batch = requests(40, 64 * KiB, keys);
      const headers = await Promise.all(batch.map((r) => pool.sign(r)));
      expect(headers).to.deep.equal(batch.map(inline));
      // 1 MiB per task: 16 bodies, 16, then 8.
      expect(pool.stats).to.deep.equal({ inline: 0, pooled: 40, tasks: 3 });
    });

    it('sends a single body larger than batchMaxBytes alone', async () => {
      const small = new SigningPool({ batchMaxBytes: 4 * KiB, inlineMaxBytes: 0 });
      try {
        const batch = [...requests(1, 10 * KiB, keys), ...requests(2, KiB, keys)];
        const headers = await Promise.all(batch.map((r) => small.sign(r)));
        expect(headers).to.deep.equal(batch.map(inline));
        expect(small.stats).to.deep.equal({ inline: 0, pooled: 3, tasks: 2 });
      } finally {
        await small.close();
      }
    });
  });

  context('when a request is invalid', () => {
    it('rejects that request alone', async () => {
      const [good] = requests(1, KiB, keys);
      const results = await Promise.allSettled([pool.sign(good!), pool.sign({ ...good!, keys: [] })]);
      expect(results[0]).to.deep.equal({ status: 'fulfilled', value: inline(good!) });
      expect(results[1]).to.have.nested.property('reason.code', ErrorCode.INVALID_INPUT);
    });
  });

  context('when closed', () => {
    it('rejects later sign() calls with ClosedError', async () => {
      await pool.close();
      const [request] = requests(1, KiB, keys);
      const error: unknown = await pool.sign(request!).then(() => expect.fail('signed after close'), (e: unknown) => e);
      expect(error).to.have.property('code', ErrorCode.CLOSED);
    });

    it('rejects requests still queued in the turn it was closed', async () => {
      const [request] = requests(1, KiB, keys);
      const pending = pool.sign(request!);
      const closing = pool.close();
      const error: unknown = await pending.then(() => expect.fail('signed after close'), (e: unknown) => e);
      expect(error).to.have.property('code', ErrorCode.CLOSED);
      await closing;
    });

    it('rejects what the pool was still signing and leaves no handles', async () => {
      const threadHandles = () => process.getActiveResourcesInfo().filter((kind) => /worker|messageport/i.test(kind));
      const batch = requests(40, 8 * KiB, keys);
      const settled = Promise.allSettled(batch.map((r) => pool.sign(r)));
      await new Promise((resolve) => setImmediate(resolve));
      // A task in flight holds a ref'd port to its worker.
      expect(threadHandles()).to.not.deep.equal([]);
      await pool.close();
      const results = await settled;
      results.forEach((result, i) => {
        // A task may finish before close() reaches it; otherwise it rejects as closed.
        if (result.status === 'fulfilled') expect(result.value).to.equal(inline(batch[i]!));
        else expect(result.reason).to.have.property('code', ErrorCode.CLOSED);
      });
      expect(threadHandles()).to.deep.equal([]);
    });
  });

  context('when options are invalid', () => {
    it('names the option and the value', () => {
      expect(() => new SigningPool({ threads: 0 })).to.throw(/threads=0/).with.property('code', ErrorCode.INVALID_CONFIG);
      expect(() => new SigningPool({ batchMaxCount: 2.5 })).to.throw(/batchMaxCount=2.5/);
      expect(() => new SigningPool({ inlineMaxBytes: -1 })).to.throw(/inlineMaxBytes=-1/);
    });
  });
});
