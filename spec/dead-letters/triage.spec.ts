import { expect } from 'chai';
import { canTriage, isTriageState, listedStates, replayableStates, triageOutcome } from '../../lib/store/triage.ts';
import type { TriageState } from '../../lib/model.ts';

describe('Dead-letter triage rules', () => {
  describe('canTriage', () => {
    it('lets an operator acknowledge or discard only open dead letters (new, acknowledged)', () => {
      const states: TriageState[] = ['new', 'acknowledged', 'replayed', 'discarded'];
      expect(states.map(canTriage)).to.deep.equal([true, true, false, false]);
    });
  });

  describe('listedStates', () => {
    it('lists the open ones by default, every state with includeReplayed, and exactly the state asked for', () => {
      expect(listedStates({})).to.deep.equal(['new', 'acknowledged']);
      expect(listedStates({ includeReplayed: true })).to.deep.equal(['new', 'acknowledged', 'replayed', 'discarded']);
      expect(listedStates({ state: 'discarded' })).to.deep.equal(['discarded']);
      expect(listedStates({ state: 'new', includeReplayed: true })).to.deep.equal(['new']);
    });
  });

  describe('replayableStates', () => {
    it('takes only open ones into a replay by filter: a state can narrow them, never add a closed one', () => {
      expect(replayableStates({})).to.deep.equal(['new', 'acknowledged']);
      expect(replayableStates({ state: 'acknowledged' })).to.deep.equal(['acknowledged']);
      expect(replayableStates({ state: 'discarded' })).to.deep.equal([]);
      expect(replayableStates({ state: 'replayed' })).to.deep.equal([]);
    });
  });

  describe('triageOutcome', () => {
    it('applies the open ids, skips the others with why, in the order given, each id once', () => {
      const found = new Map<string, TriageState>([
        ['dl_a', 'new'],
        ['dl_b', 'replayed'],
        ['dl_c', 'acknowledged'],
        ['dl_d', 'discarded'],
      ]);
      expect(triageOutcome(['dl_d', 'dl_a', 'dl_x', 'dl_b', 'dl_a', 'dl_c'], found)).to.deep.equal({
        applied: ['dl_a', 'dl_c'],
        skipped: [
          { id: 'dl_d', reason: 'discarded' },
          { id: 'dl_x', reason: 'unknown' },
          { id: 'dl_b', reason: 'replayed' },
        ],
      });
    });
  });

  describe('isTriageState', () => {
    it('knows the four states and nothing else', () => {
      expect(['new', 'acknowledged', 'replayed', 'discarded'].every(isTriageState)).to.equal(true);
      expect(['', 'NEW', 'open', 1, null].some(isTriageState)).to.equal(false);
    });
  });
});
