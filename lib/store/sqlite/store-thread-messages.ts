/**
 * What the SQLite store thread and its caller say to each other, and how a
 * Herald error crosses between them: structured clone keeps an Error's
 * message but not its class, and the engine branches on classes and codes.
 */
import {
  ClosedError,
  ConflictError,
  ErrorCode,
  HeraldError,
  NotFoundError,
  PayloadTooLargeError,
  StoreError,
  ValidationError,
} from '../../errors.ts';
import type { Store } from '../port.ts';

export type StoreThreadMethod = Exclude<keyof Store, 'watch'>;

export type StoreThreadRequest =
  | { readonly type: 'call'; readonly id: number; readonly method: StoreThreadMethod; readonly args: readonly unknown[] }
  | { readonly type: 'watch' }
  | { readonly type: 'unwatch' };

export type StoreThreadReply =
  | { readonly type: 'result'; readonly id: number; readonly value: unknown }
  | { readonly type: 'error'; readonly id: number; readonly error: SerialisedError }
  | { readonly type: 'changed' };

/** An error as plain data: its class name and own fields (`code`, `field`, `rule`, …). */
export interface SerialisedError {
  readonly className: string;
  readonly message: string;
  readonly stack: string | undefined;
  readonly fields: Readonly<Record<string, unknown>>;
}

/** The classes a store may throw; anything else arrives as a `StoreError`. */
const CLASSES: Readonly<Record<string, { readonly prototype: HeraldError }>> = {
  HeraldError,
  ValidationError,
  PayloadTooLargeError,
  NotFoundError,
  ConflictError,
  StoreError,
  ClosedError,
};

export function serialiseError(error: unknown): SerialisedError {
  if (error instanceof HeraldError) {
    const fields: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(error)) if (key !== 'cause') fields[key] = value;
    return { className: error.constructor.name, message: error.message, stack: error.stack, fields };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { className: 'StoreError', message: `sqlite: ${message}`, stack: error instanceof Error ? error.stack : undefined, fields: { code: ErrorCode.STORE, name: 'StoreError' } };
}

/** The error again, of its own class (built without its constructor, which would reword the message). */
export function rebuildError(serialised: SerialisedError): HeraldError {
  const known = CLASSES[serialised.className];
  const error = Object.create((known ?? StoreError).prototype) as HeraldError;
  Object.defineProperty(error, 'message', { value: serialised.message, writable: true, configurable: true });
  Object.defineProperty(error, 'stack', { value: serialised.stack, writable: true, configurable: true });
  Object.assign(error, serialised.fields);
  // A class this side does not know arrives as a store error, whatever its fields said.
  if (known === undefined) Object.assign(error, { code: ErrorCode.STORE, name: 'StoreError' });
  return error;
}
