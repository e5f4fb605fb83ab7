import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { authorizedSend, requestHeaders } from '../../lib/delivery/endpoint-auth.ts';
import { OAUTH_TOKEN_CODE, OAuthTokens } from '../../lib/delivery/oauth-tokens.ts';
import { createSender, type Sender, type SendRequest, type SendResult } from '../../lib/delivery/sender.ts';
import type { Endpoint, EndpointAuth } from '../../lib/model.ts';
import { classify } from '../../lib/policy/classify.ts';
import { LOOPBACK, startServer, type Answer, type ReceivedRequest, type TestServer } from '../support/harness.ts';

const SECOND = 1_000;

function endpointOf(fields: Partial<Endpoint>): Endpoint {
  return {
    id: 'ep_1', tenantId: 'acme', url: 'http://127.0.0.1:9/', description: '', eventTypes: [], retry: { preset: 'default' }, timeoutMs: 5_000,
    mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null, failingSince: null, secrets: [],
    createdAt: 0, updatedAt: 0, ...fields,
  };
}

/** Stored values in these tests are "sealed" as `sealed:<value>`. */
const open = (stored: string): string => {
  if (!stored.startsWith('sealed:')) throw new Error(`not sealed: ${stored}`);
  return stored.slice('sealed:'.length);
};

