/**
 * Herald's secret key as text, in the environment, the config or a key file:
 * 32 bytes as standard base64 (44 characters with padding, what
 * `openssl rand -base64 32` prints) or as hex (64 digits, `openssl rand -hex 32`).
 * The two cannot be confused: they differ in length.
 */
import { SECRET_KEY_BYTES } from './secret-box.ts';

/** The rule a key's text follows, for error messages. */
export const SECRET_KEY_RULE = `${SECRET_KEY_BYTES} bytes as base64 (44 characters, \`openssl rand -base64 32\`) or hex (64 digits)`;

const HEX = /^[0-9a-fA-F]{64}$/;
const BASE64 = /^[A-Za-z0-9+/]{43}=?$/;

/** The key bytes, or `undefined` when the text is neither form (surrounding whitespace is ignored). */
export function decodeSecretKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (HEX.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (!BASE64.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed, 'base64');
  // 43 characters carry 258 bits: the last two must be zero, or the text is not a 32-byte key's encoding.
  return key.length === SECRET_KEY_BYTES && key.toString('base64').replace(/=$/, '') === trimmed.replace(/=$/, '') ? key : undefined;
}

/** The key as Herald writes it into a generated key file. */
export function encodeSecretKey(key: Buffer): string {
  return key.toString('base64');
}
