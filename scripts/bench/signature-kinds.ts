/**
 * `node --import tsx scripts/bench/signature-kinds.ts [rounds]`: what a signature costs by scheme,
 * in one process, one run, so the two are compared on the same machine at the same moment.
 *
 * - inline: µs per `webhook-signature` made on the calling thread, HMAC-SHA256 (`v1`) and ed25519
 *   (`v1a`), for 256 B, 1 KiB and 16 KiB bodies, and their ratio; the sequence signature too;
 * - opening: µs to read a `whsk_` into a signing key (once per loaded endpoint, cached after);
 * - verifying: µs for a consumer's check of one signature (Herald's `verify()`, HMAC vs ed25519);
 * - pooled: 2 000 requests of 1 KiB through the signing pool (`inlineMaxBytes: 0`, 1 worker):
 *   wall µs per request and the main thread's CPU µs per request.
 *
 * Each inline figure is the median of `rounds` (default 7) timed loops of 2 000 signatures after a
 * warm-up. Figures are this machine's, under tsx; the ratio is what carries over.
 * `measureSignatureKinds` returns the same rows (the bench's `features` scenario runs it).
 */
import { pathToFileURL } from 'node:url';
import { ed25519SigningKey, generateEd25519Key } from '../../lib/signing/ed25519-key.ts';
import { generateSecret, secretKey } from '../../lib/signing/secret.ts';
import { sequenceSignatureHeader, signatureHeader, webhookHeaders, type SigningKey } from '../../lib/signing/signature.ts';
import { SigningPool } from '../../lib/signing/signing-pool.ts';
import { verify } from '../../lib/signing/verify.ts';
import { machineNowMs } from './machine-clock.ts';

const LOOP = 2_000;
const TIMESTAMP = 1_767_225_600;

/** What each row measures, as the CLI prints it; the `features` scenario picks rows by it. */
export const SignatureRow = {
  sign256B: 'sign, 256 B body',
  sign1KiB: 'sign, 1 KiB body',
  sign16KiB: 'sign, 16 KiB body',
  sequence: 'sequence signature',
  openKey: 'open the key (once per loaded endpoint)',
  verify1KiB: 'verify(), 1 KiB body (consumer)',
  poolWall: 'pool, 1 KiB + sequence: wall per request',
  poolCpu: 'pool, 1 KiB + sequence: CPU per request (all threads)',
} as const;
export type SignatureRow = (typeof SignatureRow)[keyof typeof SignatureRow];

export interface SignatureKindsSizes {
  /** Timed loops of 2 000 calls per inline figure; the median is kept. */
  readonly rounds: number;
}

export interface SignatureKindsRow {
  readonly what: SignatureRow;
  readonly hmacMicros: number;
  readonly ed25519Micros: number;
  /** ed25519 / HMAC. */
  readonly ratio: number;
}

export interface SignatureKindsResult extends SignatureKindsSizes {
  readonly loop: number;
  readonly rows: readonly SignatureKindsRow[];
}

