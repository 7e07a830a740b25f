import type { JsonObject } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { ScimCaller } from "../../domain/scim/model.js";
import type { ScimJson } from "../../domain/scim/resource.js";
import { invalidArgument, permissionDenied, unauthenticated } from "../../errors/domain-error.js";
import { scimClientKey } from "../interceptors/authentication-interceptor.js";

/** The SCIM API user the authentication interceptor verified, as the company-confined caller of the SCIM domain. */
export function scimCallerOf(ctx: HandlerContext): ScimCaller {
  const client = ctx.values.get(scimClientKey);
  if (!client) throw unauthenticated("A valid SCIM token is required");
  // SCIM_TOKEN API users are COMPANY_ADMINs of one company (enforced at creation; checked again here).
  if (client.role !== "COMPANY_ADMIN" || !client.orgId)
    throw permissionDenied("SCIM provisioning requires a COMPANY_ADMIN SCIM API user of a company");
  return { clientId: client.clientId, tmcId: client.tmcId, companyId: client.orgId };
}

/**
 * A SCIM body (google.protobuf.Struct, a JSON object in protobuf-es) as the SCIM domain reads it;
 * a missing body is malformed.
 */
export function scimJsonOf(body: JsonObject | undefined, name: string): ScimJson {
  if (!body) throw invalidArgument("The request body must be a SCIM JSON object", [{ name, value: "missing" }]);
  return body as ScimJson;
}

/** A SCIM JSON object as the Struct the response carries (undefined attributes dropped: a Struct holds JSON only). */
export function structOf(json: ScimJson): JsonObject {
  return JSON.parse(JSON.stringify(json)) as JsonObject;
}
