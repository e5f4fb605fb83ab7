/**
 * Tenant tokens: the admin issues one for a tenant, hands it to that tenant's
 * developers, and they use the admin API (and the portal) on their own
 * tenant's data only (`lib/tenants/caller-scope.ts` decides what they may do).
 *
 * A token reads `htk_<32 hex>_<43 base64url>`: its record's id, then its
 * secret. It is shown once, when issued; the store keeps the id and a SHA-256
 * of the secret. Checking it is one read by primary key and a constant-time
 * compare of two digests.
 *
 * Why a fast hash and not scrypt or bcrypt: those slow down guessing a
 * password a person chose. This secret is 32 random bytes from the system's
 * CSPRNG (256 bits): no guess gets anywhere, fast hash or slow, and a slow hash
 * would cost every API call tens of milliseconds of CPU for nothing. SHA-256
 * still means a copy of the store does not hold usable tokens.
 *
 * Revocation: there is no cache; every request reads the token's record, so a
 * token deleted (revoked) or past its `expiresAt` is refused by every node
 * from its next request.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ISO_TIME_RULE, parseDate, type Clock } from '../clock.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import { identifier } from '../endpoints/endpoint-input.ts';
import { newId } from '../ids.ts';
import type { TenantToken } from '../model.ts';
import type { Store } from '../store/port.ts';

/** A token as the API lists it: never its secret or the secret's hash. */
export type TenantTokenView = Omit<TenantToken, 'secretHash'>;

/** The text of a token: its id (`htk_` + 32 hex digits), `_`, then 32 random bytes in base64url. */
const TOKEN_TEXT = /^(htk_[0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

const SECRET_BYTES = 32;
const MAX_NAME_LENGTH = 128;
const ISSUE_FIELDS = ['name', 'expiresAt'] as const;

export interface TenantTokensDeps {
  readonly store: Store;
  readonly clock: Clock;
}

export class TenantTokens {
  readonly #store: Store;
  readonly #clock: Clock;

  constructor(deps: TenantTokensDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  /**
   * Issues a token for `tenantId` from `{name?, expiresAt?}` (or nothing). The tenant need not have
   * an endpoint yet: its developers may create the first one with the token.
   * @returns the record as listed, and the token, which is not kept and cannot be shown again.
   * @throws ValidationError naming `tenantId`, `name`, `expiresAt` or an unknown field.
   */
  async issue(tenantId: string, input: unknown): Promise<{ readonly record: TenantTokenView; readonly token: string }> {
    identifier(tenantId, 'tenantId');
    const now = this.#clock.now();
    const { name, expiresAt } = validateIssueInput(input ?? {}, now);
    const id = newId('htk');
    const secret = randomBytes(SECRET_BYTES).toString('base64url');
    const record: TenantToken = { id, tenantId, name, secretHash: sha256Hex(secret), createdAt: now, expiresAt };
    await this.#store.createTenantToken(record);
    return { record: viewOf(record), token: `${id}_${secret}` };
  }

  /** The tenant's tokens, oldest first. */
  async list(tenantId: string): Promise<TenantTokenView[]> {
    identifier(tenantId, 'tenantId');
    return (await this.#store.listTenantTokens(tenantId)).map(viewOf);
  }

  /**
   * Revokes (deletes) one of the tenant's tokens: refused from the next request on, on every node.
   * @throws NotFoundError (`tokenId`) when the tenant has no such token.
   */
  async revoke(tenantId: string, id: string): Promise<void> {
    if (!(await this.#store.deleteTenantToken(tenantId, id))) throw new NotFoundError('token', id, 'tokenId');
  }

  /** The token's record when `text` is a live token (issued, not revoked, not expired); else undefined. */
  async authenticate(text: string): Promise<TenantToken | undefined> {
    const match = TOKEN_TEXT.exec(text);
    if (match === null) return undefined;
    const [, id = '', secret = ''] = match;
    const record = await this.#store.getTenantToken(id);
    if (record === undefined) return undefined;
    const stored = Buffer.from(record.secretHash, 'hex');
    const given = createHash('sha256').update(secret).digest();
    if (stored.length !== given.length || !timingSafeEqual(stored, given)) return undefined;
    if (record.expiresAt !== null && record.expiresAt <= this.#clock.now()) return undefined;
    return record;
  }
}

/** True when `text` has the shape of a tenant token (not whether it is valid). */
export function looksLikeTenantToken(text: string): boolean {
  return TOKEN_TEXT.test(text);
}

function validateIssueInput(input: unknown, now: number): { name: string; expiresAt: number | null } {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ValidationError('body', 'must be a JSON object');
  const body = input as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!(ISSUE_FIELDS as readonly string[]).includes(key)) throw new ValidationError(key, `is not a known field (allowed: ${ISSUE_FIELDS.join(', ')})`);
  }
  const name = body.name ?? '';
  if (typeof name !== 'string' || name.length > MAX_NAME_LENGTH || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new ValidationError('name', `must be a string of at most ${MAX_NAME_LENGTH} characters without control characters`);
  }
  return { name, expiresAt: body.expiresAt == null ? null : expiryOf(body.expiresAt, now) };
}

/** Epoch milliseconds or an ISO-8601 date-time, in the future. */
function expiryOf(value: unknown, now: number): number {
  const at = typeof value === 'number' ? value : typeof value === 'string' ? parseDate(value) : undefined;
  if (at === undefined || !Number.isSafeInteger(at)) {
    throw new ValidationError('expiresAt', `must be epoch milliseconds or ${ISO_TIME_RULE.replace(/^must be /, '')} (got ${JSON.stringify(value)})`);
  }
  if (at <= now) throw new ValidationError('expiresAt', `must be in the future (got ${new Date(at).toISOString()})`);
  return at;
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function viewOf(record: TenantToken): TenantTokenView {
  const { secretHash: _, ...view } = record;
  return view;
}
