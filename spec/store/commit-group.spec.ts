import { expect } from 'chai';
import { CommitGroup, type MemberOutcome } from '../../lib/store/sqlite/commit-group.ts';

/**
 * A commit that runs members in order like the store does (each may throw alone)
 * and records each group; the flush runs when the test says (`flush()`), so
 * which calls share a group is decided by the test, not by timing.
 */
function harness(options: { maxOperations?: number; failWith?: () => unknown } = {}) {
  const groups: Array<{ size: number; access: string }> = [];
  const deferred: Array<() => void> = [];
  let failWith = options.failWith;
  const group = new CommitGroup({
    defer: (flush) => deferred.push(flush),
    ...(options.maxOperations === undefined ? {} : { maxOperations: options.maxOperations }),
    async commit(members, access) {
      groups.push({ size: members.length, access });
      if (failWith !== undefined) throw failWith();
      return members.map((run): MemberOutcome => {
        try {
          return { ok: true, value: run() };
        } catch (error) {
          return { ok: false, error };
        }
      });
    },
  });
  return {
    group,
    groups,
    flush: async () => {
      for (let next = deferred.shift(); next !== undefined; next = deferred.shift()) next();
      await group.settled();
    },
    pendingFlushes: () => deferred.length,
    stopFailing: () => {
      failWith = undefined;
    },
  };
}

describe('CommitGroup', () => {
  it('commits the calls made before its flush in one transaction, in order, each resolving with its own result', async () => {
    const h = harness();
    const order: string[] = [];
    const results = [
      h.group.add(() => (order.push('a'), 'A'), 'write'),
      h.group.add(() => (order.push('b'), 'B'), 'write'),
      h.group.add(() => (order.push('c'), 'C'), 'write'),
    ];
    expect(h.pendingFlushes()).to.equal(1);
    await h.flush();
    expect(await Promise.all(results)).to.deep.equal(['A', 'B', 'C']);
    expect(order).to.deep.equal(['a', 'b', 'c']);
    expect(h.groups).to.deep.equal([{ size: 3, access: 'write' }]);
  });

  it('resolves nobody before the group has committed', async () => {
    const h = harness();
    let resolved = false;
    void h.group.add(() => 1, 'write').then(() => {
      resolved = true;
    });
    await Promise.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(resolved).to.equal(false);
    await h.flush();
    expect(resolved).to.equal(true);
  });

  it('rejects only the member that threw; the others keep their results', async () => {
    const h = harness();
    const first = h.group.add(() => 'first', 'write');
    const failing = h.group.add(() => {
      throw new Error('constraint failed');
    }, 'write');
    const third = h.group.add(() => 'third', 'write');
    await h.flush();
    expect(await first).to.equal('first');
    expect(await third).to.equal('third');
    let caught: unknown;
    await failing.catch((error: unknown) => {
      caught = error;
    });
    expect(caught).to.be.an('error').with.property('message', 'constraint failed');
  });

  it('rejects every member of a group whose transaction failed, and commits the next group as usual', async () => {
    const h = harness({ failWith: () => new Error('database is locked') });
    const a = h.group.add(() => 'a', 'write');
    const b = h.group.add(() => 'b', 'write');
    const outcomes = Promise.allSettled([a, b]);
    await h.flush();
    const settled = await outcomes;
    expect(settled.map((s) => s.status)).to.deep.equal(['rejected', 'rejected']);
    expect(settled.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : ''))).to.deep.equal(['database is locked', 'database is locked']);
    h.stopFailing();
    const c = h.group.add(() => 'c', 'write');
    await h.flush();
    expect(await c).to.equal('c');
  });

  it('marks a group urgent when any member is (a lease renewal goes to the front of the lock queue)', async () => {
    const h = harness();
    const done = Promise.all([h.group.add(() => 1, 'write'), h.group.add(() => 2, 'urgent')]);
    await h.flush();
    await done;
    expect(h.groups).to.deep.equal([{ size: 2, access: 'urgent' }]);
  });

  it('splits at maxOperations: the overflow forms the next group, committed after it', async () => {
    const h = harness({ maxOperations: 2 });
    const done = Promise.all([1, 2, 3, 4, 5].map((n) => h.group.add(() => n, 'write')));
    await h.flush();
    expect(await done).to.deep.equal([1, 2, 3, 4, 5]);
    expect(h.groups.map((g) => g.size)).to.deep.equal([2, 2, 1]);
  });

  it('gathers the calls made while a group commits into the next group, handed over without waiting for the first (its wait for the lock counts from then)', async () => {
    const release: Array<() => void> = [];
    const sizes: number[] = [];
    const group = new CommitGroup({
      defer: (flush) => void Promise.resolve().then(flush),
      async commit(members) {
        sizes.push(members.length);
        // The first commit is slow: calls made meanwhile wait for the next group.
        if (sizes.length === 1) await new Promise<void>((resolve) => release.push(resolve));
        return members.map((run): MemberOutcome => ({ ok: true, value: run() }));
      },
    });
    const first = group.add(() => 'first', 'write');
    await new Promise((resolve) => setImmediate(resolve));
    const later = [group.add(() => 'x', 'write'), group.add(() => 'y', 'write'), group.add(() => 'z', 'write')];
    await new Promise((resolve) => setImmediate(resolve));
    // The second group is with `commit` while the first still is.
    expect(sizes).to.deep.equal([1, 3]);
    expect(await Promise.race([first, Promise.resolve('still committing')])).to.equal('still committing');
    release.shift()?.();
    expect(await first).to.equal('first');
    expect(await Promise.all(later)).to.deep.equal(['x', 'y', 'z']);
    await group.settled();
    expect(sizes).to.deep.equal([1, 3]);
  });

  it('settled() waits for what was added, including groups formed while it waits', async () => {
    const h = harness();
    const values: number[] = [];
    void h.group.add(() => values.push(1), 'write');
    void h.group.add(() => values.push(2), 'write');
    await h.group.settled();
    expect(values).to.deep.equal([1, 2]);
  });
});
