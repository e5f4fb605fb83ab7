import { expect } from 'chai';
import { Collections, indexSpecs, MAX_TTL_SECONDS, retentionSeconds } from '../../../lib/store/mongo/schema.ts';

describe('MongoDB schema', () => {
  it('declares indexes for every collection, TTL indexes on attempts and dead letters', () => {
    const specs = indexSpecs(2_592_000);
    expect(Object.keys(specs).sort()).to.deep.equal(Object.values(Collections).sort());
    const ttl = Object.entries(specs).flatMap(([collection, list]) =>
      list.filter((i) => i.expireAfterSeconds !== undefined).map((i) => [collection, i.name, i.expireAfterSeconds, i.key]),
    );
    expect(ttl).to.deep.equal([
      ['attempts', 'attempts_ttl', 2_592_000, { at: 1 }],
      ['dead_letters', 'dead_letters_ttl', 2_592_000, { at: 1 }],
    ]);
    const names = Object.values(specs).flatMap((list) => list.map((i) => i.name));
    expect(new Set(names).size, 'index names are unique').to.equal(names.length);
  });

  it('has the indexes claims and the fan-out loop rely on', () => {
    const specs = indexSpecs(null);
    expect(specs.deliveries.map((i) => i.key)).to.deep.include({ status: 1, slot: 1, nextAttemptAt: 1 });
    expect(specs.deliveries.map((i) => i.key)).to.deep.include({ endpointId: 1, status: 1, nextAttemptAt: 1 });
    expect(specs.events.find((i) => i.name === 'events_unfanned')?.partialFilterExpression).to.deep.equal({ fannedOut: false });
    expect(specs.attempts.some((i) => i.expireAfterSeconds !== undefined)).to.equal(false);
  });

  it('turns retention into whole TTL seconds within MongoDB\'s limits', () => {
    expect(retentionSeconds(null)).to.equal(null);
    expect(retentionSeconds(30 * 24 * 3600 * 1000)).to.equal(2_592_000);
    expect(retentionSeconds(1_500)).to.equal(2);
    expect(retentionSeconds(1e15)).to.equal(MAX_TTL_SECONDS);
  });
});
