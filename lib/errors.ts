/**
 * Herald's errors: one base class with a stable `code`, a few subclasses by
 * category. Branch on `code` or on the predicates below, never on messages.
 * Every code is listed in docs/CONFIGURATION.md under "Errors".
 */

export const ErrorCode = {
  /** A field of an input broke a rule; `field` and `rule` say which. */
  INVALID_INPUT: 'HERALD_INVALID_INPUT',
  /** A payload is larger than `delivery.maxPayloadBytes`, or a request body than `api.maxRequestBytes`. */
  PAYLOAD_TOO_LARGE: 'HERALD_PAYLOAD_TOO_LARGE',
  /** An endpoint, tenant, delivery or dead letter does not exist. */
  NOT_FOUND: 'HERALD_NOT_FOUND',
  /** The request conflicts with the current state (e.g. replaying a dead letter twice). */
  CONFLICT: 'HERALD_CONFLICT',
  /** A configuration key holds a value that breaks its rule. */
  INVALID_CONFIG: 'HERALD_INVALID_CONFIG',
  /** The store failed or is unreachable. */
  STORE: 'HERALD_STORE',
  /** The SSRF guard refused the address a request would connect to. */
  BLOCKED_ADDRESS: 'HERALD_BLOCKED_ADDRESS',
  /** The egress proxy refused, failed or timed out before the tunnel to an endpoint was up (`status`, `proxy`). */
  PROXY: 'HERALD_PROXY_FAILED',
  /** A write was refused because this process no longer holds the slot's lease. */
  FENCED: 'HERALD_FENCED',
  /** The component was closed. */
  CLOSED: 'HERALD_CLOSED',
  /** The admin API was called without a valid bearer token (admin, or a live tenant token). */
  UNAUTHORIZED: 'HERALD_UNAUTHORIZED',
  /** A tenant token called a route that only the admin token may use. */
  FORBIDDEN: 'HERALD_FORBIDDEN',
  /** A webhook's signature, id or timestamp did not verify (thrown by `verify()`). */
  INVALID_SIGNATURE: 'HERALD_INVALID_SIGNATURE',
  /** An endpoint's stored secret was sealed with a key this node does not hold (`keyId`, `endpointId`). */
  SECRET_KEY_UNKNOWN: 'HERALD_SECRET_KEY_UNKNOWN',
  /** An endpoint's stored secret does not decrypt: altered, copied from another endpoint, or malformed. */
  SECRET_UNREADABLE: 'HERALD_SECRET_UNREADABLE',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class HeraldError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Bad input: names the field and the rule it broke. */
export class ValidationError extends HeraldError {
  readonly field: string;
  readonly rule: string;

  constructor(field: string, rule: string, options?: { code?: ErrorCode; cause?: unknown }) {
    super(options?.code ?? ErrorCode.INVALID_INPUT, `${field}: ${rule}`, options);
    this.field = field;
    this.rule = rule;
  }
}

export class PayloadTooLargeError extends ValidationError {
  /** @param hint what to do about it, appended to the rule */
  constructor(field: string, sizeBytes: number, maxBytes: number, hint?: string) {
    super(field, `must be at most ${maxBytes} bytes (got ${sizeBytes})${hint === undefined ? '' : `; ${hint}`}`, {
      code: ErrorCode.PAYLOAD_TOO_LARGE,
    });
  }
}

export class NotFoundError extends HeraldError {
  readonly resource: string;
  readonly id: string;
  /** The input field that named the missing thing (`tenantId`, `endpointId`, …). */
  readonly field: string;

  constructor(resource: string, id: string, field = `${resource}Id`) {
    super(ErrorCode.NOT_FOUND, `${field}: unknown ${resource} '${id}'`);
    this.resource = resource;
    this.id = id;
    this.field = field;
  }
}

export class ConflictError extends HeraldError {
  constructor(message: string) {
    super(ErrorCode.CONFLICT, message);
  }
}

/** A configuration value broke its rule; names the key, the value and the rule. */
export class ConfigError extends HeraldError {
  readonly key: string;

  constructor(key: string, value: unknown, rule: string) {
    super(ErrorCode.INVALID_CONFIG, `config ${key}=${JSON.stringify(value)}: ${rule}`);
    this.key = key;
  }
}

export class StoreError extends HeraldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.STORE, message, options);
  }
}

