import { expect } from 'chai';
import { isUsableToken, ResumeTokenKeeper } from '../../../lib/store/mongo/resume-tokens.ts';
import type { TokenDocuments } from '../../../lib/store/mongo/resume-tokens.ts';

class FakeDocuments implements TokenDocuments {
  readonly docs = new Map<string, { token: unknown; savedAt: number }>();
  readonly log: string[] = [];
  async read(id: string) {
    return this.docs.get(id)?.token;
  }
  async write(id: string, token: unknown, savedAt: number) {
    this.log.push(`write ${JSON.stringify(token)} @${savedAt}`);
    this.docs.set(id, { token, savedAt });
  }
  async remove(id: string) {
    this.log.push('remove');
    this.docs.delete(id);
  }
}

const A = { _data: '826A' };
const B = { _data: '826B' };
const C = { _data: '826C' };

describe('ResumeTokenKeeper', () => {
  let docs: FakeDocuments;
  let keeper: ResumeTokenKeeper;

  beforeEach(() => {
    docs = new FakeDocuments();
    keeper = new ResumeTokenKeeper(docs, { key: 'node-1', saveIntervalMs: 1_000 });
  });

  it('keeps its token in meta under resume_token:<key>', async () => {
    expect(keeper.documentId).to.equal('resume_token:node-1');
    await keeper.offer(A, 0);
    expect(docs.docs.get('resume_token:node-1')).to.deep.equal({ token: A, savedAt: 0 });
  });

  it('loads the stored token, and nothing from an empty or unusable document', async () => {
    expect(await keeper.load()).to.equal(undefined);
    docs.docs.set(keeper.documentId, { token: 'garbage', savedAt: 0 });
    expect(await keeper.load()).to.equal(undefined);
    docs.docs.set(keeper.documentId, { token: A, savedAt: 0 });
    expect(await keeper.load()).to.deep.equal(A);
    expect(keeper.latest).to.deep.equal(A);
    // Offering the loaded token again writes nothing.
    expect(await keeper.offer({ _data: '826A' }, 5_000)).to.equal(false);
    expect(docs.log).to.deep.equal([]);
  });

  it('saves a changed token at most once per interval, and the latest on flush', async () => {
    expect(await keeper.offer(null, 0)).to.equal(false);
    expect(await keeper.offer(A, 0)).to.equal(true);
    expect(await keeper.offer(B, 999)).to.equal(false);
    expect(await keeper.offer(C, 1_000)).to.equal(true);
    expect(await keeper.offer(C, 1_200)).to.equal(false);
    expect(await keeper.offer(A, 1_500)).to.equal(false);
    await keeper.flush(5_600);
    await keeper.flush(5_700);
    expect(docs.log).to.deep.equal([
      `write ${JSON.stringify(A)} @0`,
      `write ${JSON.stringify(C)} @1000`,
      `write ${JSON.stringify(A)} @5600`,
    ]);
  });

  it('forgets a lost token: removed from meta, not flushed again', async () => {
    await keeper.offer(A, 0);
    await keeper.offer(B, 10);
    await keeper.forget();
    await keeper.flush(20);
    expect(docs.docs.has(keeper.documentId)).to.equal(false);
    expect(keeper.latest).to.equal(undefined);
    expect(docs.log.at(-1)).to.equal('remove');
  });

  it('takes only documents as tokens', () => {
    expect([isUsableToken(A), isUsableToken(null), isUsableToken('x'), isUsableToken([A])]).to.deep.equal([true, false, false, false]);
  });
});
