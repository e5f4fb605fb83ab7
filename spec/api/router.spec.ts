import { expect } from 'chai';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { paramsOf, Router, type Handler } from '../../lib/api/router.ts';

const answer = (status: number): Handler => async () => ({ status });

describe('Router (the status port route table)', () => {
  context('when a route is declared without an access rule', () => {
    it('is the admin token\'s only', () => {
      const router = new Router();
      router.route('GET', '/v1/things', answer(200));
      expect(router.routes.map((r) => r.access)).to.deep.equal(['admin']);
    });
  });

  context('when routes have the path', () => {
    it('matches the one declared for the method and gives its parameters by name, percent-decoded', () => {
      const router = new Router();
      router.route('GET', '/v1/things/:id', answer(200), 'open');
      router.route('POST', '/v1/things/:id/parts/:part', answer(201));
      const match = router.match('POST', '/v1/things/a%2Fb/parts/7');
      expect(match).to.be.an('object');
      if (typeof match !== 'object') return;
      expect(match.route.path).to.equal('/v1/things/:id/parts/:part');
      expect(paramsOf(match)).to.deep.equal({ id: 'a/b', part: '7' });
    });

    it('matches the first declared when two could answer', () => {
      const router = new Router();
      router.route('GET', '/v1/things/special', answer(200));
      router.route('GET', '/v1/things/:id', answer(200));
      const match = router.match('GET', '/v1/things/special');
      expect(typeof match === 'object' ? match.route.path : match).to.equal('/v1/things/special');
    });

    it('says the method is not allowed when none has the method', () => {
      const router = new Router();
      router.route('GET', '/v1/things/:id', answer(200));
      expect(router.match('DELETE', '/v1/things/1')).to.equal('method not allowed');
    });
  });

  context('when no route has the path', () => {
    it('matches nothing, not a prefix nor a longer path', () => {
      const router = new Router();
      router.route('GET', '/v1/things/:id', answer(200));
      expect(router.match('GET', '/v1/things')).to.equal(undefined);
      expect(router.match('GET', '/v1/things/1/more')).to.equal(undefined);
    });
  });

  context('when a path parameter is malformed percent-encoding', () => {
    it('refuses it naming the parameter', () => {
      const router = new Router();
      router.route('GET', '/v1/things/:id', answer(200));
      const match = router.match('GET', '/v1/things/%ZZ');
      if (typeof match !== 'object') expect.fail('no match');
      expect(() => paramsOf(match)).to.throw(ValidationError).with.property('code', ErrorCode.INVALID_INPUT);
      expect(() => paramsOf(match)).to.throw(ValidationError).with.property('field', 'id');
    });
  });
});