export class BlockedAddressError extends HeraldError {
  readonly address: string;

  constructor(address: string, host: string) {
    super(
      ErrorCode.BLOCKED_ADDRESS,
      `refused to connect to ${address} (for ${host}): private, loopback, link-local or metadata address; add it to allowNetworks to permit it`,
    );
    this.address = address;
  }
}

/**
 * The egress proxy (`delivery.proxy`) did not open the tunnel to an endpoint: refused or cut the
 * connection, answered the CONNECT with a non-2xx status, or did not answer in time. Nothing
 * reached the endpoint. Names the proxy without its password.
 */
export class ProxyError extends HeraldError {
  /** The proxy's answer to the CONNECT (407, 502, …); `null` when it gave none. */
  readonly status: number | null;
  /** The proxy's URL without its password. */
  readonly proxy: string;

  constructor(proxy: string, status: number | null, what: string, options?: { cause?: unknown }) {
    super(ErrorCode.PROXY, status === null ? `proxy ${proxy}: ${what}` : `${status} from proxy ${proxy}: ${what}`, options);
    this.status = status;
    this.proxy = proxy;
  }
}

export class ClosedError extends HeraldError {
  constructor(what: string) {
    super(ErrorCode.CLOSED, `${what} is closed`);
  }
}

export class UnauthorizedError extends HeraldError {
  constructor() {
    super(ErrorCode.UNAUTHORIZED, 'Authorization: a valid "Bearer <token>" header is required (the admin token, or a tenant token not revoked or expired)');
  }
}

/** A tenant token asked for a route only the admin token may use; names the route. */
export class ForbiddenError extends HeraldError {
  constructor(route: string) {
    super(ErrorCode.FORBIDDEN, `${route} needs the admin token: a tenant token may not use it`);
  }
}

/**
 * A stored endpoint secret this node cannot open. Names the endpoint and the
 * key id, never the secret. `SECRET_KEY_UNKNOWN`: sealed with a key missing
 * from `secrets.key`/`secrets.previousKeys`; `SECRET_UNREADABLE`: the
 * authentication tag does not match (altered, or copied from another endpoint's
 * row) or the value is not in a known form.
 */
export class SecretUnreadableError extends HeraldError {
  readonly endpointId: string;
  /** The 8-hex fingerprint of the key it was sealed with; `null` when the value is not even parseable. */
  readonly keyId: string | null;

  constructor(
    code: typeof ErrorCode.SECRET_KEY_UNKNOWN | typeof ErrorCode.SECRET_UNREADABLE,
    endpointId: string,
    keyId: string | null,
    why: string,
    options?: { cause?: unknown },
  ) {
    super(code, `endpoint '${endpointId}': its secret ${keyId === null ? '' : `(key ${keyId}) `}${why}`, options);
    this.endpointId = endpointId;
    this.keyId = keyId;
  }
}

export function isHeraldError(error: unknown): error is HeraldError {
  return error instanceof HeraldError;
}

export function hasCode(error: unknown, code: ErrorCode): boolean {
  return isHeraldError(error) && error.code === code;
}

/**
 * The message of any thrown value, for the text of an error that wraps it (the thrown value
 * itself goes in `cause`). An `AggregateError` without a message of its own (Node's connect
 * errors when every address of a host failed) answers its errors' messages.
 */
export function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.message === '') {
    return error.errors.map(messageOf).join('; ');
  }
  return error instanceof Error ? error.message : String(error);
}
