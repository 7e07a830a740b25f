import { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import type {
  ApiUserCredentialType as CredentialTypeName,
  ApiUserRole as RoleName,
  CreatedApiUser,
} from "../../domain/api-users/model.js";

/** Unset means the documented default (spec 2.2, 2.3). */
export function roleName(role: ApiUserRole): RoleName {
  return role === ApiUserRole.COMPANY_ADMIN ? "COMPANY_ADMIN" : "TMC_ADMIN";
}

export function credentialTypeName(type: ApiUserCredentialType): CredentialTypeName {
  return type === ApiUserCredentialType.SCIM_TOKEN ? "SCIM_TOKEN" : "CLIENT_CREDENTIALS";
}

/** CreateApiUserResponse and RotateClientSecretResponse share this shape: the credential, shown once. */
export function credentialResponse(created: CreatedApiUser) {
  return { clientId: created.clientId, clientSecret: created.clientSecret ?? "", scimToken: created.scimToken ?? "" };
}
