import { expect } from 'chai';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { validateEventTypeChange, validateNewEventType } from '../../lib/event-types/event-type-input.ts';

function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('expected a ValidationError');
}

describe('event type input', () => {
  context('when a type is created', () => {
    it('takes a name alone, with an empty description, no schema and not deprecated', () => {
      expect(validateNewEventType({ name: 'lead.stage_changed' })).to.deep.equal({
        name: 'lead.stage_changed', description: '', schema: null, deprecated: false, deprecationNote: null,
      });
    });

    it('takes a schema object, a description and a deprecation with its note', () => {
      const schema = { type: 'object' };
      expect(validateNewEventType({ name: 'a:b-c.d_e', description: 'x', schema, deprecated: true, deprecationNote: 'use f' }))
        .to.deep.equal({ name: 'a:b-c.d_e', description: 'x', schema, deprecated: true, deprecationNote: 'use f' });
    });

    for (const [name, why] of [['invoice.*', 'a wildcard'], ['*', 'a wildcard'], ['a..b', 'an empty word'], ['.a', 'an empty word'], ['a b', 'a space'], ['', 'empty'], ['x'.repeat(257), 'too long'], [7, 'not a string']] as const) {
      it(`refuses the name ${JSON.stringify(name).slice(0, 20)} (${why}), naming name`, () => {
        const error = refusal(() => validateNewEventType({ name }));
        expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
        expect(error.field).to.equal('name');
        expect(error.rule).to.match(/^must be an exact event type of at most 256 characters/);
      });
    }

    it('names the field and the rule of every other mistake', () => {
      const cases: Array<[unknown, string, RegExp]> = [
        [[], 'body', /must be a JSON object/],
        [{ name: 'a', tenantId: 'acme' }, 'tenantId', /is not a known field \(allowed: name, description, schema, deprecated, deprecationNote\)/],
        [{ name: 'a', description: 'd'.repeat(513) }, 'description', /at most 512 characters \(got 513\)/],
        [{ name: 'a', schema: [] }, 'schema', /must be a JSON Schema \(draft 2020-12\) object, or null for none \(got an array\)/],
        [{ name: 'a', schema: true }, 'schema', /\(got boolean\)/],
        [{ name: 'a', schema: { description: 'x'.repeat(64 * 1024) } }, 'schema', /must be at most 65536 bytes of JSON/],
        [{ name: 'a', deprecated: 'yes' }, 'deprecated', /must be true or false/],
        [{ name: 'a', deprecationNote: 'why' }, 'deprecationNote', /is given only with "deprecated": true/],
      ];
      for (const [input, field, rule] of cases) {
        const error = refusal(() => validateNewEventType(input));
        expect(error.field, JSON.stringify(input).slice(0, 60)).to.equal(field);
        expect(error.rule).to.match(rule);
      }
    });
  });

  context('when a type is changed', () => {
    it('keeps only the fields given, null as no schema', () => {
      expect(validateEventTypeChange({ schema: null })).to.deep.equal({ schema: null });
      expect(validateEventTypeChange({ deprecated: false })).to.deep.equal({ deprecated: false });
      expect(validateEventTypeChange({ deprecated: true, deprecationNote: null })).to.deep.equal({ deprecated: true, deprecationNote: null });
    });

    it('refuses an empty change, and the name (a type is renamed by creating another)', () => {
      expect(refusal(() => validateEventTypeChange({})).field).to.equal('body');
      expect(refusal(() => validateEventTypeChange({ name: 'b' })).field).to.equal('name');
    });
  });
});
