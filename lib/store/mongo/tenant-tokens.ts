/**
 * Tenant tokens in MongoDB (lib/tenants/tenant-tokens.ts): looked up by `_id`
 * on every request a tenant makes, listed per tenant for the admin.
 */
import { ConflictError } from '../../errors.ts';
import type { TenantToken } from '../../model.ts';
import type { StoreDb } from './collections.ts';
import { isDuplicateKeyError } from './mongo-errors.ts';
import type { TenantTokenDoc } from './schema.ts';

export async function createTenantToken({ tenantTokens }: StoreDb, token: TenantToken): Promise<void> {
  try {
    await tenantTokens.insertOne(tenantTokenToDoc(token));
  } catch (error) {
    if (isDuplicateKeyError(error)) throw new ConflictError(`tenant token '${token.id}' already exists`);
    throw error;
  }
}

export async function getTenantToken({ tenantTokens }: StoreDb, id: string): Promise<TenantToken | undefined> {
  const doc = await tenantTokens.findOne({ _id: id });
  return doc === null ? undefined : tenantTokenFromDoc(doc);
}

export async function listTenantTokens({ tenantTokens }: StoreDb, tenantId: string): Promise<TenantToken[]> {
  return (await tenantTokens.find({ tenantId }).sort({ createdAt: 1, _id: 1 }).toArray()).map(tenantTokenFromDoc);
}

export async function deleteTenantToken({ tenantTokens }: StoreDb, tenantId: string, id: string): Promise<boolean> {
  const { deletedCount } = await tenantTokens.deleteOne({ _id: id, tenantId });
  return deletedCount > 0;
}

export function tenantTokenToDoc(token: TenantToken): TenantTokenDoc {
  const { id, ...rest } = token;
  return { _id: id, ...rest };
}

export function tenantTokenFromDoc(doc: TenantTokenDoc): TenantToken {
  return { id: doc._id, tenantId: doc.tenantId, name: doc.name, secretHash: doc.secretHash, createdAt: doc.createdAt, expiresAt: doc.expiresAt };
}