/** Every row, HMAC then ed25519 each time, with keys made for this run. */
export async function measureSignatureKinds({ rounds }: SignatureKindsSizes): Promise<SignatureKindsResult> {
  const whsec = generateSecret();
  const ed = generateEd25519Key();
  const keys: Record<'hmac' | 'ed25519', SigningKey> = { hmac: secretKey(whsec), ed25519: ed25519SigningKey(ed.secret) };

  /** Median µs per call of `run` over `rounds` loops of LOOP calls. */
  const microsPerCall = (run: (i: number) => unknown): number => {
    for (let i = 0; i < LOOP; i++) run(i);
    const samples: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const started = machineNowMs();
      for (let i = 0; i < LOOP; i++) run(i);
      samples.push(((machineNowMs() - started) * 1000) / LOOP);
    }
    samples.sort((a, b) => a - b);
    return samples[Math.floor(samples.length / 2)] ?? Number.NaN;
  };

  const rows: SignatureKindsRow[] = [];
  const compare = (what: SignatureRow, hmac: number, ed25519: number): void => {
    rows.push({ what, hmacMicros: hmac, ed25519Micros: ed25519, ratio: ed25519 / hmac });
  };

  for (const [size, what] of [[256, SignatureRow.sign256B], [1024, SignatureRow.sign1KiB], [16 * 1024, SignatureRow.sign16KiB]] as const) {
    const body = JSON.stringify({ pad: 'x'.repeat(size - 10) });
    compare(
      what,
      microsPerCall((i) => signatureHeader([keys.hmac], `evt_${i}`, TIMESTAMP, body)),
      microsPerCall((i) => signatureHeader([keys.ed25519], `evt_${i}`, TIMESTAMP, body)),
    );
  }
  compare(
    SignatureRow.sequence,
    microsPerCall((i) => sequenceSignatureHeader([keys.hmac], `evt_${i}`, TIMESTAMP, i + 1)),
    microsPerCall((i) => sequenceSignatureHeader([keys.ed25519], `evt_${i}`, TIMESTAMP, i + 1)),
  );
  compare(
    SignatureRow.openKey,
    microsPerCall(() => secretKey(whsec)),
    microsPerCall(() => ed25519SigningKey(ed.secret)),
  );
  {
    const body = JSON.stringify({ pad: 'x'.repeat(1014) });
    const signed = (key: SigningKey) => webhookHeaders('evt_1', TIMESTAMP, signatureHeader([key], 'evt_1', TIMESTAMP, body));
    const [hmacHeaders, edHeaders] = [signed(keys.hmac), signed(keys.ed25519)];
    compare(
      SignatureRow.verify1KiB,
      microsPerCall(() => verify({ payload: body, headers: hmacHeaders, secret: whsec, nowSec: TIMESTAMP })),
      microsPerCall(() => verify({ payload: body, headers: edHeaders, secret: ed.publicKey, nowSec: TIMESTAMP })),
    );
  }

  const [hmacPool, edPool] = [await pooled(keys.hmac), await pooled(keys.ed25519)];
  compare(SignatureRow.poolWall, hmacPool.wall, edPool.wall);
  compare(SignatureRow.poolCpu, hmacPool.cpu, edPool.cpu);
  return { rounds, loop: LOOP, rows };
}

/** Wall and main-thread CPU µs per request for 2 000 requests of 1 KiB through the pool. */
async function pooled(key: SigningKey): Promise<{ wall: number; cpu: number }> {
  const pool = new SigningPool({ inlineMaxBytes: 0 });
  const body = JSON.stringify({ pad: 'x'.repeat(1014) });
  const batch = (n: number) => Promise.all(Array.from({ length: n }, (_, i) => pool.signRequest({ keys: [key], id: `evt_${i}`, timestampSec: TIMESTAMP, body, sequence: i + 1 })));
  try {
    await batch(500);
    const cpuBefore = process.cpuUsage();
    const started = machineNowMs();
    await batch(2_000);
    const wall = ((machineNowMs() - started) * 1000) / 2_000;
    // The worker's CPU is in process.cpuUsage too: report the wall time, and the CPU of all threads.
    const used = process.cpuUsage(cpuBefore);
    return { wall, cpu: (used.user + used.system) / 2_000 };
  } finally {
    await pool.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await measureSignatureKinds({ rounds: Number(process.argv[2] ?? 7) });
  const fixed = (n: number): string => n.toFixed(n < 10 ? 2 : 1);
  const rows: string[][] = [
    ['what', 'hmac-sha256 µs', 'ed25519 µs', 'ed25519 / hmac'],
    ...result.rows.map((row) => [row.what, fixed(row.hmacMicros), fixed(row.ed25519Micros), `${row.ratio.toFixed(1)}×`]),
  ];
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length))) ?? [];
  for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  '));
  console.log(`\nnode ${process.version}, median of ${result.rounds} loops of ${result.loop}`);
}
