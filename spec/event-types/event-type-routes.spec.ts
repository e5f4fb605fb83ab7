/**
 * The catalog over the admin API, and its check in Herald's publisher (`POST /v1/events`) and in a
 * producer publishing on its own SQLite connection: a change made through the API is seen by that
 * connection at its next publish, without a restart.
 */
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { request } from 'undici';
import { ErrorCode, isHeraldError, type HeraldError } from '../../lib/errors.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { startStatus, TOKEN, type StatusFixture } from '../api/status-fixture.ts';

const AMOUNT = { type: 'object', required: ['amount'], properties: { amount: { type: 'number', minimum: 0 } } };

describe('event types over the admin API', () => {
  let f: StatusFixture;
  let producer: Database.Database;

  beforeEach(async () => {
    f = await startStatus({}, { start: false });
    producer = new Database(f.t.dbPath);
    const endpoint = await call('POST', '/v1/endpoints', { tenantId: 'acme', url: 'http://127.0.0.1:9/hook' });
    expect(endpoint.status, endpoint.text).to.equal(201);
  });

  afterEach(async () => {
    producer.close();
    await f.close();
  });

  async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, token = TOKEN): Promise<{ status: number; text: string; json: any }> {
    const response = await request(`${f.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.body.text();
    return { status: response.statusCode, text, json: text === '' ? undefined : JSON.parse(text) };
  }

  function storedEvents(): number {
    return producer.prepare('SELECT count(*) FROM events').pluck().get() as number;
  }

  function producerRefusal(input: unknown): HeraldError {
    try {
      publish(producer, input as never, { clock: f.t.clock });
    } catch (error) {
      if (isHeraldError(error)) return error;
      throw error;
    }
    throw new Error('expected publish to throw');
  }

  it('creates, lists, reads, versions, deprecates and deletes a type; 409 on a duplicate, 404 on an unknown one', async () => {
    const created = await call('POST', '/v1/event-types', { name: 'invoice.paid', description: 'An invoice was paid', schema: AMOUNT });
    expect(created.status, created.text).to.equal(201);
    expect(created.json).to.deep.include({ name: 'invoice.paid', description: 'An invoice was paid', deprecated: false, deprecatedAt: null });
    expect(created.json.versions).to.deep.equal([{ version: 1, schema: AMOUNT, createdAt: f.t.clock.now() }]);
    expect((await call('POST', '/v1/event-types', { name: 'invoice.paid' })).json.error.code).to.equal(ErrorCode.CONFLICT);
    expect((await call('POST', '/v1/event-types', { name: 'invoice.paid' })).status).to.equal(409);

    const changed = await call('PATCH', '/v1/event-types/invoice.paid', { schema: { type: 'object' }, deprecated: true, deprecationNote: 'use invoice.settled' });
    expect(changed.status, changed.text).to.equal(200);
    expect(changed.json.versions.map((v: { version: number }) => v.version)).to.deep.equal([1, 2]);
    expect(changed.json).to.deep.include({ deprecated: true, deprecationNote: 'use invoice.settled' });
    const same = await call('PATCH', '/v1/event-types/invoice.paid', { schema: { type: 'object' } });
    expect(same.json.versions, 'the newest schema again: no new version').to.have.length(2);

    expect((await call('GET', '/v1/event-types')).json.data.map((t: { name: string }) => t.name)).to.deep.equal(['invoice.paid']);
    expect((await call('GET', '/v1/event-types/invoice.paid')).json.versions).to.have.length(2);
    expect((await call('DELETE', '/v1/event-types/invoice.paid')).status).to.equal(204);
    const gone = await call('GET', '/v1/event-types/invoice.paid');
    expect(gone.status).to.equal(404);
    expect(gone.json.error).to.deep.include({ code: ErrorCode.NOT_FOUND, field: 'name' });
    expect((await call('PATCH', '/v1/event-types/invoice.paid', { description: 'x' })).status).to.equal(404);
    expect((await call('DELETE', '/v1/event-types/invoice.paid')).status).to.equal(404);
  });

  it('refuses a schema that does not compile with field schema and Ajv\'s reason, and a wildcard name', async () => {
    const bad = await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: { type: 'integerr' } });
    expect(bad.status).to.equal(400);
    expect(bad.json.error.field).to.equal('schema');
    expect(bad.json.error.rule).to.match(/^must be a JSON Schema \(draft 2020-12\) that compiles: schema is invalid: data\/type must be equal to one of the allowed values/);
    const remote = await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: { $ref: 'https://example.com/s.json' } });
    expect(remote.json.error.rule).to.match(/can't resolve reference https:\/\/example\.com\/s\.json/);
    expect((await call('POST', '/v1/event-types', { name: 'invoice.*' })).json.error.field).to.equal('name');
    expect((await call('GET', '/v1/event-types')).json.data).to.deep.equal([]);
  });

  it('lets a tenant token read the catalog, and only the admin write it', async () => {
    await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: AMOUNT });
    const { token } = await f.t.herald.tenantTokens.issue('acme', {});
    expect((await call('GET', '/v1/event-types', undefined, token)).json.data.map((t: { name: string }) => t.name)).to.deep.equal(['invoice.paid']);
    expect((await call('GET', '/v1/event-types/invoice.paid', undefined, token)).status).to.equal(200);
    for (const [method, path, body] of [['POST', '/v1/event-types', { name: 'x' }], ['PATCH', '/v1/event-types/invoice.paid', { description: 'x' }], ['DELETE', '/v1/event-types/invoice.paid', undefined]] as const) {
      const refused = await call(method, path, body, token);
      expect(refused.status, `${method} ${path}`).to.equal(403);
    }
  });

  it('refuses a payload its type\'s schema refuses on POST /v1/events, naming the JSON pointer and the rule, and stores nothing', async () => {
    await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: AMOUNT });
    const one = await call('POST', '/v1/events', { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -1 } });
    expect(one.status).to.equal(400);
    expect(one.json.error).to.deep.equal({ code: ErrorCode.INVALID_INPUT, message: 'payload/amount: must be >= 0 (minimum)', field: 'payload/amount', rule: 'must be >= 0 (minimum)' });
    const batch = await call('POST', '/v1/events', [
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 1 } },
      { tenantId: 'acme', type: 'invoice.paid', payload: {} },
    ]);
    expect(batch.json.error).to.deep.include({ field: '[1].payload/amount', rule: "must have required property 'amount' (required)" });
    expect(storedEvents()).to.equal(0);

    const accepted = await call('POST', '/v1/events', [
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 0 } },
      { tenantId: 'acme', type: 'not.in.catalog', payload: { amount: -1 } },
    ]);
    expect(accepted.status, accepted.text).to.equal(202);
    expect(storedEvents()).to.equal(2);
  });

  it('publishes a deprecated type as before', async () => {
    await call('POST', '/v1/event-types', { name: 'lead.created', schema: AMOUNT, deprecated: true, deprecationNote: 'use lead.opened' });
    expect((await call('POST', '/v1/events', { tenantId: 'acme', type: 'lead.created', payload: { amount: 3 } })).status).to.equal(202);
    expect(publish(producer, { tenantId: 'acme', type: 'lead.created', payload: { amount: 4 } }, { clock: f.t.clock })).to.have.length(1);
  });

  it('is seen by a producer\'s own connection at its next publish after each change through the API, without a restart', async () => {
    // The producer publishes (and caches the empty catalog) before any type exists.
    publish(producer, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -1 } }, { clock: f.t.clock });
    await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: AMOUNT });
    const refused = producerRefusal([{ tenantId: 'acme', type: 'lead.created', payload: {} }, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -2 } }]);
    expect(refused).to.deep.include({ code: ErrorCode.INVALID_INPUT, field: '[1].payload/amount', rule: 'must be >= 0 (minimum)' });
    expect(storedEvents(), 'the first event of the refused batch is not stored either').to.equal(1);

    await call('PATCH', '/v1/event-types/invoice.paid', { schema: { type: 'object', properties: { amount: { type: 'number' } } } });
    expect(publish(producer, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -2 } }, { clock: f.t.clock })).to.have.length(1);
    await call('PATCH', '/v1/event-types/invoice.paid', { schema: { type: 'object', properties: { amount: { type: 'string' } } } });
    expect(producerRefusal({ tenantId: 'acme', type: 'invoice.paid', payload: { amount: 2 } })).to.deep.include({ field: 'payload/amount', rule: 'must be string (type)' });
    await call('DELETE', '/v1/event-types/invoice.paid');
    expect(publish(producer, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 2 } }, { clock: f.t.clock })).to.have.length(1);
    expect(storedEvents()).to.equal(3);
  });

  it('checks inside the producer\'s own transaction: a refused payload rolls back nothing of the caller\'s but its savepoint', async () => {
    await call('POST', '/v1/event-types', { name: 'invoice.paid', schema: AMOUNT });
    producer.exec('CREATE TABLE leads (id TEXT PRIMARY KEY)');
    const work = producer.transaction(() => {
      producer.prepare(`INSERT INTO leads (id) VALUES ('lead_1')`).run();
      expect(() => publish(producer, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 'ten' } }, { clock: f.t.clock })).to.throw(/^payload\/amount: must be number \(type\)$/);
      publish(producer, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 10 } }, { clock: f.t.clock });
    });
    work();
    expect(producer.prepare('SELECT count(*) FROM leads').pluck().get()).to.equal(1);
    expect(storedEvents()).to.equal(1);
  });
});
