import { operatorCall, type RunningService } from "../helpers/service.js";

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
export const ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";
export const LIST_RESPONSE = "urn:ietf:params:scim:api:messages:2.0:ListResponse";

/** A company with its SCIM API user. */
export interface ScimTenant {
  readonly tmcId: string;
  readonly orgId: string;
  readonly clientId: string;
  readonly scimToken: string;
}

export async function newTmc(baseUrl: string, name: string): Promise<string> {
  const { tmcId } = await operatorCall<{ tmcId: string }>(baseUrl, "CreateTmc", { name, maxApiUsers: 50 });
  return tmcId;
}

/** A company of the TMC and a COMPANY_ADMIN SCIM_TOKEN API user for it. */
export async function newScimCompany(baseUrl: string, tmcId: string, name: string): Promise<ScimTenant> {
  const { orgId } = await operatorCall<{ orgId: string }>(baseUrl, "CreateCompany", { tmcId, name });
  const { clientId, scimToken } = await operatorCall<{ clientId: string; scimToken: string }>(
    baseUrl,
    "CreateApiUser",
    {
      tmcId,
      orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    },
  );
  return { tmcId, orgId, clientId, scimToken };
}

export interface ScimAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly location: string | null;
  readonly body: any;
}

/** One SCIM request as an IdP sends it (application/scim+json unless told otherwise). */
export async function scim(
  running: RunningService,
  token: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/scim+json",
): Promise<ScimAnswer> {
  const response = await fetch(`${running.baseUrl}${path}`, {
    method,
    headers: {
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { "content-type": contentType } : {}),
      accept: "application/scim+json",
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return {
    status: response.status,
    contentType: response.headers.get("content-type") ?? "",
    location: response.headers.get("location"),
    body: parsed,
  };
}

export function newUser(userName: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schemas: [USER_SCHEMA],
    userName,
    name: { givenName: "Ada", familyName: "Lovelace" },
    active: true,
    ...extra,
  };
}

/** Asserts the RFC 7644 3.12 error shape; returns the body. */
export function scimError(answer: ScimAnswer, status: number, scimType?: string): any {
  const { body } = answer;
  const problems: string[] = [];
  if (answer.status !== status) problems.push(`status ${answer.status} (expected ${status})`);
  if (!answer.contentType.startsWith("application/scim+json")) problems.push(`content-type ${answer.contentType}`);
  if (!body || !Array.isArray(body.schemas) || body.schemas[0] !== ERROR_SCHEMA) problems.push("no SCIM Error schemas");
  if (body?.status !== String(status)) problems.push(`body status ${JSON.stringify(body?.status)}`);
  if (scimType !== undefined && body?.scimType !== scimType)
    problems.push(`scimType ${JSON.stringify(body?.scimType)} (expected ${scimType})`);
  if (typeof body?.detail !== "string" || body.detail === "") problems.push("no detail");
  if (problems.length > 0) throw new Error(`${problems.join("; ")}: ${JSON.stringify(body)}`);
  return body;
}
