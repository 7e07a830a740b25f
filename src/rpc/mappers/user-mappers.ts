import { fromJson, toJson, type JsonObject } from "@bufbuild/protobuf";
import {
  GetUserResponseSchema,
  UpdateUserRequestSchema,
  type GetUserResponse,
  type UpdateUserRequest,
} from "../../../gen/travel/user/v2/user_pb.js";
import type { ProfileCaller, ProfileDocument } from "../../domain/users/model.js";
import type { Principal } from "../../domain/tokens/model.js";
import { invalidArgument } from "../../errors/domain-error.js";

/** The profile operations' caller: the API user behind the access token. */
export function profileCallerOf(principal: Principal): ProfileCaller {
  return { clientId: principal.clientId, tmcId: principal.tmcId, orgId: principal.orgId, role: principal.role };
}

/**
 * The update request's document as the reference's JSON (JSON names, enum names, int64 as
 * strings), without the path's userId: what the domain stores.
 */
export function profileDocumentOf(request: UpdateUserRequest): ProfileDocument {
  let json: JsonObject;
  try {
    json = toJson(UpdateUserRequestSchema, request) as JsonObject;
  } catch (error) {
    // A value protobuf JSON cannot express (a Struct number that is NaN or infinite, sent in binary).
    throw invalidArgument("The request holds a value that has no JSON form", [
      { name: "body", value: error instanceof Error ? error.message : "not JSON" },
    ]);
  }
  delete json.userId;
  return json as ProfileDocument;
}

/** GetUserResponse from the stored document (fields it does not know are left out). */
export function getUserResponseOf(document: ProfileDocument): GetUserResponse {
  return fromJson(GetUserResponseSchema, document as JsonObject, { ignoreUnknownFields: true });
}
