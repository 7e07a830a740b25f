import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type CreateUserRequest,
  type DeleteUserRequest,
  type GetResourceTypeRequest,
  type GetSchemaRequest,
  type GetUserRequest,
  type ListUsersRequest,
  type PatchUserRequest,
  type ReplaceUserRequest,
  ScimService,
} from "../../../gen/travel/scim/v2/scim_pb.js";
import type { ScimUsers } from "../../domain/scim/scim-users.js";
import { patchOperationsOf, scimCallerOf, structOf, userDocumentOf } from "../mappers/scim-mappers.js";
import { requestInfoOf } from "../request-context.js";
import { defineArea } from "../area.js";

/**
 * Translates ScimService RPCs to the SCIM domain; the interceptor has checked the SCIM token.
 * Create sets Location (RFC 7644 3.3); the gateway answers 201 as the contract declares.
 */
export class ScimServiceHandler implements ServiceImpl<typeof ScimService> {
  constructor(private readonly scim: ScimUsers) {}

  async listUsers(req: ListUsersRequest, ctx: HandlerContext) {
    const list = await this.scim.list(scimCallerOf(ctx), {
      filter: req.filter,
      startIndex: req.startIndex,
      count: req.count,
      attributes: req.attributes,
      excludedAttributes: req.excludedAttributes,
    });
    return { resource: structOf(list) };
  }

  async getUser(req: GetUserRequest, ctx: HandlerContext) {
    const user = await this.scim.get(scimCallerOf(ctx), req.userId, {
      attributes: req.attributes,
      excludedAttributes: req.excludedAttributes,
    });
    return { resource: structOf(user) };
  }

  async createUser(req: CreateUserRequest, ctx: HandlerContext) {
    const caller = scimCallerOf(ctx);
    const { resource, location } = await this.scim.create(
      caller,
      userDocumentOf(req.resource),
      requestInfoOf(ctx.values).requestId,
    );
    ctx.responseHeader.set("location", location);
    return { resource: structOf(resource) };
  }

  async replaceUser(req: ReplaceUserRequest, ctx: HandlerContext) {
    const caller = scimCallerOf(ctx);
    return {
      resource: structOf(
        await this.scim.replace(caller, req.userId, userDocumentOf(req.resource), requestInfoOf(ctx.values).requestId),
      ),
    };
  }

  async patchUser(req: PatchUserRequest, ctx: HandlerContext) {
    const caller = scimCallerOf(ctx);
    return {
      resource: structOf(
        await this.scim.patch(caller, req.userId, patchOperationsOf(req.patch), requestInfoOf(ctx.values).requestId),
      ),
    };
  }

  async deleteUser(req: DeleteUserRequest, ctx: HandlerContext) {
    await this.scim.delete(scimCallerOf(ctx), req.userId, requestInfoOf(ctx.values).requestId);
    return {};
  }

  async getServiceProviderConfig(_req: unknown, ctx: HandlerContext) {
    scimCallerOf(ctx);
    return { resource: structOf(this.scim.serviceProviderConfig()) };
  }

  async listResourceTypes(_req: unknown, ctx: HandlerContext) {
    scimCallerOf(ctx);
    return { resource: structOf(this.scim.resourceTypes()) };
  }

  async getResourceType(req: GetResourceTypeRequest, ctx: HandlerContext) {
    scimCallerOf(ctx);
    return { resource: structOf(this.scim.resourceType(req.resourceTypeId)) };
  }

  async listSchemas(_req: unknown, ctx: HandlerContext) {
    scimCallerOf(ctx);
    return { resource: structOf(this.scim.schemas()) };
  }

  async getSchema(req: GetSchemaRequest, ctx: HandlerContext) {
    scimCallerOf(ctx);
    return { resource: structOf(this.scim.schema(req.schemaId)) };
  }
}

/** The SCIM area: ScimService on the public face. */
export const scimArea = defineArea({
  service: ScimService,
  face: "public",
  handler: (domain: { readonly scimUsers: ScimUsers }) => new ScimServiceHandler(domain.scimUsers),
});
