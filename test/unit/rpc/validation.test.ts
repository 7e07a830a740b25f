import { before, describe, test } from "node:test";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { AirCreditService } from "../../../gen/travel/aircredit/v3/air_credit_pb.js";
import type { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import {
  accessToken,
  asOperator,
  asRequest,
  bearer,
  provisionTmc,
  rejectsWithRpc,
  startRpc,
  type RpcHarness,
} from "./harness.js";

const invalid = (params: Array<{ name: string; value: string }>, debugIdentifier?: string) =>
  ({
    code: Code.InvalidArgument,
    errorCode: "API_VALIDATION_FAILED",
    message: "The request is invalid",
    params,
    ...(debugIdentifier ? { debugIdentifier } : {}),
  }) as const;

describe("protovalidate through the interceptor chain", () => {
  let h: RpcHarness;
  let admin: { headers: { authorization: string } };
  let airCredits: Client<typeof AirCreditService>;
  before(async () => {
    h = await startRpc();
    const tenant = await provisionTmc(h);
    admin = bearer(await accessToken(h, tenant.clientId, tenant.clientSecret));
    airCredits = createClient(AirCreditService, h.rpc.transport);
  });

  test("one errorParameter per violated field, named as REST clients name it, with the request id", async () => {
    await rejectsWithRpc(
      asRequest("req-val", "10.5.0.1", () => h.apiUsers.getApiUsers({ limit: 101, offset: -1 }, admin)),
      invalid(
        [
          { name: "limit", value: "must be greater than or equal to 0 and less than or equal to 100" },
          { name: "offset", value: "must be greater than or equal to 0" },
        ],
        "req-val",
      ),
    );
    await rejectsWithRpc(
      h.apiUsers.createApiUser(
        { tmcId: "not-a-uuid", orgId: "also-not", role: 9 as ApiUserRole, credentialType: 7 as ApiUserCredentialType },
        admin,
      ),
      invalid([
        { name: "tmcId", value: "must be a valid UUID" },
        { name: "orgId", value: "must be a valid UUID" },
        { name: "role", value: "value must be one of the defined enum values" },
        { name: "credentialType", value: "value must be one of the defined enum values" },
      ]),
    );
    await rejectsWithRpc(
      h.apiUsers.rotateClientSecret({ clientId: "" }, admin),
      invalid([{ name: "clientId", value: "must be at least 1 characters" }]),
    );
    await rejectsWithRpc(
      h.apiUsers.deleteApiUser({ clientId: "x".repeat(257) }, admin),
      invalid([{ name: "clientId", value: "must be at most 256 characters" }]),
    );
  });

  test("nested and repeated fields get dotted paths with indexes", async () => {
    await rejectsWithRpc(
      airCredits.listCompanyTransferableUnusedCredits(
        { companyId: { id: "nope" }, companyCreditFilter: { selectedAirlines: ["AA", "ABCD"] } },
        admin,
      ),
      invalid([
        { name: "companyId.id", value: "must be a valid UUID" },
        { name: "companyCreditFilter.selectedAirlines[1]", value: "must be at most 3 characters" },
      ]),
    );
    await rejectsWithRpc(
      airCredits.listCompanyTransferableUnusedCredits({}, admin),
      invalid([{ name: "companyId", value: "value is required" }]),
    );
  });

  test("authentication comes first: an invalid request without credentials is 401, not 400", async () => {
    await rejectsWithRpc(h.apiUsers.getApiUsers({ limit: 101 }), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "An access token is required (Authorization: Bearer <token>)",
    });
    await rejectsWithRpc(h.operator.createTmc({ name: "" }), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "A valid operator credential is required",
    });
    await rejectsWithRpc(
      h.operator.createTmc({ name: "" }, asOperator),
      invalid([{ name: "name", value: "must be at least 1 characters" }]),
    );
  });
});
