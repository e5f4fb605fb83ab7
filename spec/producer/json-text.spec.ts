import { expect } from 'chai';
import { seededRandom } from '../../lib/clock.ts';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { JsonText, parseEventsBody, payloadSpans, type JsonSpan } from '../../lib/producer/json-text.ts';

function failure(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  expect.fail('expected a ValidationError');
}

/** The text of each payload span. */
function payloadTexts(text: string): Array<string | undefined> {
  return payloadSpans(text).map((span: JsonSpan | undefined) => (span === undefined ? undefined : text.slice(span.start, span.end)));
}

describe('JsonText', () => {
  describe('parse', () => {
    context('when the text is one JSON value', () => {
      it('keeps it exactly, only dropping whitespace around it', () => {
        const text = '{ "big": 12345678901234567890, "float": 1.0, "exp": 1e2, "negzero": -0,\n  "s": "\\u00e9\\n\\/\\ud83d\\ude00 é 😀" }';
        expect(JsonText.parse(text).text).to.equal(text);
        expect(JsonText.parse(` \t\r\n${text}\n `).text).to.equal(text);
        expect(JsonText.parse('12345678901234567890').text).to.equal('12345678901234567890');
        expect(JsonText.parse('"x"').text).to.equal('"x"');
      });

      it('measures its nesting depth', () => {
        expect(JsonText.parse('1').depth).to.equal(0);
        expect(JsonText.parse('"[[{"').depth).to.equal(0);
        expect(JsonText.parse('[]').depth).to.equal(1);
        expect(JsonText.parse('{"a": [1, {"b": []}], "c": {}}').depth).to.equal(4);
        expect(JsonText.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`).depth).to.equal(100_000);
      });

      it('scans a long string of mixed characters and surrogate pairs without overflowing', () => {
        const text = `"${'a😀é'.repeat(1_000_000)}"`;
        expect(JsonText.parse(text).text).to.equal(text);
      });

      it('parses to the same value as JSON.parse, and serialises as that value', () => {
        const text = '{"a": [1, 2.5e-3, true, false, null, "q\\"uote"], "b": {}}';
        expect(JsonText.parse(text).value()).to.deep.equal(JSON.parse(text));
        expect(JSON.stringify({ p: JsonText.parse('[1.0]') })).to.equal('{"p":[1]}');
      });
    });

    context('when the text is not exactly one JSON value', () => {
      const invalid: ReadonlyArray<[string, string]> = [
        ['empty', ''],
        ['only whitespace', '  '],
        ['two values', '1 2'],
        ['a trailing comma in an array', '[1,]'],
        ['a trailing comma in an object', '{"a":1,}'],
        ['a missing colon', '{"a" 1}'],
        ['a bare key', '{a:1}'],
        ['single quotes', "'x'"],
        ['a leading zero', '01'],
        ['a leading plus', '+1'],
        ['a bare fraction', '.5'],
        ['a dangling point', '1.'],
        ['NaN', 'NaN'],
        ['Infinity', '-Infinity'],
        ['a bad literal', 'tru'],
        ['a literal with a tail', 'nullx'],
        ['an unclosed string', '"abc'],
        ['an unclosed array', '[1, [2]'],
        ['a mismatched bracket', '[1}'],
        ['a raw newline in a string', '"a\nb"'],
        ['a raw tab in a string', '"a\tb"'],
        ['a bad escape', '"\\x41"'],
        ['a short unicode escape', '"\\u12"'],
        ['a lone high surrogate', '"\ud83d"'],
        ['a lone low surrogate', '"\ude00x"'],
        ['a comment', '[1 /* no */]'],
        ['a byte order mark', '\ufeff{}'],
        ['a non-breaking space as whitespace', '\u00a0{}'],
      ];
      for (const [what, text] of invalid) {
        it(`refuses ${what}, naming the field, as JSON.parse does`, () => {
          const error = failure(() => JsonText.parse(text));
          expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
          expect(error.field).to.equal('payload');
          expect(error.rule).to.match(/^must be valid JSON: expected .* at offset \d+/);
          if (!what.startsWith('a lone')) expect(() => JSON.parse(text)).to.throw(SyntaxError);
        });
      }

      it('names the field it is given', () => {
        expect(failure(() => JsonText.parse('{', 'data')).field).to.equal('data');
      });
    });

    context('when compared with JSON.parse on many documents', () => {
      it('accepts exactly what JSON.parse accepts', () => {
        const samples = [
          '0', '-0', '-0.0e-0', '1E+2', '1e', '1e+', '-', '--1', '[-]', '{"":""}', '{"a":1,"a":2}', '[[],[[]],{}]',
          '"\\u0000"', '"\\uD83D\\uDE00"', '"\\"', '"\\\\"', '[1,,2]', '[,]', '{,}', '{"a":}', '{"a"}', '[1 2]', 'true false',
          ' {"x" : [ 1 , 2 ] } ', '"\u007f"', '"\u2028"', '[true,false,null]', '{"a":{"b":{"c":[1,{"d":"}"}]}}}',
        ];
        for (const text of samples) {
          let expected = true;
          try {
            JSON.parse(text);
          } catch {
            expected = false;
          }
          let accepted = true;
          try {
            JsonText.parse(text);
          } catch {
            accepted = false;
          }
          expect(accepted, text).to.equal(expected);
        }
      });

      it('agrees with JSON.parse on thousands of seeded mutations of a document', () => {
        const random = seededRandom(2026);
        const base = '{"a": [1, -2.5e+3, "x\\"y\\\\", {"b": null}], "c": true, "d": "é😀\\u00e9"}';
        const alphabet = ['{', '}', '[', ']', '"', '\\', ',', ':', ' ', '0', '1', '-', '.', 'e', 'u', 'n', 't', '\n', '\u0001'];
        for (let i = 0; i < 5_000; i++) {
          let text = base;
          for (let edits = 1 + Math.floor(random() * 3); edits > 0; edits--) {
            const at = Math.floor(random() * (text.length + 1));
            const char = alphabet[Math.floor(random() * alphabet.length)] ?? '';
            const kind = random();
            if (kind < 0.4) text = text.slice(0, at) + text.slice(at + 1);
            else if (kind < 0.8) text = text.slice(0, at) + char + text.slice(at);
            else text = text.slice(0, at) + char + text.slice(at + 1);
          }
          let expected: string | undefined;
          try {
            JSON.parse(text);
            expected = 'ok';
          } catch {
            expected = undefined;
          }
          let accepted: string | undefined;
          try {
            accepted = JsonText.parse(text).text === text.trim() ? 'ok' : 'changed';
          } catch {
            accepted = undefined;
          }
          // A mutation may split the emoji's surrogate pair: JSON.parse takes a lone surrogate, the scanner refuses it.
          if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)) continue;
          expect(accepted, JSON.stringify(text)).to.equal(expected);
        }
      });
    });
  });
});

describe('payloadSpans', () => {
  context('when the body is one event object', () => {
    it('finds the payload value exactly, whitespace inside kept', () => {
      const payload = '{ "big": 12345678901234567890,\n\t"list": [ 1.0 , 1e2 ] }';
      const body = `{"tenantId": "acme", "payload" :  ${payload}  , "type": "a.b"}`;
      expect(payloadTexts(body)).to.deep.equal([payload]);
    });

    it('is not fooled by braces, quotes and backslashes inside strings', () => {
      const payload = '{"s": "}{][\\"payload\\":1,\\\\", "t": "\\\\"}';
      const body = `{"type": "x\\"}", "payload": ${payload}, "id": "a\\\\"}`;
      expect(payloadTexts(body)).to.deep.equal([payload]);
      expect(JSON.parse(payloadTexts(body)[0] ?? '')).to.deep.equal(JSON.parse(body).payload);
    });

    it('ignores a payload key nested in another field or in the payload itself', () => {
      const body = '{"meta": {"payload": "wrong"}, "payload": {"payload": {"payload": 3}}, "list": [{"payload": 4}]}';
      expect(payloadTexts(body)).to.deep.equal(['{"payload": {"payload": 3}}']);
      expect(payloadTexts('{"meta": {"payload": 1}}')).to.deep.equal([undefined]);
    });

    it('keeps the last of duplicate payload keys, as JSON.parse does', () => {
      const body = '{"payload": 1, "tenantId": "a", "payload": [2.0]}';
      expect(payloadTexts(body)).to.deep.equal(['[2.0]']);
      expect(JSON.parse(body).payload).to.deep.equal([2]);
    });

    it('recognises an escaped key that spells payload', () => {
      expect(payloadTexts('{"pay\\u006coad": 1.50}')).to.deep.equal(['1.50']);
      expect(payloadTexts('{"payload ": 1, "Payload": 2}')).to.deep.equal([undefined]);
    });

    it('gives each payload its nesting depth', () => {
      expect(payloadSpans('{"payload": [[1], {}]}')[0]?.depth).to.equal(2);
      expect(payloadSpans('{"payload": "[["}')[0]?.depth).to.equal(0);
    });
  });

  context('when the body is a list', () => {
    it('gives one entry per item, undefined for an item without payload or not an object', () => {
      const body = '[{"payload": 1.0}, 7, {"type": "t"}, {"payload": {"a": "b"}}, [{"payload": 9}], {}]';
      expect(payloadTexts(body)).to.deep.equal(['1.0', undefined, undefined, '{"a": "b"}', undefined, undefined]);
      expect(payloadTexts(' [ ] ')).to.deep.equal([]);
    });
  });

  context('when the body is neither an object nor a list', () => {
    it('gives no span', () => {
      expect(payloadSpans('"payload"')).to.deep.equal([]);
      expect(payloadSpans('42')).to.deep.equal([]);
    });
  });

  context('when the body is not valid JSON', () => {
    it('throws a ValidationError naming body and the offset', () => {
      for (const body of ['{"payload": 1', '[{"payload": 1},]', '{"payload": 1} x', '{"payload": 01}', '{"payload" 1}', '']) {
        const error = failure(() => payloadSpans(body));
        expect(error.field, body).to.equal('body');
        expect(error.rule, body).to.match(/^must be valid JSON: expected .* at offset \d+/);
      }
    });
  });
});

describe('parseEventsBody', () => {
  it('parses the body with each payload as its JsonText', () => {
    const parsed = parseEventsBody('[{"tenantId": "acme", "payload": {"n": 1.0}}, {"payload": -0}, 5]') as unknown[];
    expect(parsed).to.have.length(3);
    const [first, second, third] = parsed as [Record<string, unknown>, Record<string, unknown>, unknown];
    expect(first.tenantId).to.equal('acme');
    expect(first.payload).to.be.instanceOf(JsonText);
    expect((first.payload as JsonText).text).to.equal('{"n": 1.0}');
    expect((second.payload as JsonText).text).to.equal('-0');
    expect(third).to.equal(5);
    const one = parseEventsBody('{"payload": 12345678901234567890}') as Record<string, unknown>;
    expect((one.payload as JsonText).text).to.equal('12345678901234567890');
  });

  it('leaves an event without payload without one', () => {
    expect(parseEventsBody('{"type": "t"}')).to.deep.equal({ type: 't' });
  });
});
