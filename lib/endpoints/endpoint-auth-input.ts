/**
 * An endpoint's `auth`: its rule in the admin API, its sealing at rest and how the API shows it.
 * Pure, like lib/endpoints/endpoint-headers.ts. One of
 *
 *     { "type": "bearer", "token": "…" }
 *     { "type": "basic", "username": "…", "password": "…" }
 *     { "type": "oauth2", "tokenUrl": "https://…", "clientId": "…", "clientSecret": "…", "scope"?: "…", "audience"?: "…" }
 *
 * The secret part (`token`, `password`, `clientSecret`) is sealed before the store sees it and is
 * never shown again: the API shows `tokenSet`, `passwordSet`, `clientSecretSet` in its place.
 * `tokenUrl` follows the rule of endpoint URLs, and is fetched through the same SSRF guard.
 */
import { ValidationError } from '../errors.ts';
import type { EndpointAuth } from '../model.ts';
import { validateEndpointUrl } from '../delivery/validate-url.ts';
import { fieldValue } from './endpoint-headers.ts';

/** The most characters of a credential (token, password, client id or secret). */
export const MAX_CREDENTIAL_CHARS = 4_096;
/** The most characters of a username, a scope or an audience. */
const MAX_NAME_CHARS = 1_024;

export const AuthType = { BEARER: 'bearer', BASIC: 'basic', OAUTH2: 'oauth2' } as const;
export type AuthType = (typeof AuthType)[keyof typeof AuthType];

/** `auth` as the API shows it: never its secret part. */
export type AuthView =
  | { readonly type: 'bearer'; readonly tokenSet: true }
  | { readonly type: 'basic'; readonly username: string; readonly passwordSet: true }
  | {
      readonly type: 'oauth2';
      readonly tokenUrl: string;
      readonly clientId: string;
      readonly clientSecretSet: true;
      readonly scope: string | null;
      readonly audience: string | null;
    };

const FIELDS: Readonly<Record<AuthType, readonly string[]>> = {
  bearer: ['type', 'token'],
  basic: ['type', 'username', 'password'],
  oauth2: ['type', 'tokenUrl', 'clientId', 'clientSecret', 'scope', 'audience'],
};

/**
 * Checks `auth` of a create or update; every field, its secret part included, is required but
 * `scope` and `audience`.
 * @returns it as given (not yet sealed), `tokenUrl` normalised.
 * @throws ValidationError naming `auth.<field>` and the rule.
 */
export function validateAuth(value: unknown, field = 'auth'): EndpointAuth {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, 'must be an object with a type: bearer, basic or oauth2');
  }
  const body = value as Record<string, unknown>;
  const types = Object.values(AuthType) as string[];
  if (typeof body.type !== 'string' || !types.includes(body.type)) {
    throw new ValidationError(`${field}.type`, `must be one of ${types.join(', ')} (got ${JSON.stringify(body.type)})`);
  }
  const type = body.type as AuthType;
  for (const key of Object.keys(body)) {
    if (!FIELDS[type].includes(key)) throw new ValidationError(`${field}.${key}`, `is not a field of ${type} auth (allowed: ${FIELDS[type].join(', ')})`);
  }
  const credential = (key: string, maxChars = MAX_CREDENTIAL_CHARS): string => {
    const text = fieldValue(body[key], `${field}.${key}`, maxChars);
    if (text === '') throw new ValidationError(`${field}.${key}`, 'must not be empty');
    return text;
  };
  switch (type) {
    case AuthType.BEARER:
      return { type, token: credential('token') };
    case AuthType.BASIC: {
      const username = credential('username', MAX_NAME_CHARS);
      // RFC 7617: the user-id cannot hold the colon that ends it.
      if (username.includes(':')) throw new ValidationError(`${field}.username`, 'must not contain ":"');
      return { type, username, password: credential('password') };
    }
    case AuthType.OAUTH2:
      return {
        type,
        tokenUrl: validateEndpointUrl(body.tokenUrl, `${field}.tokenUrl`),
        clientId: credential('clientId'),
        clientSecret: credential('clientSecret'),
        ...(body.scope === undefined ? {} : { scope: credential('scope', MAX_NAME_CHARS) }),
        ...(body.audience === undefined ? {} : { audience: credential('audience', MAX_NAME_CHARS) }),
      };
  }
}

/** `auth` with its secret part sealed by `seal`. */
export function sealAuth(auth: EndpointAuth, seal: (value: string) => string): EndpointAuth {
  switch (auth.type) {
    case AuthType.BEARER:
      return { ...auth, token: seal(auth.token) };
    case AuthType.BASIC:
      return { ...auth, password: seal(auth.password) };
    case AuthType.OAUTH2:
      return { ...auth, clientSecret: seal(auth.clientSecret) };
  }
}

/** The stored secret part of `auth` (sealed, or plain without a key). */
export function authSecretOf(auth: EndpointAuth): string {
  switch (auth.type) {
    case AuthType.BEARER:
      return auth.token;
    case AuthType.BASIC:
      return auth.password;
    case AuthType.OAUTH2:
      return auth.clientSecret;
  }
}

/** `auth` as the API shows it: `null` for none. */
export function authView(auth: EndpointAuth | undefined): AuthView | null {
  if (auth === undefined) return null;
  switch (auth.type) {
    case AuthType.BEARER:
      return { type: auth.type, tokenSet: true };
    case AuthType.BASIC:
      return { type: auth.type, username: auth.username, passwordSet: true };
    case AuthType.OAUTH2:
      return {
        type: auth.type,
        tokenUrl: auth.tokenUrl,
        clientId: auth.clientId,
        clientSecretSet: true,
        scope: auth.scope ?? null,
        audience: auth.audience ?? null,
      };
  }
}
