/**
 * Group commit: the writes issued while a group waits to run share one
 * transaction, each in a savepoint of its own.
 *
 * A SQLite commit costs mostly the pages it writes to the WAL, and the same
 * page written by two transactions is written twice. The engine's writes touch
 * the same pages again and again (claims and settles of deliveries of many
 * endpoints, whose rows sit side by side), so one commit for several of them
 * writes each page once. This pays when writes arrive while others run: on the
 * store's own thread (`SqliteStoreThread`), the calls the engine makes while a
 * transaction runs queue up as messages and form the next group.
 *
 *   no open group ──add()──► open group (its flush deferred) ──flush──► handed to `commit`
 *   add() while a group is open: joins it (up to `maxOperations`; past that, a new group opens)
 *
 * A group handed to `commit` is closed: later calls open the next one. Groups
 * are handed over in the order they opened and not held back for each other
 * (the lock waiter behind `commit` keeps them in order), so a call's wait for
 * the lock counts from its own group's hand-over, as a call's alone would.
 *
 * Each member runs in order in its own savepoint: one that throws is rolled
 * back alone and rejects alone; the others commit. A member resolves only once
 * its group has committed, so whatever a caller is told is on disk (as far as
 * the connection's `synchronous` setting promises). A group whose transaction
 * fails as a whole (busy past the wait limit, an I/O error at commit) rejects
 * every member, and none of it was written.
 */
import type { LockAccess } from './lock-waiter.ts';

/** What one member of a group came to. */
export type MemberOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export interface CommitGroupOptions {
  /**
   * Runs every member in one transaction, in order, each in its own savepoint,
   * and gives each one's outcome (same order). Rejects when the transaction as a
   * whole failed: then nothing of it was written.
   */
  commit(members: ReadonlyArray<() => unknown>, access: Exclude<LockAccess, 'read'>): Promise<readonly MemberOutcome[]>;
  /**
   * Runs the flush later; what is added before it runs joins the group.
   * @default setImmediate: the end of this turn of the event loop (every message read in it)
   */
  readonly defer?: (flush: () => void) => void;
  /** Most members in one group (one transaction). @default 256 */
  readonly maxOperations?: number;
}

interface Member {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

interface Group {
  readonly members: Member[];
  urgent: boolean;
}

const DEFAULTS = Object.freeze({
  defer: (flush: () => void) => void setImmediate(flush),
  maxOperations: 256,
});

export class CommitGroup {
  readonly #commit: CommitGroupOptions['commit'];
  readonly #defer: (flush: () => void) => void;
  readonly #maxOperations: number;
  /** Groups opened and not yet handed to `commit`, oldest first; only the last one takes new members. */
  readonly #open: Group[] = [];
  /** Groups handed to `commit` and not yet settled. */
  readonly #committing = new Set<Promise<void>>();

  constructor(options: CommitGroupOptions) {
    this.#commit = options.commit;
    this.#defer = options.defer ?? DEFAULTS.defer;
    this.#maxOperations = Math.max(1, Math.floor(options.maxOperations ?? DEFAULTS.maxOperations));
  }

  /** Runs `run` in the open group's transaction; resolves with its result once that group has committed. */
  add<T>(run: () => T, access: Exclude<LockAccess, 'read'>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let group = this.#open.at(-1);
      if (group === undefined || group.members.length >= this.#maxOperations) {
        group = { members: [], urgent: false };
        this.#open.push(group);
        if (this.#open.length === 1) this.#defer(() => this.#flush());
      }
      group.members.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (access === 'urgent') group.urgent = true;
    });
  }

  /** Resolves once every member added so far has been committed or rejected. */
  async settled(): Promise<void> {
    this.#flush();
    while (this.#committing.size > 0) await Promise.all(this.#committing);
  }

  /** Hands every open group to `commit`, oldest first. */
  #flush(): void {
    for (let group = this.#open.shift(); group !== undefined; group = this.#open.shift()) {
      const committing = this.#commitOne(group);
      this.#committing.add(committing);
      void committing.finally(() => this.#committing.delete(committing));
    }
  }

  async #commitOne(group: Group): Promise<void> {
    const { members } = group;
    let outcomes: readonly MemberOutcome[];
    try {
      outcomes = await this.#commit(
        members.map((member) => member.run),
        group.urgent ? 'urgent' : 'write',
      );
    } catch (error) {
      for (const member of members) member.reject(error);
      return;
    }
    members.forEach((member, i) => {
      const outcome = outcomes[i];
      if (outcome === undefined) member.reject(new Error('commit group: no outcome for a member'));
      else if (outcome.ok) member.resolve(outcome.value);
      else member.reject(outcome.error);
    });
  }
}
