/**
 * The tenant a repository call is confined to. Every repository method on tenant data takes it
 * first after the transaction, so a query cannot forget it; the scope comes from the
 * authenticated principal (or from the operator's explicit choice), never from request data alone.
 */
export interface TenantScope {
  readonly tmcId: string;
}

export function tenantScope(tmcId: string): TenantScope {
  return Object.freeze({ tmcId });
}
