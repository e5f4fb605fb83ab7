/**
 * One Herald node of the cluster scenario, forked by it:
 *   tsx scripts/bench/cluster-node.ts '<config overrides as JSON>'
 *
 * Over IPC it reports `{type: 'starting', at}` as it calls `herald.start()`,
 * `{type: 'slots', count, at}` whenever the number of slots it holds
 * changes and `{type: 'delivered', count, at}` (a running total, and when the
 * last of them was settled on the machine's monotonic clock) every 50 ms
 * while it delivers; `{type: 'close'}` closes it in order (leases released),
 * then it exits.
 */
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { machineNowMs } from './machine-clock.ts';

const overrides = JSON.parse(process.argv[2] ?? '{}') as ConfigOverrides;
const herald = await Herald.open(resolveConfig(overrides));
let delivered = 0;
let deliveredAt = 0;
let reported = 0;
herald.events.on('attempt', (e) => {
  if (e.applied && e.settlement.kind === 'delivered') {
    delivered += 1;
    deliveredAt = machineNowMs();
  }
});
let slots = -1;
herald.events.on('leases', (e) => {
  if (e.slots.length === slots) return;
  slots = e.slots.length;
  process.send?.({ type: 'slots', count: slots, at: machineNowMs() });
});
herald.events.on('failure', (e) => process.stderr.write(`cluster node: failure in ${e.where}: ${String(e.error)}\n`));
process.send?.({ type: 'starting', at: machineNowMs() });
await herald.start();

const report = setInterval(() => {
  if (delivered === reported) return;
  reported = delivered;
  process.send?.({ type: 'delivered', count: delivered, at: deliveredAt });
}, 50);
process.on('message', (message: { type: string }) => {
  if (message.type !== 'close') return;
  clearInterval(report);
  void herald.close().then(() => process.exit(0));
});
// The bench went away: never outlive it.
process.on('disconnect', () => process.exit(0));
