import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  ApiUserService,
  type CreateApiUserRequest,
  type DeleteApiUserRequest,
  type GetApiUsersRequest,
  type RotateClientSecretRequest,
  type SetClientDpopPolicyRequest,
  type SetClientKeysRequest,
} from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { DEFAULT_PAGE_SIZE, type ApiUserAdmin } from "../../domain/api-users/api-user-admin.js";
import { callerOf } from "../caller.js";
import { credentialResponse, credentialTypeName, roleName } from "../mappers/api-user-mappers.js";
import { requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

/** Translates ApiUserService RPCs to the domain; the interceptor has checked token, scope and role. */
export class ApiUserServiceHandler implements ServiceImpl<typeof ApiUserService> {
  constructor(private readonly admin: ApiUserAdmin) {}

  async createApiUser(req: CreateApiUserRequest, ctx: HandlerContext) {
    const request = {
      tmcId: req.tmcId || undefined,
      orgId: req.orgId || undefined,
      role: roleName(req.role),
      credentialType: credentialTypeName(req.credentialType),
    };
    return credentialResponse(await this.admin.create(callerOf(ctx), request, requestInfoOf(ctx.values).requestId));
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
    return credentialResponse(
      await this.admin.rotate(callerOf(ctx), req.clientId, requestInfoOf(ctx.values).requestId),
    );
  }

  async setClientKeys(req: SetClientKeysRequest, ctx: HandlerContext) {
    const { requestId } = requestInfoOf(ctx.values);
    // proto3 has no absence: no keys, or an empty URL, is the field not given.
    const registration = {
      jwks: req.keys.length > 0 ? { keys: req.keys } : undefined,
      jwksUri: req.jwksUri === "" ? undefined : req.jwksUri,
    };
    const registered = await this.admin.setKeys(callerOf(ctx), req.clientId, registration, requestId);
    return { clientId: req.clientId, ...registered };
  }

  async setClientDpopPolicy(req: SetClientDpopPolicyRequest, ctx: HandlerContext) {
    const { requestId } = requestInfoOf(ctx.values);
    const required = await this.admin.setDpopPolicy(callerOf(ctx), req.clientId, req.dpopBoundAccessTokens, requestId);
    return { clientId: req.clientId, dpopBoundAccessTokens: required };
  }
}

/** The API-user area: ApiUserService on the public face. */
export const apiUserArea = defineArea({
  service: ApiUserService,
  face: "public",
  handler: (domain: { readonly apiUserAdmin: ApiUserAdmin }) => new ApiUserServiceHandler(domain.apiUserAdmin),
});
