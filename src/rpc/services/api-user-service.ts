import { type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type {
  ApiUserService,
  CreateApiUserRequest,
  DeleteApiUserRequest,
  GetApiUsersRequest,
  RotateClientSecretRequest,
} from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { DEFAULT_PAGE_SIZE, type ApiUserAdmin } from "../../domain/api-users/api-user-admin.js";
import { unauthenticated } from "../../domain/errors.js";
import { credentialTypeName, roleName } from "../enum-names.js";
import { principalKey } from "../interceptors/access-token-interceptor.js";
import { requestInfoOf } from "../request-context.js";

/** Translates ApiUserService RPCs to the domain; the interceptor has checked token, scope and role. */
export class ApiUserServiceHandler implements ServiceImpl<typeof ApiUserService> {
  constructor(private readonly admin: ApiUserAdmin) {}

  async createApiUser(req: CreateApiUserRequest, ctx: HandlerContext) {
    const created = await this.admin.create(
      callerOf(ctx),
      { tmcId: req.tmcId || undefined, orgId: req.orgId || undefined, role: roleName(req.role), credentialType: credentialTypeName(req.credentialType) },
      requestInfoOf(ctx.values).requestId,
    );
    return { clientId: created.clientId, clientSecret: created.clientSecret ?? "", scimToken: created.scimToken ?? "" };
  }

  async getApiUsers(req: GetApiUsersRequest, ctx: HandlerContext) {
    const page = await this.admin.list(callerOf(ctx), req.limit ?? DEFAULT_PAGE_SIZE, req.offset ?? 0);
    return { apiUsers: page.clientIds.map((clientId) => ({ clientId })), totalCount: page.totalCount };
  }

  async deleteApiUser(req: DeleteApiUserRequest, ctx: HandlerContext) {
    await this.admin.revoke(callerOf(ctx), req.clientId, requestInfoOf(ctx.values).requestId);
    return {};
  }

  async rotateClientSecret(req: RotateClientSecretRequest, ctx: HandlerContext) {
    const rotated = await this.admin.rotate(callerOf(ctx), req.clientId, requestInfoOf(ctx.values).requestId);
    return { clientId: rotated.clientId, clientSecret: rotated.clientSecret ?? "", scimToken: rotated.scimToken ?? "" };
  }
}

function callerOf(ctx: HandlerContext) {
  const principal = ctx.values.get(principalKey);
  if (!principal) throw unauthenticated();
  return principal;
}
