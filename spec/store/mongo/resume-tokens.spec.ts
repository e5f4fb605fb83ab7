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

  it('saves tokens of empty batches only at the idle pace, unless a change before them is not saved yet', async () => {
    const idle = new ResumeTokenKeeper(docs, { key: 'node-1', saveIntervalMs: 1_000, idleSaveIntervalMs: 600_000 });
    expect(await idle.offer(A, 0, true)).to.equal(true);
    // Each save is itself a write the stream sees: the next empty batch brings a new token.
    expect(await idle.offer(B, 1_000, true)).to.equal(false);
    expect(await idle.offer(C, 599_999, true)).to.equal(false);
    const D = { _data: '826D' };
    const E = { _data: '826E' };
    expect(await idle.offer(D, 600_000, true)).to.equal(true);
    // A change in between: its token goes at the busy pace, even if offered again from an empty batch.
    expect(await idle.offer(B, 600_500, false)).to.equal(false);
    expect(await idle.offer(C, 601_000, true)).to.equal(true);
    expect(await idle.offer(E, 602_000, true)).to.equal(false);
  });

  it('deletes other keys\' stale documents when it loads, never its own', async () => {
    const pruned: Array<[number, string]> = [];
    const withPrune = Object.assign(docs, { prune: async (before: number, keep: string) => void pruned.push([before, keep]) });
    const keeperWithPrune = new ResumeTokenKeeper(withPrune, { key: 'node-1', saveIntervalMs: 1_000, staleAfterMs: 7_000 });
    await keeperWithPrune.load(10_000);
    expect(pruned).to.deep.equal([[3_000, 'resume_token:node-1']]);
    await keeperWithPrune.load();
    expect(pruned, 'no time given: nothing pruned').to.have.length(1);
  });

  it('takes only documents as tokens', () => {
    expect([isUsableToken(A), isUsableToken(null), isUsableToken('x'), isUsableToken([A])]).to.deep.equal([true, false, false, false]);
  });
});
