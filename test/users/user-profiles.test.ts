// User profiles: GET and PUT /v2/users/{userId} through REST (fetch
// against a started service) and gRPC (@grpc/grpc-js, an independent client built from the
// .proto files), on the backend TEST_BACKEND names. Every access rule, the 404 rule (another
// tenant's or company's user looks exactly like an unknown id), inactive users, validation, the
// PUT → GET round trip of a rich document, refused identity changes with nothing written, the
// stored column mapping and the audit row.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fromJson, toJson, type JsonObject } from "@bufbuild/protobuf";
import { GetUserResponseSchema } from "../../gen/travel/user/v2/user_pb.js";
import { internalsOf } from "../../src/app/test-access.js";
import { withRestDefaults } from "../../src/gateway/json-shape.js";
import { backend } from "../helpers/backend.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { operatorCall, seedDemo, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  disposeService,
  newApiUser,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
  type Tenant,
} from "../helpers/token-kit.js";

const GRPC_STATUS = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16 } as const;

// ---- REST ------------------------------------------------------------------------------------

interface Reply {
  status: number;
  body: any;
  text: string;
}

async function rest(
  baseUrl: string,
  method: "GET" | "PUT",
  path: string,
  token: string | undefined,
  body?: unknown,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed, text };
}

/** An ErrorResponse without its per-request debugIdentifier (asserted non-empty). */
function errorOf(reply: Reply, status: number): Record<string, unknown> {
  assert.equal(reply.status, status, `expected ${status}, got ${reply.status} ${reply.text}`);
  const { debugIdentifier, ...rest } = reply.body as Record<string, unknown>;
  assert.match(String(debugIdentifier), /\S/);
  return rest;
}

/** An ErrorResponse as canonical JSON writes it (empty errorParameters and errorDetail left out). */
function errorBody(errorCode: string, message: string, errorParameters: Array<{ name: string; value: string }> = []) {
  return { errorMessages: [{ errorCode, message, ...(errorParameters.length > 0 ? { errorParameters } : {}) }] };
}

/**
 * A profile as the REST face writes it: canonical protobuf JSON plus the gateway's one rule
 * (lists, numbers and booleans always appear; see src/gateway/json-shape.ts).
 */
function asRest(profile: object): JsonObject {
  return withRestDefaults(
    GetUserResponseSchema,
    toJson(GetUserResponseSchema, fromJson(GetUserResponseSchema, profile as JsonObject)) as JsonObject,
  );
}

const notFoundBody = (userId: string) => errorBody("NOT_FOUND", "User not found", [{ name: "userId", value: userId }]);

// ---- gRPC ------------------------------------------------------------------------------------

const root = fileURLToPath(new URL("../../", import.meta.url));

interface GrpcOutcome {
  ok: boolean;
  response?: any;
  code?: number;
  errorResponse?: ReturnType<typeof errorResponseIn>;
}

function userServiceClient(baseUrl: string) {
  const pkg: any = grpc.loadPackageDefinition(
    protoLoader.loadSync(["travel/user/v2/user.proto"], {
      includeDirs: [`${root}proto`],
      keepCase: false,
      longs: String,
      enums: String,
      defaults: false,
      oneofs: true,
    }),
  );
  const client = new pkg.travel.user.v2.UserService(
    new URL(baseUrl).host,
    grpc.credentials.createInsecure(),
  ) as grpc.Client & Record<string, any>;
  return {
    call(method: "getUser" | "updateUser", request: Record<string, unknown>, token?: string): Promise<GrpcOutcome> {
      const metadata = new grpc.Metadata();
      if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
      return new Promise((resolve) => {
        client[method](
          request,
          metadata,
          { deadline: Date.now() + 10_000 },
          (err: grpc.ServiceError | null, res: any) => {
            if (!err) return resolve({ ok: true, response: res });
            const [raw] = err.metadata?.get("grpc-status-details-bin") ?? [];
            const errorResponse = Buffer.isBuffer(raw)
              ? errorResponseIn(decodeRpcStatus(new Uint8Array(raw)).details)
              : undefined;
            resolve({ ok: false, code: err.code, errorResponse });
          },
        );
      });
    },
    close: () => client.close(),
  };
}

function assertGrpcError(
  outcome: GrpcOutcome,
  code: number,
  errorCode: string,
  message: string,
  errorParameters: Array<{ name: string; value: string }> = [],
): void {
  assert.equal(outcome.ok, false, `expected gRPC code ${code}, got success ${JSON.stringify(outcome.response)}`);
  assert.equal(outcome.code, code, outcome.errorResponse?.errorMessages[0]?.message);
  const [first] = outcome.errorResponse?.errorMessages ?? [];
  assert.ok(first, "the status carries an ErrorResponse detail");
  assert.deepEqual(
    {
      errorCode: first.errorCode,
      message: first.message,
      errorParameters: first.errorParameters.map((p) => ({ name: p.name, value: p.value })),
    },
    { errorCode, message, errorParameters },
  );
  assert.match(outcome.errorResponse!.debugIdentifier, /\S/);
}

// ---- fixtures --------------------------------------------------------------------------------

