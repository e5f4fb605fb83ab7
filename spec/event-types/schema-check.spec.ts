import { expect } from 'chai';
import { ValidationError } from '../../lib/errors.ts';
import { CatalogSnapshot } from '../../lib/event-types/catalog-snapshot.ts';
import { compiledSchema, escapePointer, pointerOf } from '../../lib/event-types/schema-check.ts';

function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('expected a ValidationError');
}

const ORDER = {
  type: 'object',
  required: ['id', 'lines'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', format: 'uuid' },
    at: { type: 'string', format: 'date-time' },
    lines: { type: 'array', items: { type: 'object', required: ['price'], properties: { price: { type: 'number', minimum: 0 } } } },
    'a/b~c': { type: 'integer' },
  },
};

function catalog(schema: object | null, name = 'order.placed'): CatalogSnapshot {
  return new CatalogSnapshot({ version: 1, entries: [{ name, version: 1, schema: schema as never }] });
}

describe('schema check', () => {
  context('when a payload fails', () => {
    const cases: Array<[string, unknown, string, string]> = [
      ['a value deep in an array', { id: '5f0c7a9e-2b1d-4c3e-9f8a-0b1c2d3e4f5a', lines: [{ price: 1 }, { price: -1 }] }, 'payload/lines/1/price', 'must be >= 0 (minimum)'],
      ['a missing property, named itself', { lines: [] }, 'payload/id', "must have required property 'id' (required)"],
      ['a missing property inside an item', { id: '5f0c7a9e-2b1d-4c3e-9f8a-0b1c2d3e4f5a', lines: [{}] }, 'payload/lines/0/price', "must have required property 'price' (required)"],
      ['an unexpected property, named itself', { id: '5f0c7a9e-2b1d-4c3e-9f8a-0b1c2d3e4f5a', lines: [], extra: 1 }, 'payload/extra', 'must NOT have additional properties (additionalProperties)'],
      ['a format', { id: 'not-a-uuid', lines: [] }, 'payload/id', 'must match format "uuid" (format)'],
      ['a property whose name needs escaping', { id: '5f0c7a9e-2b1d-4c3e-9f8a-0b1c2d3e4f5a', lines: [], 'a/b~c': 1.5 }, 'payload/a~1b~0c', 'must be integer (type)'],
      ['the payload itself', [1], 'payload', 'must be object (type)'],
    ];
    for (const [what, payload, field, rule] of cases) {
      it(`names ${what}: ${field}`, () => {
        const error = refusal(() => catalog(ORDER).check([{ type: 'order.placed', payloadJson: JSON.stringify(payload) }]));
        expect([error.field, error.rule]).to.deep.equal([field, rule]);
        expect(error.message).to.equal(`${field}: ${rule}`);
      });
    }

    it('names the item of a list of several, as every publish error does', () => {
      const error = refusal(() => catalog({ type: 'object', properties: { n: { minimum: 1 } } }).check([
        { type: 'other.type', payloadJson: '{"n":0}' },
        { type: 'order.placed', payloadJson: '{"n":1}' },
        { type: 'order.placed', payloadJson: '{"n":0}' },
      ]));
      expect(error.field).to.equal('[2].payload/n');
    });
  });

  it('passes types not in the catalog, and a newest version without schema', () => {
    catalog(ORDER).check([{ type: 'other.type', payloadJson: '1' }]);
    catalog(null).check([{ type: 'order.placed', payloadJson: '1' }]);
    expect(catalog(null).checkedTypes).to.equal(0);
  });

  it('compiles a schema once, whatever object holds it', () => {
    expect(compiledSchema({ type: 'string', minLength: 2 })).to.equal(compiledSchema({ type: 'string', minLength: 2 }));
  });

  it('refuses a schema that does not compile, naming the field and Ajv\'s reason', () => {
    const error = refusal(() => compiledSchema({ type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }));
    expect(error.field).to.equal('schema');
    expect(error.rule).to.match(/^must be a JSON Schema \(draft 2020-12\) that compiles: can't resolve reference #\/\$defs\/missing/);
    expect(refusal(() => compiledSchema({ $schema: 'http://json-schema.org/draft-07/schema#' })).rule).to.match(/no schema with key or ref/);
  });

  it('lets two types share a schema $id', () => {
    compiledSchema({ $id: 'https://example.com/shared', type: 'string' });
    compiledSchema({ $id: 'https://example.com/shared', type: 'number' });
  });

  it('writes JSON pointer tokens as RFC 6901 says', () => {
    expect(escapePointer('a/b~c')).to.equal('a~1b~0c');
    expect(pointerOf({ instancePath: '/x', keyword: 'unevaluatedProperties', params: { unevaluatedProperty: 'y' } })).to.equal('/x/y');
    expect(pointerOf({ instancePath: '/x', keyword: 'minimum', params: { limit: 0 } })).to.equal('/x');
  });
});