describe('Endpoint headers and authentication on the wire', () => {
  describe('requestHeaders', () => {
    it('adds the custom headers (secret ones opened) and a static authorization, and Herald\'s own headers win', () => {
      const endpoint = endpointOf({
        headers: [
          { name: 'X-Team', value: 'payments', secret: false },
          { name: 'X-Api-Key', value: 'sealed:k_live_1', secret: true },
          // Stored past validation (an older Herald, a hand-edited row): never sent over Herald's own.
          { name: 'Webhook-Id', value: 'forged', secret: false },
          { name: 'Content-Type', value: 'text/plain', secret: false },
        ],
        auth: { type: 'basic', username: 'herald', password: 'sealed:pä:ss' },
      });
      const headers = requestHeaders(endpoint, { 'webhook-id': 'evt_1', 'webhook-signature': 'v1,x' }, open);
      expect(headers).to.deep.equal({
        'x-team': 'payments',
        'x-api-key': 'k_live_1',
        authorization: `Basic ${Buffer.from('herald:pä:ss').toString('base64')}`,
        'webhook-id': 'evt_1',
        'webhook-signature': 'v1,x',
      });
      expect(requestHeaders(endpointOf({ auth: { type: 'bearer', token: 'sealed:tok' } }), {}, open)).to.deep.equal({ authorization: 'Bearer tok' });
    });

    it('sets no authorization of its own for oauth2, but fails (a fault on our side) when its client secret does not open', () => {
      const oauth: EndpointAuth = { type: 'oauth2', tokenUrl: 'http://127.0.0.1:9/token', clientId: 'c', clientSecret: 'sealed:s' };
      expect(requestHeaders(endpointOf({ auth: oauth }), { 'webhook-id': 'evt_1' }, open)).to.deep.equal({ 'webhook-id': 'evt_1' });
      expect(() => requestHeaders(endpointOf({ auth: { ...oauth, clientSecret: 'garbled' } }), {}, open)).to.throw('not sealed');
    });
  });

  describe('OAuth 2.0 client credentials', () => {
    let clock: ManualClock;
    let sender: Sender;
    let tokenServer: TestServer;
    let consumer: TestServer;
    let tokenAnswers: Array<(request: ReceivedRequest) => Answer>;
    let consumerAnswer: (request: ReceivedRequest) => Answer;
    let tokens: OAuthTokens;
    let send: (request: SendRequest, endpoint?: Endpoint) => Promise<SendResult>;
    let issued: number;

    const tokenJson = (expiresIn?: number): Answer => {
      issued++;
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ access_token: `tok-${issued}`, token_type: 'Bearer', ...(expiresIn === undefined ? {} : { expires_in: expiresIn }) }) };
    };

    beforeEach(async () => {
      clock = new ManualClock(Date.UTC(2026, 0, 1));
      issued = 0;
      tokenAnswers = [];
      consumerAnswer = () => ({ status: 204 });
      tokenServer = await startServer((request) => (tokenAnswers.shift() ?? (() => tokenJson(300)))(request));
      consumer = await startServer((request) => consumerAnswer(request));
      sender = createSender({ clock, allowNetworks: [...LOOPBACK] });
      tokens = new OAuthTokens({ clock, send: (request) => sender.send(request), open });
      send = authorizedSend({ clock, send: (request) => sender.send(request), tokens });
    });
    afterEach(async () => {
      await sender.close();
      await tokenServer.close();
      await consumer.close();
    });

    const oauthEndpoint = (auth: Partial<Extract<EndpointAuth, { type: 'oauth2' }>> = {}): Endpoint =>
      endpointOf({
        url: `${consumer.url}/hooks`,
        auth: { type: 'oauth2', tokenUrl: `${tokenServer.url}/oauth/token`, clientId: 'client 1', clientSecret: 'sealed:s3cr&t', scope: 'hooks:write', audience: 'https://api.example', ...auth },
      });
    const attempt = (endpoint: Endpoint): Promise<SendResult> =>
      send({ url: endpoint.url, headers: { 'webhook-id': 'evt_1' }, body: '{}', timeoutMs: endpoint.timeoutMs }, endpoint);

    it('fetches one token for many attempts at once, by a form POST with HTTP Basic client authentication, and sends it as a bearer', async () => {
      const endpoint = oauthEndpoint();
      const results = await Promise.all(Array.from({ length: 6 }, () => attempt(endpoint)));
      expect(results.map((r) => r.outcome)).to.deep.equal(Array(6).fill({ kind: 'response', status: 204, location: null, retryAfter: null, body: '' }));
      expect(tokenServer.received).to.have.length(1);
      expect(tokens.fetches).to.equal(1);
      const [tokenRequest] = tokenServer.received;
      expect(tokenRequest?.path).to.equal('/oauth/token');
      expect(tokenRequest?.headers['content-type']).to.equal('application/x-www-form-urlencoded');
      expect(tokenRequest?.headers.authorization).to.equal(`Basic ${Buffer.from('client+1:s3cr%26t').toString('base64')}`);
      expect(Object.fromEntries(new URLSearchParams(tokenRequest?.body))).to.deep.equal({
        grant_type: 'client_credentials', scope: 'hooks:write', audience: 'https://api.example',
      });
      expect(consumer.received.map((r) => [r.headers.authorization, r.headers['webhook-id']])).to.deep.equal(Array(6).fill(['Bearer tok-1', 'evt_1']));
    });

    it('keeps the token until shortly before expires_in by the clock, then fetches another', async () => {
      const endpoint = oauthEndpoint();
      tokenAnswers.push(() => tokenJson(120));
      await attempt(endpoint);
      clock.advance(89 * SECOND);
      await attempt(endpoint);
      expect(tokens.fetches, 'within 120 s less the 30 s margin').to.equal(1);
      clock.advance(1 * SECOND);
      await attempt(endpoint);
      expect(tokens.fetches).to.equal(2);
      expect(consumer.received.map((r) => r.headers.authorization)).to.deep.equal(['Bearer tok-1', 'Bearer tok-1', 'Bearer tok-2']);
    });

    it('fetches again when the auth configuration changes', async () => {
      await attempt(oauthEndpoint());
      await attempt(oauthEndpoint({ clientSecret: 'sealed:rotated' }));
      expect(tokens.fetches).to.equal(2);
      expect(tokenServer.received[1]?.headers.authorization).to.equal(`Basic ${Buffer.from('client+1:rotated').toString('base64')}`);
    });

    it('on a 401 from the consumer, fetches a new token and sends once more within the attempt', async () => {
      consumerAnswer = (request) => (request.headers.authorization === 'Bearer tok-1' ? { status: 401 } : { status: 200 });
      const { outcome } = await attempt(oauthEndpoint());
      expect(outcome).to.include({ kind: 'response', status: 200 });
      expect(tokens.fetches).to.equal(2);
      expect(consumer.received.map((r) => r.headers.authorization)).to.deep.equal(['Bearer tok-1', 'Bearer tok-2']);
      // The new token is the one kept.
      await attempt(oauthEndpoint());
      expect(tokens.fetches).to.equal(2);
    });

    it('makes a second 401 the attempt\'s outcome (no third request)', async () => {
      consumerAnswer = () => ({ status: 401, body: 'who are you' });
      const { outcome } = await attempt(oauthEndpoint());
      expect(outcome).to.include({ kind: 'response', status: 401, body: 'who are you' });
      expect(consumer.received).to.have.length(2);
      expect(tokens.fetches).to.equal(2);
    });

    it('makes a token endpoint failure the attempt\'s outcome, retried, saying it was the token endpoint; the consumer is not called', async () => {
      tokenAnswers.push(() => ({ status: 500, body: 'db down' }));
      tokenAnswers.push(() => ({ status: 401, body: '{"error":"invalid_client"}' }));
      tokenAnswers.push(() => ({ status: 200, body: '{"token_type":"Bearer"}' }));
      const endpoint = oauthEndpoint();
      const outcomes = [(await attempt(endpoint)).outcome, (await attempt(endpoint)).outcome, (await attempt(endpoint)).outcome];
      const url = `${tokenServer.url}/oauth/token`;
      expect(outcomes).to.deep.equal([
        { kind: 'network', code: OAUTH_TOKEN_CODE, message: `token endpoint ${url}: HTTP 500 "db down"` },
        { kind: 'network', code: OAUTH_TOKEN_CODE, message: `token endpoint ${url}: HTTP 401 ${JSON.stringify('{"error":"invalid_client"}')}` },
        { kind: 'network', code: OAUTH_TOKEN_CODE, message: `token endpoint ${url}: HTTP 200 without a usable access_token` },
      ]);
      for (const outcome of outcomes) expect(classify(outcome, clock.now()).kind).to.equal('retry');
      expect(consumer.received).to.have.length(0);
      // A failed fetch is not kept: the next attempt asks again, and goes through.
      expect((await attempt(endpoint)).outcome).to.include({ kind: 'response', status: 204 });
      expect(tokens.fetches).to.equal(4);
    });

    it('reaches the token endpoint only through the SSRF guard (a blocked address is a permanent failure)', async () => {
      const guarded = createSender({ clock });
      try {
        const strict = authorizedSend({ clock, send: (request) => sender.send(request), tokens: new OAuthTokens({ clock, send: (request) => guarded.send(request), open }) });
        const endpoint = oauthEndpoint();
        const { outcome } = await strict({ url: endpoint.url, headers: {}, body: '{}', timeoutMs: 5_000 }, endpoint);
        expect(outcome.kind).to.equal('blocked');
        expect(outcome.kind === 'blocked' && outcome.message).to.match(/^token endpoint http:\/\/127\.0\.0\.1:\d+\/oauth\/token: /);
        expect(classify(outcome, clock.now()).kind).to.equal('permanent');
        expect(tokenServer.received).to.have.length(0);
      } finally {
        await guarded.close();
      }
    });

    it('passes requests of endpoints without oauth2 through as they are', async () => {
      const endpoint = endpointOf({ url: `${consumer.url}/plain` });
      await send({ url: endpoint.url, headers: { authorization: 'Bearer static' }, body: '{}', timeoutMs: 5_000 }, endpoint);
      expect(consumer.received[0]?.headers.authorization).to.equal('Bearer static');
      expect(tokenServer.received).to.have.length(0);
    });
  });
});