/** A rich UserUpdateRequest in the reference's JSON: addresses, phone numbers, a Struct, enums, int64. */
function richDocument(orgId: string, legalEntityId: string, email: string) {
  return {
    persona: "EMPLOYEE",
    tier: "SEAT1A",
    personalInfo: {
      name: { given: "Augusta", family1: "King", middle: "Ada", preferred: "Ada", suffix: "PHD" },
      email: "ada.personal@home.example",
      dob: { iso8601: "1815-12-10" },
      gender: "FEMALE",
      title: "LADY",
      nationality: "British",
      preferredLanguage: "en-GB",
      preferredPronoun: "SHE_HER_HERS",
      addresses: [
        {
          addressLines: ["12 St James's Square", "Flat 2"],
          locality: "London",
          postalCode: "SW1Y 4JH",
          regionCode: "GB",
          isDefault: true,
          coordinates: { latitude: 51.5074, longitude: -0.1345 },
        },
        { addressLines: ["Ockham Park"], locality: "Ockham", regionCode: "GB" },
      ],
      phoneNumbers: [
        {
          countryCode: 44,
          nationalNumber: "2079460000",
          isoCountryCode: "GB",
          type: "LANDLINE",
          rawInput: "+44 20 7946 0000",
        },
        { countryCode: 44, nationalNumber: "7700900123", type: "MOBILE" },
      ],
      emergencyContact: {
        name: "William King",
        relation: "SPOUSE",
        phoneNumbers: [{ countryCode: 44, nationalNumber: "7700900456" }],
      },
      identityDocs: [{ passport: { docId: "123456789", issueCountry: "GB", expiryDate: { iso8601: "2030-01-01" } } }],
    },
    businessInfo: {
      organizationRef: { id: orgId },
      legalEntityRef: { id: legalEntityId, name: "Acme Ltd" },
      email,
      designation: "Analyst",
      employeeId: "E-1815",
      countryCode: "GB",
      workerType: "EMPLOYEE",
      phoneNumbers: [{ countryCode: 44, nationalNumber: "2079460999", extension: "12" }],
      companySpecifiedAttributes: [{ fixedColumnName: "contingentType", value: "permanent" }],
    },
    travelPreferences: {
      preferences: {
        airPref: {
          seatPreference: "AISLE",
          airlinePrefs: [{ airlines: ["BA", "AA"], flightType: "ALL" }],
          refundableOnly: true,
          maxStops: 1,
        },
        hotelPref: { hotelChains: ["HILTON"] },
      },
    },
    membershipInfo: { membershipInfos: [{ id: "BA123456", issuedBy: "BA", type: "AIR", tier: "GOLD" }] },
    notificationPreferences: {
      preferences: [
        {
          notificationType: "FLIGHT_NOTIFICATION",
          emailPreference: { enabled: false, ccEmails: ["assistant@acme.example"] },
        },
      ],
    },
  };
}

