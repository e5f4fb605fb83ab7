import { expect } from 'chai';
import * as promClient from 'prom-client';
import { Counter, Gauge, Histogram, Registry } from '../../lib/status/prom-client-parts.ts';

describe('prom-client parts (lib/status/prom-client-parts.ts)', () => {
  it('are the very classes prom-client exports, loaded without the rest of prom-client', () => {
    expect(Counter).to.equal(promClient.Counter);
    expect(Gauge).to.equal(promClient.Gauge);
    expect(Histogram).to.equal(promClient.Histogram);
    expect(Registry).to.equal(promClient.Registry);
  });
});
