import { expect } from 'chai';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { MAX_URL_LENGTH, validateEndpointUrl } from '../../lib/delivery/validate-url.ts';

/** Calls the validator and returns the ValidationError it throws. */
function refusal(value: unknown, field?: string): ValidationError {
  try {
    validateEndpointUrl(value, field);
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  return expect.fail(`expected ${JSON.stringify(value)} to be refused`);
}

const CONTROL_RULE = 'must not contain control characters or surrounding spaces';

describe('validateEndpointUrl', () => {
  context('when the URL holds an ASCII control character', () => {
    it('refuses CR LF header injection, naming the field, the rule, the character and its index', () => {
      const error = refusal('http://host/a\r\nX-Injected: 1');
      expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect(error.field).to.equal('url');
      expect(error.rule).to.equal(`${CONTROL_RULE} (found "\\r" at index 13)`);
      expect(error.message).to.equal(`url: ${CONTROL_RULE} (found "\\r" at index 13)`);
    });

    const controls = [...Array.from({ length: 0x20 }, (_, code) => code), 0x7f];
    it(`refuses every one of U+0000–U+001F and U+007F, anywhere (${controls.length} characters)`, () => {
      for (const code of controls) {
        const character = String.fromCharCode(code);
        for (const url of [`https://hooks.example/a${character}b`, `https://hooks${character}.example/`, `https://hooks.example/?q=${character}`]) {
          const error = refusal(url);
          expect(error.field, JSON.stringify(url)).to.equal('url');
          expect(error.rule, JSON.stringify(url)).to.equal(`${CONTROL_RULE} (found ${JSON.stringify(character)} at index ${url.indexOf(character)})`);
        }
      }
    });

    it('refuses a tab, which new URL() would silently drop', () => {
      expect(refusal('https://hooks.example/in\tbox').rule).to.equal(`${CONTROL_RULE} (found "\\t" at index 24)`);
    });
  });

  context('when the URL starts or ends with whitespace', () => {
    for (const [url, found, index] of [
      [' https://hooks.example/', '" "', 0],
      ['https://hooks.example/ ', '" "', 22],
      ['\u00a0https://hooks.example/', '"\u00a0"', 0],
      ['https://hooks.example/\u3000', '"\u3000"', 22],
      ['https://hooks.example/\n', '"\\n"', 22],
    ] as const) {
      it(`refuses ${JSON.stringify(url)}`, () => {
        const error = refusal(url);
        expect(error.field).to.equal('url');
        expect(error.rule).to.equal(`${CONTROL_RULE} (found ${found} at index ${index})`);
      });
    }
  });

  it('names the field it is given', () => {
    expect(refusal('https://x.example/\r', 'webhookUrl').field).to.equal('webhookUrl');
  });

  context('when the URL is acceptable', () => {
    it('returns it normalised, as new URL().href, which is what is stored and requested', () => {
      expect(validateEndpointUrl('https://example.com')).to.equal('https://example.com/');
      expect(validateEndpointUrl('HTTPS://Hooks.EXAMPLE.com:443/In')).to.equal('https://hooks.example.com/In');
      expect(validateEndpointUrl('http://hooks.example/a b?c=d e')).to.equal('http://hooks.example/a%20b?c=d%20e');
      expect(validateEndpointUrl('http://[::127.0.0.1]:8080/x')).to.equal('http://[::7f00:1]:8080/x');
      expect(validateEndpointUrl('https://hooks.example/in#frag')).to.equal('https://hooks.example/in#frag');
    });

    it('returns an already-normalised URL unchanged', () => {
      const url = 'https://hooks.example.com/webhooks/in?tenant=acme';
      expect(validateEndpointUrl(url)).to.equal(url);
    });
  });

  context('when the URL breaks the other rules', () => {
    it('still refuses non-strings, non-URLs, other protocols and credentials', () => {
      expect(refusal(42).rule).to.equal('must be a string (got number)');
      expect(refusal('not a url').rule).to.match(/^must be an absolute URL/);
      expect(refusal('ftp://x.example/').rule).to.equal('must use http or https (got ftp:)');
      expect(refusal('https://user:pw@x.example/').rule).to.equal('must not contain a username or password');
    });

    it('refuses a URL that only exceeds the limit once normalised', () => {
      const url = `https://x.example/${' '.repeat(MAX_URL_LENGTH - 30)}x`;
      expect(url.length).to.be.at.most(MAX_URL_LENGTH);
      expect(refusal(url).rule).to.match(new RegExp(`^must be at most ${MAX_URL_LENGTH} characters \\(got \\d+ once normalised\\)$`));
    });
  });
});