describe(`user profiles: GET and PUT /v2/users/{userId} (${backend})`, () => {
  let running: RunningService;
  let baseUrl: string;
  let a: Tenant;
  let b: Tenant;
  let otherOrgId: string;
  let companyAdmin: Client;
  let otherCompanyAdmin: Client;
  const tokens: Record<
    "tmcAdmin" | "companyAdmin" | "otherCompanyAdmin" | "otherTmcAdmin" | "readOnly" | "writeOnly",
    string
  > = {} as never;
  const userEmail = `Ada.${crypto.randomUUID().slice(0, 8)}@Acme.example`;
  let userId: string;
  let inactiveId: string;
  let grpcClient: ReturnType<typeof userServiceClient>;
  const names = { tmcA: "", companyA: "Acme" };

  const createUser = async (orgId: string, email: string, inactive = false) =>
    (
      await operatorCall<{ userId: string }>(baseUrl, "CreateUser", {
        orgId,
        email,
        givenName: "Ada",
        familyName: "Lovelace",
        inactive,
      })
    ).userId;

  const userRow = async (id: string) => {
    const row = await internalsOf(running.service).db("users").where({ id }).first();
    assert.ok(row, "the user row exists");
    return row as Record<string, any>;
  };

  const auditEvents = async (tmcId: string) =>
    (await operatorCall<{ events?: Array<Record<string, any>> }>(baseUrl, "ListAuditEvents", { tmcId, limit: 500 }))
      .events ?? [];

  /**
   * The TMC's trail without the token endpoint's events: those are buffered and written a moment
   * later, so the tokens this file's `before` took land at any time (5 of them during one refused
   * PUT's check, through PgBouncer). What a PUT writes is never one of them.
   */
  const profileAudit = async (tmcId: string) =>
    (await auditEvents(tmcId)).filter((e) => !String(e.action).startsWith("TOKEN_"));

  /** What GET answers for a user created by the operator and never updated. */
  const initialProfile = (id: string, email: string, orgId: string, companyName: string, isActive = true) => ({
    id,
    persona: "UNKNOWN_PERSONA",
    personalInfo: { email, name: { given: "Ada", family1: "Lovelace" } },
    businessInfo: {
      email,
      organizationRef: { id: orgId, name: companyName },
      legalEntityRef: { id: orgId, name: companyName },
    },
    isActive,
    contractingTmcRef: { id: a.tmcId, name: names.tmcA },
  });

  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    baseUrl = running.baseUrl;
    a = await newTenant(baseUrl);
    b = await newTenant(baseUrl);
    names.tmcA = (await internalsOf(running.service).db("tmcs").where({ id: a.tmcId }).first()).name;
    otherOrgId = (
      await operatorCall<{ orgId: string }>(baseUrl, "CreateCompany", { tmcId: a.tmcId, name: "Other Corp" })
    ).orgId;
    companyAdmin = await newApiUser(baseUrl, a.tmcId, "COMPANY_ADMIN", a.orgId);
    otherCompanyAdmin = await newApiUser(baseUrl, a.tmcId, "COMPANY_ADMIN", otherOrgId);
    tokens.tmcAdmin = await accessTokenOf(baseUrl, a.admin);
    tokens.companyAdmin = await accessTokenOf(baseUrl, companyAdmin);
    tokens.otherCompanyAdmin = await accessTokenOf(baseUrl, otherCompanyAdmin);
    tokens.otherTmcAdmin = await accessTokenOf(baseUrl, b.admin);
    tokens.readOnly = await accessTokenOf(baseUrl, a.admin, { scope: "users:read" });
    tokens.writeOnly = await accessTokenOf(baseUrl, a.admin, { scope: "users:write" });
    userId = await createUser(a.orgId, userEmail);
    inactiveId = await createUser(a.orgId, `inactive.${crypto.randomUUID().slice(0, 8)}@acme.example`, true);
    grpcClient = userServiceClient(baseUrl);
  });

  after(async () => {
    grpcClient?.close();
    await disposeService(running);
  });

  describe("GET over REST", () => {
    test("a TMC admin of the user's TMC reads the profile: identity from the columns, company and TMC by id and name", async () => {
      const reply = await rest(baseUrl, "GET", `/v2/users/${userId}`, tokens.tmcAdmin);
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, asRest(initialProfile(userId, userEmail, a.orgId, names.companyA)));
    });

    test("a company admin of the user's company reads the same profile", async () => {
      const reply = await rest(baseUrl, "GET", `/v2/users/${userId}`, tokens.companyAdmin);
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, asRest(initialProfile(userId, userEmail, a.orgId, names.companyA)));
    });

    test("a company admin of another company of the same TMC, and a TMC admin of another TMC: 404 exactly like an unknown id", async () => {
      const unknownId = crypto.randomUUID();
      const unknown = errorOf(await rest(baseUrl, "GET", `/v2/users/${unknownId}`, tokens.tmcAdmin), 404);
      assert.deepEqual(unknown, notFoundBody(unknownId));
      for (const token of [tokens.otherCompanyAdmin, tokens.otherTmcAdmin]) {
        assert.deepEqual(errorOf(await rest(baseUrl, "GET", `/v2/users/${userId}`, token), 404), notFoundBody(userId));
        assert.deepEqual(
          errorOf(await rest(baseUrl, "GET", `/v2/users/${userId}?includeInactive=true`, token), 404),
          notFoundBody(userId),
        );
        assert.deepEqual(
          errorOf(await rest(baseUrl, "GET", `/v2/users/${inactiveId}?includeInactive=true`, token), 404),
          notFoundBody(inactiveId),
        );
      }
    });

    test("a token without users:read: 403; no token: 401", async () => {
      assert.deepEqual(
        errorOf(await rest(baseUrl, "GET", `/v2/users/${userId}`, tokens.writeOnly), 403),
        errorBody("PERMISSION_DENIED", 'The access token lacks the scope "users:read"'),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "GET", `/v2/users/${userId}`, undefined), 401),
        errorBody("USER_NOT_AUTHENTICATED", "An access token is required (Authorization: Bearer <token>)"),
      );
    });

    test("an inactive user: 404 unless includeInactive=true, then 200 with isActive false", async () => {
      assert.deepEqual(
        errorOf(await rest(baseUrl, "GET", `/v2/users/${inactiveId}`, tokens.tmcAdmin), 404),
        notFoundBody(inactiveId),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "GET", `/v2/users/${inactiveId}?includeInactive=false`, tokens.companyAdmin), 404),
        notFoundBody(inactiveId),
      );
      const reply = await rest(baseUrl, "GET", `/v2/users/${inactiveId}?includeInactive=true`, tokens.companyAdmin);
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.body.isActive, false);
      assert.equal(reply.body.id, inactiveId);
      // An active user is returned with includeInactive too.
      assert.equal(
        (await rest(baseUrl, "GET", `/v2/users/${userId}?includeInactive=true`, tokens.tmcAdmin)).body.isActive,
        true,
      );
    });

    test("a userId that is not a UUID: 400 API_VALIDATION_FAILED naming userId", async () => {
      const reply = errorOf(await rest(baseUrl, "GET", "/v2/users/42", tokens.tmcAdmin), 400);
      assert.deepEqual(
        reply,
        errorBody("API_VALIDATION_FAILED", "The request is invalid", [
          { name: "userId", value: "must be a valid UUID" },
        ]),
      );
    });

    test("the seeded demo users are readable with the seeded admin's token", async () => {
      const seed = await seedDemo(baseUrl);
      const token = await accessTokenOf(baseUrl, {
        clientId: seed.clientId,
        clientSecret: seed.clientSecret,
        tmcId: seed.tmcId,
        role: "TMC_ADMIN",
      });
      const expected = [
        ["ada.lovelace@acme.example", "Ada", "Lovelace", true],
        ["alan.turing@acme.example", "Alan", "Turing", true],
        ["grace.hopper@acme.example", "Grace", "Hopper", false],
      ] as const;
      assert.equal(seed.userIds.length, 3);
      for (const [i, id] of seed.userIds.entries()) {
        const [email, given, family1, isActive] = expected[i]!;
        const reply = await rest(baseUrl, "GET", `/v2/users/${id}?includeInactive=true`, token);
        assert.equal(reply.status, 200, reply.text);
        const company = { id: seed.orgId, name: "Acme Corporation" };
        assert.deepEqual(
          reply.body,
          asRest({
            id,
            persona: "UNKNOWN_PERSONA",
            personalInfo: { email, name: { given, family1 } },
            businessInfo: { email, organizationRef: company, legalEntityRef: company },
            isActive,
            contractingTmcRef: { id: seed.tmcId, name: "Demo Travel Management" },
          }),
        );
      }
      assert.equal(
        (await rest(baseUrl, "GET", `/v2/users/${seed.userIds[2]}`, token)).status,
        404,
        "Grace Hopper is inactive",
      );
      // The demo tenant's admin sees nothing of tenant A.
      assert.deepEqual(errorOf(await rest(baseUrl, "GET", `/v2/users/${userId}`, token), 404), notFoundBody(userId));
    });
  });

  describe("PUT over REST", () => {
    test("PUT then GET: the whole document comes back, the name columns change, identity stays in the columns", async () => {
      const id = await createUser(a.orgId, `rich.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const email = (await userRow(id)).email as string;
      const legalEntityId = a.orgId;
      const document = richDocument(a.orgId, legalEntityId, email);
      const before = await userRow(id);
      const put = await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, document);
      assert.equal(put.status, 200, put.text);
      assert.equal(put.text, "", "updateUser answers 200 with no body, as the reference does");

      const got = await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.companyAdmin);
      assert.equal(got.status, 200, got.text);
      assert.deepEqual(
        got.body,
        asRest({
          ...document,
          id,
          businessInfo: { ...document.businessInfo, organizationRef: { id: a.orgId, name: names.companyA } },
          isActive: true,
          contractingTmcRef: { id: a.tmcId, name: names.tmcA },
        }),
      );

      // Columns: the truth for their fields; the jsonb holds the rest and no identity field.
      const row = await userRow(id);
      assert.equal(row.given_name, "Augusta");
      assert.equal(row.family_name, "King");
      assert.equal(row.email, email);
      assert.equal(row.email_normalized, email.toLowerCase());
      assert.equal(row.company_id, a.orgId);
      assert.equal(row.tmc_id, a.tmcId);
      assert.equal(row.is_active, true);
      assert.equal(row.external_id, null);
      assert.ok(new Date(row.updated_at).getTime() > new Date(before.updated_at).getTime(), "updated_at is set");
      const profile = typeof row.profile === "string" ? JSON.parse(row.profile) : row.profile;
      assert.deepEqual(profile.personalInfo.name, { middle: "Ada", preferred: "Ada", suffix: "PHD" });
      assert.equal(profile.businessInfo.email, undefined);
      assert.equal(profile.businessInfo.organizationRef, undefined);
      assert.equal(profile.id, undefined);
      assert.equal(profile.isActive, undefined);
      assert.deepEqual(profile.travelPreferences, document.travelPreferences);

      // PUT replaces the document: what the next PUT leaves out is gone.
      const minimal = {
        persona: "GUEST",
        businessInfo: { organizationRef: { id: a.orgId }, legalEntityRef: { id: legalEntityId } },
      };
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.companyAdmin, minimal)).status, 200);
      const replaced = await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin);
      assert.deepEqual(
        replaced.body,
        asRest({
          id,
          persona: "GUEST",
          personalInfo: { email, name: { given: "Augusta", family1: "King" } },
          businessInfo: {
            email,
            organizationRef: { id: a.orgId, name: names.companyA },
            legalEntityRef: { id: legalEntityId },
          },
          isActive: true,
          contractingTmcRef: { id: a.tmcId, name: names.tmcA },
        }),
      );
    });

    test("every successful update is audited: USER_UPDATED by the caller, on the user, naming only the fields changed", async () => {
      const id = await createUser(a.orgId, `audited.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const document = {
        persona: "EMPLOYEE",
        personalInfo: { name: { given: "Augusta", family1: "Lovelace" }, nationality: "British" },
        businessInfo: {
          organizationRef: { id: a.orgId, name: names.companyA },
          legalEntityRef: { id: a.orgId, name: names.companyA },
          designation: "Countess",
        },
      };
      const put = await fetch(`${baseUrl}/v2/users/${id}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${tokens.companyAdmin}`, "content-type": "application/json" },
        body: JSON.stringify(document),
      });
      assert.equal(put.status, 200);
      const requestId = put.headers.get("x-request-id");
      const events = (await auditEvents(a.tmcId)).filter((e) => e.action === "USER_UPDATED" && e.targetClientId === id);
      assert.equal(events.length, 1);
      const { occurredAt, ...event } = events[0]!;
      assert.ok(!Number.isNaN(Date.parse(occurredAt)));
      assert.deepEqual(event, {
        action: "USER_UPDATED",
        outcome: "SUCCESS",
        actor: companyAdmin.clientId,
        tmcId: a.tmcId,
        targetClientId: id,
        debugIdentifier: requestId,
        details: {
          targetKind: "USER",
          changedFields: "businessInfo.designation,persona,personalInfo.name,personalInfo.nationality",
        },
      });
      assert.doesNotMatch(JSON.stringify(events[0]), /Augusta|Countess|British/, "no personal data in the audit row");
    });

    test("access: another company's admin, another TMC's admin, an unknown id: 404; no users:write: 403; nothing written", async () => {
      const id = await createUser(a.orgId, `guarded.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const rowBefore = await userRow(id);
      const auditBefore = (await profileAudit(a.tmcId)).length;
      const document = {
        persona: "EMPLOYEE",
        personalInfo: { name: { given: "Mallory", family1: "Intruder" } },
        businessInfo: { organizationRef: { id: a.orgId }, legalEntityRef: { id: a.orgId } },
      };
      for (const token of [tokens.otherCompanyAdmin, tokens.otherTmcAdmin]) {
        assert.deepEqual(
          errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, token, document), 404),
          notFoundBody(id),
        );
      }
      const unknownId = crypto.randomUUID();
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${unknownId}`, tokens.tmcAdmin, document), 404),
        notFoundBody(unknownId),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.readOnly, document), 403),
        errorBody("PERMISSION_DENIED", 'The access token lacks the scope "users:write"'),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", "/v2/users/not-a-uuid", tokens.tmcAdmin, document), 400),
        errorBody("API_VALIDATION_FAILED", "The request is invalid", [
          { name: "userId", value: "must be a valid UUID" },
        ]),
      );
      assert.deepEqual(await userRow(id), rowBefore, "the row is untouched");
      assert.equal((await profileAudit(a.tmcId)).length, auditBefore, "no audit row");
    });

    test("identity fields cannot be changed: 400 naming each field, and nothing is written", async () => {
      const id = await createUser(a.orgId, `identity.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const email = (await userRow(id)).email as string;
      const rowBefore = await userRow(id);
      const auditBefore = (await profileAudit(a.tmcId)).length;
      const valid = () => ({
        persona: "EMPLOYEE",
        personalInfo: { name: { given: "Changed", family1: "Name" } },
        businessInfo: {
          organizationRef: { id: a.orgId },
          legalEntityRef: { id: a.orgId },
          email,
          designation: "Changed",
        },
      });
      const refused = "The update changes fields that cannot be changed through this operation";
      const moved = valid();
      moved.businessInfo.organizationRef.id = otherOrgId;
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, moved), 400),
        errorBody("API_VALIDATION_FAILED", refused, [
          {
            name: "businessInfo.organizationRef.id",
            value: "must be the user's company: a user cannot be moved to another company",
          },
        ]),
      );
      const renamed = {
        ...valid(),
        businessInfo: { ...valid().businessInfo, organizationRef: { id: a.orgId, name: "Renamed Corp" } },
      };
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, renamed), 400),
        errorBody("API_VALIDATION_FAILED", refused, [
          {
            name: "businessInfo.organizationRef.name",
            value: "must be the company's name: a company is not renamed through a user",
          },
        ]),
      );
      const all = {
        ...valid(),
        externalId: "idp-4711",
        businessInfo: {
          ...valid().businessInfo,
          organizationRef: { id: otherOrgId },
          email: "someone.else@acme.example",
        },
      };
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.companyAdmin, all), 400),
        errorBody("API_VALIDATION_FAILED", refused, [
          {
            name: "businessInfo.organizationRef.id",
            value: "must be the user's company: a user cannot be moved to another company",
          },
          { name: "businessInfo.email", value: "cannot be changed: it is the user's identity (SCIM userName)" },
          { name: "externalId", value: "cannot be changed: it is owned by the identity provider (SCIM)" },
        ]),
      );
      // isActive is read-only: echoed as GET wrote it, it is ignored; a different value is refused.
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, { ...valid(), isActive: false }), 400),
        errorBody("API_VALIDATION_FAILED", refused, [
          { name: "isActive", value: "cannot be changed: activation is managed by the identity provider (SCIM)" },
        ]),
      );
      assert.deepEqual(await userRow(id), rowBefore, "nothing was written");
      assert.equal((await profileAudit(a.tmcId)).length, auditBefore, "no audit row");
      // The same email in another case is the same identity: accepted, the stored spelling kept.
      assert.equal(
        (
          await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, {
            ...valid(),
            businessInfo: { ...valid().businessInfo, email: email.toUpperCase() },
          })
        ).status,
        200,
      );
      const row = await userRow(id);
      assert.deepEqual([row.email, row.given_name, row.family_name], [email, "Changed", "Name"]);
    });

    test("validation: a bad email, a missing businessInfo or persona, a bad address: 400 naming the field, nothing written", async () => {
      const id = await createUser(a.orgId, `validated.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const rowBefore = await userRow(id);
      const base = {
        persona: "EMPLOYEE",
        businessInfo: { organizationRef: { id: a.orgId }, legalEntityRef: { id: a.orgId } },
      };
      const invalid = (errorParameters: Array<{ name: string; value: string }>) =>
        errorBody("API_VALIDATION_FAILED", "The request is invalid", errorParameters);
      assert.deepEqual(
        errorOf(
          await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, {
            ...base,
            businessInfo: { ...base.businessInfo, email: "not-an-email" },
          }),
          400,
        ),
        invalid([{ name: "businessInfo.email", value: "must be a valid email address" }]),
      );
      assert.deepEqual(
        errorOf(
          await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, { ...base, personalInfo: { email: "nope" } }),
          400,
        ),
        invalid([{ name: "personalInfo.email", value: "must be a valid email address" }]),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, { persona: "EMPLOYEE" }), 400),
        invalid([{ name: "businessInfo", value: "value is required" }]),
      );
      assert.deepEqual(
        errorOf(
          await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, { businessInfo: base.businessInfo }),
          400,
        ),
        invalid([{ name: "persona", value: "value is required" }]),
      );
      assert.deepEqual(
        errorOf(
          await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, {
            ...base,
            personalInfo: { addresses: [{ addressLines: [], regionCode: "GB" }] },
          }),
          400,
        ),
        invalid([{ name: "personalInfo.addresses[0].addressLines", value: "must contain at least 1 item(s)" }]),
      );
      assert.deepEqual(await userRow(id), rowBefore, "nothing was written");
    });

    test("round trip: a GET body is accepted back by PUT unchanged and GET answers the same, with and without optional fields", async () => {
      const plain = await createUser(a.orgId, `plain.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const rich = await createUser(a.orgId, `roundtrip.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const richEmail = (await userRow(rich)).email as string;
      assert.equal(
        (await rest(baseUrl, "PUT", `/v2/users/${rich}`, tokens.tmcAdmin, richDocument(a.orgId, a.orgId, richEmail)))
          .status,
        200,
      );
      const inactive = await createUser(a.orgId, `sleeper.${crypto.randomUUID().slice(0, 8)}@acme.example`, true);
      for (const [id, query] of [
        [plain, ""],
        [rich, ""],
        [inactive, "?includeInactive=true"],
      ] as const) {
        const first = await rest(baseUrl, "GET", `/v2/users/${id}${query}`, tokens.tmcAdmin);
        assert.equal(first.status, 200, first.text);
        // What the reference's clients saw wrong, on the wire as it is (not through asRest).
        assert.ok(typeof first.body.persona === "string", `persona is always present: ${first.text}`);
        assert.ok(
          "id" in first.body && "isActive" in first.body && "contractingTmcRef" in first.body,
          "the read-only fields are there",
        );
        const put = await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, first.body);
        assert.equal(put.status, 200, `PUT of the GET body: ${put.text}`);
        const second = await rest(baseUrl, "GET", `/v2/users/${id}${query}`, tokens.tmcAdmin);
        assert.deepEqual(second.body, first.body);
      }
      const plainBody = (await rest(baseUrl, "GET", `/v2/users/${plain}`, tokens.tmcAdmin)).body;
      assert.equal(plainBody.persona, "UNKNOWN_PERSONA");
      const richBody = (await rest(baseUrl, "GET", `/v2/users/${rich}`, tokens.tmcAdmin)).body;
      assert.deepEqual(
        richBody.personalInfo.identityDocs,
        [{ passport: { docId: "123456789", issueCountry: "GB", expiryDate: { iso8601: "2030-01-01" } } }],
        'a Struct\'s JSON object, no "fields"',
      );
      assert.deepEqual(
        richBody.personalInfo.phoneNumbers.map((p: any) => p.nationalNumber),
        [2079460000, 7700900123],
        "nationalNumber is a JSON integer",
      );
      assert.equal(richBody.businessInfo.phoneNumbers[0].nationalNumber, 2079460999);
      // A number or a string is read alike.
      const asString = structuredClone(richBody);
      asString.personalInfo.phoneNumbers[0].nationalNumber = "2079460000";
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${rich}`, tokens.tmcAdmin, asString)).status, 200);
      assert.deepEqual((await rest(baseUrl, "GET", `/v2/users/${rich}`, tokens.tmcAdmin)).body, richBody);
    });

    test("read-only fields sent back with a different value: 400 naming each field, nothing written", async () => {
      const id = await createUser(a.orgId, `readonly.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const body = (await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin)).body;
      const rowBefore = await userRow(id);
      const refused = "The update changes fields that cannot be changed through this operation";
      const changed = {
        ...body,
        id: crypto.randomUUID(),
        isActive: false,
        contractingTmcRef: { id: b.tmcId, name: "Elsewhere" },
      };
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, changed), 400),
        errorBody("API_VALIDATION_FAILED", refused, [
          { name: "id", value: "must be the user's id (the path's userId)" },
          { name: "isActive", value: "cannot be changed: activation is managed by the identity provider (SCIM)" },
          { name: "contractingTmcRef.id", value: "must be the user's TMC: a user cannot be moved to another TMC" },
          { name: "contractingTmcRef.name", value: "must be the TMC's name: a TMC is not renamed through a user" },
        ]),
      );
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, { ...body, id: "not-a-uuid" }), 400),
        errorBody("API_VALIDATION_FAILED", "The request is invalid", [{ name: "id", value: "must be a valid UUID" }]),
      );
      assert.deepEqual(await userRow(id), rowBefore, "nothing was written");
      // The same values in another case are the same ids: accepted.
      const upper = { ...body, id: id.toUpperCase(), contractingTmcRef: { id: a.tmcId.toUpperCase() } };
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, upper)).status, 200);
    });

    test("legalEntityRef: another TMC's company, another company of the TMC and an unknown id get the same 400; nothing written", async () => {
      const id = await createUser(a.orgId, `legal.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const foreignId = await createUser(b.orgId, `legal.${crypto.randomUUID().slice(0, 8)}@beta.example`);
      const rowBefore = await userRow(id);
      const document = (legalEntityId: string) => ({
        persona: "EMPLOYEE",
        businessInfo: { organizationRef: { id: a.orgId }, legalEntityRef: { id: legalEntityId, name: "Acme Ltd" } },
      });
      const refusal = errorBody(
        "API_VALIDATION_FAILED",
        "The update changes fields that cannot be changed through this operation",
        [
          {
            name: "businessInfo.legalEntityRef.id",
            value: "must be the user's company: the only legal entity known for the user",
          },
        ],
      );
      for (const [token, legalEntityId] of [
        [tokens.tmcAdmin, b.orgId],
        [tokens.companyAdmin, b.orgId],
        [tokens.tmcAdmin, otherOrgId],
        [tokens.tmcAdmin, crypto.randomUUID()],
      ] as const) {
        assert.deepEqual(
          errorOf(await rest(baseUrl, "PUT", `/v2/users/${id}`, token, document(legalEntityId)), 400),
          refusal,
          legalEntityId,
        );
      }
      assert.deepEqual(await userRow(id), rowBefore, "nothing was written");
      // TMC B's admin cannot use TMC A's company either, and its own user's company is accepted.
      const bDocument = {
        persona: "EMPLOYEE",
        businessInfo: { organizationRef: { id: b.orgId }, legalEntityRef: { id: a.orgId } },
      };
      assert.deepEqual(
        errorOf(await rest(baseUrl, "PUT", `/v2/users/${foreignId}`, tokens.otherTmcAdmin, bDocument), 400),
        refusal,
      );
      const own = {
        ...bDocument,
        businessInfo: { ...bDocument.businessInfo, legalEntityRef: { id: b.orgId, name: "Beta Legal" } },
      };
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${foreignId}`, tokens.otherTmcAdmin, own)).status, 200);
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, document(a.orgId))).status, 200);
      assert.deepEqual(
        (await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin)).body.businessInfo.legalEntityRef,
        { id: a.orgId, name: "Acme Ltd" },
      );
    });

    test("an inactive user can be updated (its activation is the IdP's); it stays inactive", async () => {
      const id = await createUser(a.orgId, `dormant.${crypto.randomUUID().slice(0, 8)}@acme.example`, true);
      const document = {
        persona: "EMPLOYEE",
        personalInfo: { name: { given: "Sleeping", family1: "Beauty" } },
        businessInfo: { organizationRef: { id: a.orgId }, legalEntityRef: { id: a.orgId } },
      };
      assert.equal((await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, document)).status, 200);
      assert.equal((await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin)).status, 404);
      const got = await rest(baseUrl, "GET", `/v2/users/${id}?includeInactive=true`, tokens.tmcAdmin);
      assert.deepEqual(
        [got.body.isActive, got.body.personalInfo.name],
        [false, { given: "Sleeping", family1: "Beauty" }],
      );
    });
  });

  describe("gRPC (@grpc/grpc-js)", () => {
    test("GetUser: the same profile for the TMC admin and the company admin", async () => {
      for (const token of [tokens.tmcAdmin, tokens.companyAdmin]) {
        const outcome = await grpcClient.call("getUser", { userId }, token);
        assert.equal(outcome.ok, true, JSON.stringify(outcome.errorResponse));
        const r = outcome.response;
        assert.equal(r.id, userId);
        assert.deepEqual(
          { given: r.personalInfo.name.given, family1: r.personalInfo.name.family1, email: r.personalInfo.email },
          { given: "Ada", family1: "Lovelace", email: userEmail },
        );
        assert.equal(r.businessInfo.email, userEmail);
        assert.deepEqual(
          { id: r.businessInfo.organizationRef.id, name: r.businessInfo.organizationRef.name },
          { id: a.orgId, name: names.companyA },
        );
        assert.deepEqual(
          { id: r.contractingTmcRef.id, name: r.contractingTmcRef.name },
          { id: a.tmcId, name: names.tmcA },
        );
        assert.equal(r.isActive, true);
      }
    });

    test("GetUser: NOT_FOUND for another company, another TMC, an unknown id, an inactive user; PERMISSION_DENIED without the scope; INVALID_ARGUMENT for a non-UUID", async () => {
      for (const token of [tokens.otherCompanyAdmin, tokens.otherTmcAdmin]) {
        assertGrpcError(
          await grpcClient.call("getUser", { userId, includeInactive: true }, token),
          GRPC_STATUS.NOT_FOUND,
          "NOT_FOUND",
          "User not found",
          [{ name: "userId", value: userId }],
        );
      }
      const unknownId = crypto.randomUUID();
      assertGrpcError(
        await grpcClient.call("getUser", { userId: unknownId }, tokens.tmcAdmin),
        GRPC_STATUS.NOT_FOUND,
        "NOT_FOUND",
        "User not found",
        [{ name: "userId", value: unknownId }],
      );
      assertGrpcError(
        await grpcClient.call("getUser", { userId: inactiveId }, tokens.tmcAdmin),
        GRPC_STATUS.NOT_FOUND,
        "NOT_FOUND",
        "User not found",
        [{ name: "userId", value: inactiveId }],
      );
      const inactive = await grpcClient.call("getUser", { userId: inactiveId, includeInactive: true }, tokens.tmcAdmin);
      assert.equal(inactive.ok, true);
      assert.equal(inactive.response.isActive, false);
      assertGrpcError(
        await grpcClient.call("getUser", { userId }, tokens.writeOnly),
        GRPC_STATUS.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        'The access token lacks the scope "users:read"',
      );
      assertGrpcError(
        await grpcClient.call("getUser", { userId }),
        GRPC_STATUS.UNAUTHENTICATED,
        "USER_NOT_AUTHENTICATED",
        "An access token is required (Authorization: Bearer <token>)",
      );
      assertGrpcError(
        await grpcClient.call("getUser", { userId: "42" }, tokens.tmcAdmin),
        GRPC_STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
        "The request is invalid",
        [{ name: "userId", value: "must be a valid UUID" }],
      );
    });

    test("round trip over gRPC: GetUser's response sent back as UpdateUser unchanged; a foreign legal entity is refused", async () => {
      const id = await createUser(a.orgId, `grpc-rt.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const email = (await userRow(id)).email as string;
      assert.equal(
        (await rest(baseUrl, "PUT", `/v2/users/${id}`, tokens.tmcAdmin, richDocument(a.orgId, a.orgId, email))).status,
        200,
      );
      {
        const before = await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin);
        const got = await grpcClient.call("getUser", { userId: id }, tokens.tmcAdmin);
        assert.equal(got.ok, true, JSON.stringify(got.errorResponse));
        assert.equal(got.response.persona, "EMPLOYEE");
        const updated = await grpcClient.call("updateUser", { ...got.response, userId: id }, tokens.tmcAdmin);
        assert.equal(updated.ok, true, JSON.stringify(updated.errorResponse));
        assert.deepEqual((await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin)).body, before.body);
      }
      const plain = await createUser(a.orgId, `grpc-plain.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const plainGot = await grpcClient.call("getUser", { userId: plain }, tokens.tmcAdmin);
      assert.equal(plainGot.response.persona, "UNKNOWN_PERSONA", "persona is always present");
      assert.equal(
        (await grpcClient.call("updateUser", { ...plainGot.response, userId: plain }, tokens.tmcAdmin)).ok,
        true,
      );
      const foreign = {
        ...plainGot.response,
        userId: plain,
        businessInfo: { ...plainGot.response.businessInfo, legalEntityRef: { id: b.orgId } },
      };
      assertGrpcError(
        await grpcClient.call("updateUser", foreign, tokens.tmcAdmin),
        GRPC_STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
        "The update changes fields that cannot be changed through this operation",
        [
          {
            name: "businessInfo.legalEntityRef.id",
            value: "must be the user's company: the only legal entity known for the user",
          },
        ],
      );
    });

    test("UpdateUser over gRPC, read back over REST; refused identity changes and foreign callers write nothing", async () => {
      const id = await createUser(a.orgId, `grpc.${crypto.randomUUID().slice(0, 8)}@acme.example`);
      const email = (await userRow(id)).email as string;
      const request = {
        userId: id,
        persona: "EMPLOYEE",
        personalInfo: {
          name: { given: "Grace", family1: "Hopper" },
          phoneNumbers: [{ countryCode: 1, nationalNumber: "2025550123", type: "MOBILE" }],
          addresses: [{ addressLines: ["1 Navy Way"], regionCode: "US", locality: "Arlington" }],
        },
        businessInfo: {
          organizationRef: { id: a.orgId },
          legalEntityRef: { id: a.orgId, name: "Acme Inc" },
          email,
          designation: "Rear Admiral",
        },
        travelPreferences: {
          fields: {
            preferences: { structValue: { fields: { seat: { stringValue: "WINDOW" }, stops: { numberValue: 0 } } } },
          },
        },
      };
      for (const token of [tokens.otherCompanyAdmin, tokens.otherTmcAdmin]) {
        assertGrpcError(
          await grpcClient.call("updateUser", request, token),
          GRPC_STATUS.NOT_FOUND,
          "NOT_FOUND",
          "User not found",
          [{ name: "userId", value: id }],
        );
      }
      assertGrpcError(
        await grpcClient.call("updateUser", request, tokens.readOnly),
        GRPC_STATUS.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        'The access token lacks the scope "users:write"',
      );
      assertGrpcError(
        await grpcClient.call(
          "updateUser",
          { ...request, businessInfo: { ...request.businessInfo, email: "x@acme.example" } },
          tokens.tmcAdmin,
        ),
        GRPC_STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
        "The update changes fields that cannot be changed through this operation",
        [{ name: "businessInfo.email", value: "cannot be changed: it is the user's identity (SCIM userName)" }],
      );
      assertGrpcError(
        await grpcClient.call(
          "updateUser",
          { ...request, businessInfo: { ...request.businessInfo, email: "bad" } },
          tokens.tmcAdmin,
        ),
        GRPC_STATUS.INVALID_ARGUMENT,
        "API_VALIDATION_FAILED",
        "The request is invalid",
        [{ name: "businessInfo.email", value: "must be a valid email address" }],
      );
      const untouched = await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin);
      assert.deepEqual(
        untouched.body,
        asRest(initialProfile(id, email, a.orgId, names.companyA)),
        "nothing was written",
      );

      const updated = await grpcClient.call("updateUser", request, tokens.companyAdmin);
      assert.equal(updated.ok, true, JSON.stringify(updated.errorResponse));
      const got = await rest(baseUrl, "GET", `/v2/users/${id}`, tokens.tmcAdmin);
      assert.deepEqual(
        got.body,
        asRest({
          id,
          persona: "EMPLOYEE",
          personalInfo: {
            email,
            name: { given: "Grace", family1: "Hopper" },
            phoneNumbers: [{ countryCode: 1, nationalNumber: "2025550123", type: "MOBILE" }],
            addresses: [{ addressLines: ["1 Navy Way"], regionCode: "US", locality: "Arlington" }],
          },
          businessInfo: {
            organizationRef: { id: a.orgId, name: names.companyA },
            legalEntityRef: { id: a.orgId, name: "Acme Inc" },
            email,
            designation: "Rear Admiral",
          },
          travelPreferences: { preferences: { seat: "WINDOW", stops: 0 } },
          isActive: true,
          contractingTmcRef: { id: a.tmcId, name: names.tmcA },
        }),
      );
      const viaGrpc = await grpcClient.call("getUser", { userId: id }, tokens.companyAdmin);
      assert.equal(viaGrpc.response.businessInfo.designation, "Rear Admiral");
      assert.equal(viaGrpc.response.personalInfo.phoneNumbers[0].nationalNumber, "2025550123");
      assert.equal(viaGrpc.response.travelPreferences.fields.preferences.structValue.fields.seat.stringValue, "WINDOW");
    });
  });
});
