import { expect } from 'chai';
import { TRIAGE_LIMITS, validateBulkTriageInput, validateTriageInput } from '../../lib/dead-letters/triage-input.ts';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';

/** Runs `fn`, expects a ValidationError, and returns it. */
function invalid(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    expect((error as ValidationError).code).to.equal(ErrorCode.INVALID_INPUT);
    return error as ValidationError;
  }
  expect.fail('expected a ValidationError');
}

describe('Triage input', () => {
  context('when note and by are given', () => {
    it('keeps them trimmed; a note may span lines', () => {
      expect(validateTriageInput({ note: '  consumer fixed\nreplay after 18:00 ', by: ' alice@example.com ' })).to.deep.equal({
        note: 'consumer fixed\nreplay after 18:00',
        by: 'alice@example.com',
      });
      expect(validateBulkTriageInput({ ids: ['dl_1', 'dl_2'], note: 'noise', by: 'bob' })).to.deep.equal({ ids: ['dl_1', 'dl_2'], note: 'noise', by: 'bob' });
    });

    it('takes a note of exactly the longest length, counted in characters', () => {
      const note = 'é'.repeat(TRIAGE_LIMITS.noteMaxChars);
      expect(validateTriageInput({ note, by: 'a' }).note).to.equal(note);
    });
  });

  context('when a field breaks its rule', () => {
    const cases: ReadonlyArray<{ name: string; input: unknown; field: string; rule: RegExp }> = [
      { name: 'no body object', input: ['note'], field: 'body', rule: /JSON object with note and by/ },
      { name: 'no note', input: { by: 'alice' }, field: 'note', rule: /must be a string \(got nothing\)/ },
      { name: 'a blank note', input: { note: '   ', by: 'alice' }, field: 'note', rule: /must not be empty/ },
      { name: 'a note too long', input: { note: 'x'.repeat(2_001), by: 'alice' }, field: 'note', rule: /at most 2000 characters \(got 2001\)/ },
      { name: 'a note with a control character', input: { note: 'a\u0007b', by: 'alice' }, field: 'note', rule: /control characters other than line breaks/ },
      { name: 'by as a number', input: { note: 'n', by: 7 }, field: 'by', rule: /must be a string \(got 7\)/ },
      { name: 'an empty by', input: { note: 'n', by: '' }, field: 'by', rule: /must not be empty/ },
      { name: 'by on two lines', input: { note: 'n', by: 'alice\nbob' }, field: 'by', rule: /one line/ },
      { name: 'by too long', input: { note: 'n', by: 'b'.repeat(201) }, field: 'by', rule: /at most 200 characters/ },
      { name: 'an unknown field', input: { note: 'n', by: 'b', state: 'new' }, field: 'state', rule: /not a known field \(allowed: note, by\)/ },
    ];
    for (const c of cases) {
      it(`names ${c.field} and the rule for ${c.name}`, () => {
        const error = invalid(() => validateTriageInput(c.input));
        expect(error.field).to.equal(c.field);
        expect(error.rule).to.match(c.rule);
        expect(error.message).to.equal(`${c.field}: ${error.rule}`);
      });
    }
  });

  context('when ids are wrong in a bulk decision', () => {
    it('names ids, or the item, and the rule', () => {
      expect(invalid(() => validateBulkTriageInput({ note: 'n', by: 'b' })).message).to.equal('ids: must be a list of 1 to 1000 dead-letter ids (got nothing)');
      expect(invalid(() => validateBulkTriageInput({ ids: [], note: 'n', by: 'b' })).field).to.equal('ids');
      expect(invalid(() => validateBulkTriageInput({ ids: Array(1_001).fill('dl'), note: 'n', by: 'b' })).message).to.include('(got a list of 1001)');
      const item = invalid(() => validateBulkTriageInput({ ids: ['dl_1', ''], note: 'n', by: 'b' }));
      expect(item.field).to.equal('ids[1]');
      expect(invalid(() => validateBulkTriageInput({ ids: ['dl_1'], note: 'n', by: 'b', all: true })).field).to.equal('all');
    });
  });
});
