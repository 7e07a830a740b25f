import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type GetUserRequest, type UpdateUserRequest, UserService } from "../../../gen/travel/user/v2/user_pb.js";
import type { UserProfiles } from "../../domain/users/user-profiles.js";
import { callerOf } from "../caller.js";
import { getUserResponseOf, profileCallerOf, profileDocumentOf } from "../mappers/user-mappers.js";
import { requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

/** Translates UserService RPCs to the domain; the interceptors have checked token, scope and the request. */
export class UserServiceHandler implements ServiceImpl<typeof UserService> {
  constructor(private readonly profiles: UserProfiles) {}

  async getUser(req: GetUserRequest, ctx: HandlerContext) {
    return getUserResponseOf(await this.profiles.get(profileCallerOf(callerOf(ctx)), req.userId, req.includeInactive));
  }

  async updateUser(req: UpdateUserRequest, ctx: HandlerContext) {
    await this.profiles.update(
      profileCallerOf(callerOf(ctx)),
      req.userId,
      profileDocumentOf(req),
      requestInfoOf(ctx.values).requestId,
    );
    return {};
  }
}

/** The user area: UserService on the public face. */
export const userArea = defineArea({
  service: UserService,
  face: "public",
  handler: (domain: { readonly userProfiles: UserProfiles }) => new UserServiceHandler(domain.userProfiles),
});
