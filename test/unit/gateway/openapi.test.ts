import assert from "node:assert/strict";
import { describe, test } from "node:test";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { docs as allDocs } from "../../../gen/travel/all_docs.js";
import { docs as errorDocs } from "../../../gen/travel/common/v1/error_docs.js";
import { ErrorMessageSchema, ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import { GetUserResponseSchema } from "../../../gen/travel/user/v2/user_pb.js";
import { restRoutesOf } from "../../../src/gateway/http-rules.js";
import { buildOpenApiDocument } from "../../../src/gateway/openapi.js";
import { contractServices } from "../../../src/rpc/areas.js";

/*
 * The OpenAPI document, built in-process from the contract, checked with a real JSON Schema
 * 2020-12 validator: realistic requests of every operation validate, and requests the service
 * refuses do not. No server, no database.
 */

type Json = Record<string, any>;

const doc = buildOpenApiDocument(restRoutesOf(contractServices), { serverUrl: "https://auth.example.com" }) as Json;
const DOC_ID = "https://auth-api-user-service.test/openapi.json";

// The whole document is one schema resource, so the operations' "#/components/schemas/..."
// references resolve against it; its OpenAPI-only top-level members are declared as annotations
// so strict mode keeps rejecting unknown keywords and formats inside the schemas themselves.
const ajv = new Ajv2020.default({ strict: true, allErrors: true });
addFormats.default(ajv);
ajv.addVocabulary(["openapi", "info", "servers", "paths", "components", "security"]);
ajv.addSchema({ ...doc, $id: DOC_ID });

const pointer = (...segments: string[]) =>
  segments.map((s) => "/" + encodeURIComponent(s.replace(/~/g, "~0").replace(/\//g, "~1"))).join("");
const validatorAt = (jsonPointer: string) => {
  const validate = ajv.getSchema(`${DOC_ID}#${jsonPointer}`);
  assert.ok(validate, `no schema at ${jsonPointer}`);
  return validate;
};

interface Operation {
  readonly path: string;
  readonly verb: string;
  readonly operationId: string;
  readonly body?: { readonly mediaType: string; readonly pointer: string };
  readonly parameters: ReadonlyArray<{
    readonly name: string;
    readonly in: string;
    readonly required: boolean;
    readonly pointer: string;
  }>;
}

const operations: Operation[] = Object.entries(doc.paths as Json).flatMap(([path, verbs]) =>
  Object.entries(verbs as Json).map(([verb, op]): Operation => {
    const content = Object.keys(op.requestBody?.content ?? {});
    assert.ok(content.length <= 1, `${op.operationId}: one request media type`);
    return {
      path,
      verb,
      operationId: op.operationId,
      ...(content.length
        ? {
            body: {
              mediaType: content[0]!,
              pointer: pointer("paths", path, verb, "requestBody", "content", content[0]!, "schema"),
            },
          }
        : {}),
      parameters: (op.parameters ?? []).map((p: Json, i: number) => ({
        name: p.name,
        in: p.in,
        required: p.required === true,
        pointer: pointer("paths", path, verb, "parameters", String(i), "schema"),
      })),
    };
  }),
);
const operation = (operationId: string) => {
  const found = operations.find((o) => o.operationId === operationId);
  assert.ok(found, `operation ${operationId}`);
  return found;
};

/** A request as a client sends it: path and query parameters by name, and the body. */
interface SampleRequest {
  readonly path?: Json;
  readonly query?: Json;
  readonly body?: unknown;
}

/** Checks a request against the operation's body schema and each parameter's schema; returns the errors. */
function errorsOf(operationId: string, request: SampleRequest): string[] {
  const op = operation(operationId);
  const errors: string[] = [];
  if (request.body !== undefined) {
    assert.ok(op.body, `${operationId} takes a body`);
    const validate = validatorAt(op.body.pointer);
    if (!validate(request.body)) errors.push(...validate.errors!.map((e) => `body${e.instancePath} ${e.message}`));
  }
  for (const where of ["path", "query"] as const) {
    const values = request[where] ?? {};
    const declared = op.parameters.filter((p) => p.in === where);
    for (const name of Object.keys(values))
      assert.ok(
        declared.some((p) => p.name === name),
        `${operationId} declares ${where} parameter ${name}`,
      );
    for (const p of declared) {
      if (!(p.name in values)) {
        if (p.required) errors.push(`${where} parameter ${p.name} is required`);
        continue;
      }
      const validate = validatorAt(p.pointer);
      if (!validate(values[p.name]))
        errors.push(...validate.errors!.map((e) => `${where} ${p.name}${e.instancePath} ${e.message}`));
    }
  }
  return errors;
}

const TMC = "3f1c2b7e-9a4d-4c55-8e21-6b0f4d2a9c13";
const ORG = "a7d9e0c4-1b2f-4e3a-9c8d-5f6e7a8b9c0d";
const USER = "0b8e6f4a-2c1d-4f3e-8a9b-7c6d5e4f3a2b";
const LEGAL_ENTITY = "5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c";

/** Realistic valid requests, for every operation that takes a body or parameters. */
const validSamples: Record<string, SampleRequest[]> = {
  fetchOauth2Token: [
    { body: { grant_type: "client_credentials", client_id: "k9TQ0n3lX2", client_secret: "s3cr3t-Zq8wYc1" } },
    {
      body: {
        grant_type: "client_credentials",
        client_id: "k9TQ0n3lX2",
        client_secret: "s3cr3t-Zq8wYc1",
        scope: "api-users users:read",
        audience: "https://api.example.test",
      },
    },
    {
      body: {
        grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
        client_id: "k9TQ0n3lX2",
        client_secret: "s3cr3t-Zq8wYc1",
        subject_token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln",
        subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
      },
    },
    // Client authentication by HTTP Basic: the form may carry the grant type alone.
    { body: { grant_type: "client_credentials" } },
  ],
  introspectToken: [
    {
      body: {
        token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln",
        token_type_hint: "access_token",
        client_id: "k9TQ0n3lX2",
        client_secret: "s3cr3t",
      },
    },
  ],
  pollSecurityEvents: [
    { body: { returnImmediately: true } },
    {
      body: {
        maxEvents: 10,
        returnImmediately: false,
        ack: ["41", "42"],
        setErrs: { "43": { err: "invalid_request", description: "unknown subject" } },
      },
    },
    { body: { maxEvents: 0, ack: ["44"], client_id: "rs-k9tq0n3lx2", client_secret: "s3cr3t" } },
  ],
  revokeToken: [
    {
      body: {
        token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln",
        token_type_hint: "access_token",
        client_id: "k9TQ0n3lX2",
        client_secret: "s3cr3t",
      },
    },
  ],
  getAuthToken: [{ body: { clientId: "k9TQ0n3lX2", clientSecret: "s3cr3t-Zq8wYc1" } }],
  createApiUser: [
    { body: {} },
    { body: { tmcId: TMC, role: "COMPANY_ADMIN", orgId: ORG, credentialType: "SCIM_TOKEN" } },
    { body: { role: "TMC_ADMIN", credentialType: "CLIENT_CREDENTIALS" } },
  ],
  getApiUsers: [
    {},
    { query: { limit: 100, offset: 0 } },
    { query: { limit: 0 } },
    { query: { limit: 25, offset: 50 } },
  ],
  deleteApiUser: [{ body: { clientId: "abc" } }],
  rotateClientSecret: [{ body: { clientId: "abc" } }],
  setClientKeys: [
    {
      body: {
        clientId: "abc",
        keys: [{ kty: "OKP", crv: "Ed25519", kid: "k1", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }],
      },
    },
  ],
  setClientDpopPolicy: [{ body: { clientId: "abc", dpopBoundAccessTokens: true } }],
  getUserInfo: [{ path: { userId: USER } }, { path: { userId: USER }, query: { includeInactive: true } }],
  updateUser: [
    {
      path: { userId: USER },
      body: {
        persona: "EMPLOYEE",
        businessInfo: { legalEntityRef: { id: LEGAL_ENTITY }, organizationRef: { id: ORG } },
      },
    },
    {
      path: { userId: USER },
      body: {
        persona: "EMPLOYEE",
        tier: "SEAT1A",
        externalId: "EMP-00042",
        businessInfo: {
          legalEntityRef: { id: LEGAL_ENTITY, name: "Acme Travel Ltd" },
          organizationRef: { id: ORG },
          designation: "MANAGER",
          email: "jane.doe@acme.example",
          employeeId: "00042",
          countryCode: "GB",
          workerType: "EMPLOYEE",
        },
        personalInfo: {
          name: { given: "Jane", family1: "Doe" },
          dob: { iso8601: "1990-05-17" },
          email: "jane@example.com",
          gender: "FEMALE",
          title: "MS",
          nationality: "British",
          preferredLanguage: "en-GB",
          phoneNumbers: [{ countryCode: 44, isoCountryCode: "GB", nationalNumber: 2079460000, type: "MOBILE" }],
          profilePicture: { url: "https://cdn.example.test/jane.png" },
          identityDocs: [{ passport: { docId: "123456789", issueCountry: "GB" } }],
        },
        travelPreferences: { preferences: { airPref: { seatPreference: "AISLE" } } },
      },
    },
  ],
  fetchCompanyTransferableUnusedCredits: [
    {
      body: {
        companyId: { id: ORG },
        companyCreditFilter: { expiryDateRange: { expiryDateStart: { iso8601: "2026-01-01" } } },
      },
    },
    { body: { companyId: { id: ORG } } },
    {
      body: {
        companyId: { id: ORG },
        offset: 20,
        companyCreditFilter: {
          supplier: "SABRE",
          selectedAirlines: ["AA", "BA"],
          pccs: ["0LB1"],
          fopCardAccessType: ["CARD_ACCESS_CENTRAL"],
          expiryDateRange: { expiryDateStart: { iso8601: "2026-01-01" }, expiryDateEnd: { iso8601: "2026-12-31" } },
        },
      },
    },
  ],
  migrateUnusedCreditsInCompanyCredits: [
    {
      body: {
        paymentSourceIds: ["d059044a-cacd-4b53-883d-7355530f54e7", "5d1e0406-0705-4d32-90e4-e132e680f1ea"],
        updateCreditUsageTypeTo: "COMPANY",
      },
    },
  ],
};

/** SCIM (RFC 7644) requests as Entra ID and Okta send them (one operation for both base URLs). */
const SCIM_USER = {
  schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
  userName: "ada@example.com",
  name: { givenName: "Ada", familyName: "Lovelace" },
  emails: [{ value: "ada@example.com", type: "work", primary: true }],
  active: true,
};
const scimSamples: Record<string, SampleRequest[]> = {
  scimListUsers: [
    { query: { filter: 'userName eq "ada@example.com"' } },
    { query: { filter: 'userName sw "ada"', startIndex: 1, count: 100, attributes: "userName" } },
  ],
  scimGetUser: [{ path: { userId: USER } }, { path: { userId: USER }, query: { excludedAttributes: "emails" } }],
  scimCreateUser: [{ body: SCIM_USER }],
  scimReplaceUser: [{ path: { userId: USER }, body: { ...SCIM_USER, id: USER, externalId: "00u1okta" } }],
  scimPatchUser: [
    {
      path: { userId: USER },
      body: {
        schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        Operations: [{ op: "Replace", path: "active", value: "False" }],
      },
    },
  ],
  scimDeleteUser: [{ path: { userId: USER } }],
  scimGetResourceType: [{ path: { resourceTypeId: "User" } }],
  scimGetSchema: [{ path: { schemaId: "urn:ietf:params:scim:schemas:core:2.0:User" } }],
};
for (const [operationId, samples] of Object.entries(scimSamples)) validSamples[operationId] = samples;

/** Requests the service refuses, each with the reason the schema must give. */
const invalidSamples: Array<{ operationId: string; request: SampleRequest; why: RegExp }> = [
  { operationId: "createApiUser", request: { body: { tmcId: "not-a-uuid" } }, why: /tmcId must match format "uuid"/ },
  {
    operationId: "createApiUser",
    request: { body: { role: "SUPER_ADMIN" } },
    why: /role must be equal to one of the allowed values/,
  },
  {
    operationId: "createApiUser",
    request: { body: { credentialType: "PASSWORD" } },
    why: /credentialType must be equal to one of the allowed values/,
  },
  { operationId: "getApiUsers", request: { query: { limit: 101 } }, why: /query limit must be <= 100/ },
  { operationId: "getApiUsers", request: { query: { offset: -1 } }, why: /query offset must be >= 0/ },
  {
    operationId: "rotateClientSecret",
    request: { body: { clientId: "" } },
    why: /clientId must NOT have fewer than 1 characters/,
  },
  {
    operationId: "deleteApiUser",
    request: { body: { clientId: "x".repeat(257) } },
    why: /clientId must NOT have more than 256 characters/,
  },
  { operationId: "getUserInfo", request: { path: { userId: "42" } }, why: /path userId must match format "uuid"/ },
  {
    operationId: "updateUser",
    request: { path: { userId: USER }, body: { persona: "EMPLOYEE" } },
    why: /body must have required property 'businessInfo'/,
  },
  {
    operationId: "updateUser",
    request: {
      path: { userId: USER },
      body: {
        persona: "EMPLOYEE",
        businessInfo: { legalEntityRef: { id: LEGAL_ENTITY }, organizationRef: { id: ORG } },
        personalInfo: { dob: { iso8601: "17/05/1990" } },
      },
    },
    why: /dob\/iso8601 must match pattern/,
  },
  {
    operationId: "fetchCompanyTransferableUnusedCredits",
    request: { body: { companyCreditFilter: { expiryDateRange: { expiryDateStart: { iso8601: "2026-01-01" } } } } },
    why: /must have required property 'companyId'/,
  },
  {
    operationId: "fetchCompanyTransferableUnusedCredits",
    request: {
      body: {
        companyId: { id: ORG },
        companyCreditFilter: { expiryDateRange: { expiryDateStart: { iso8601: "2026-13-01" } } },
      },
    },
    why: /expiryDateStart\/iso8601 must match pattern/,
  },
  {
    operationId: "fetchCompanyTransferableUnusedCredits",
    request: { body: { companyId: { id: ORG }, companyCreditFilter: { selectedAirlines: ["AAAA"] } } },
    why: /selectedAirlines\/0 must NOT have more than 3 characters/,
  },
  {
    operationId: "migrateUnusedCreditsInCompanyCredits",
    request: { body: { paymentSourceIds: [], updateCreditUsageTypeTo: "COMPANY" } },
    why: /paymentSourceIds must NOT have fewer than 1 items/,
  },
];

/** Every schema object of the document, with where it is. */
function* schemasOf(value: unknown, at: string): Generator<[string, Json]> {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) yield* schemasOf(item, `${at}/${i}`);
  } else if (value && typeof value === "object") {
    yield [at, value as Json];
    for (const [key, item] of Object.entries(value)) yield* schemasOf(item, `${at}/${key}`);
  }
}

describe("OpenAPI document", () => {
  test("declares no constraint that is not set: no maxLength 0, empty pattern or other zero-value rule", () => {
    let strings = 0;
    for (const [at, node] of schemasOf(doc, "")) {
      if (node.type === "string") strings++;
      assert.notEqual(node.maxLength, 0, `${at} has maxLength 0`);
      assert.notEqual(node.pattern, "", `${at} has an empty pattern`);
      assert.notEqual(node.maxItems, 0, `${at} has maxItems 0`);
      if (node.enum !== undefined)
        assert.ok(Array.isArray(node.enum) && node.enum.length > 0, `${at} has an empty enum`);
      for (const keyword of ["minLength", "minItems"])
        assert.notEqual(node[keyword], 0, `${at} has ${keyword} 0 (an unset rule read as its default)`);
      if (node.format !== undefined) assert.notEqual(node.format, "", `${at} has an empty format`);
    }
    assert.ok(strings > 50, "the walk saw the document's string schemas");
  });

  test("keeps the constraints that are set", () => {
    const s = doc.components.schemas;
    // A property's keywords less its description (the proto comment, tested below).
    const bare = (schema: Json) => Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "description"));
    assert.deepEqual(bare(s["travel.apiuser.v2.CreateApiUserRequest"].properties.tmcId), {
      type: "string",
      format: "uuid",
    });
    assert.deepEqual(bare(s["travel.apiuser.v2.RotateClientSecretRequest"].properties.clientId), {
      type: "string",
      minLength: 1,
      maxLength: 256,
    });
    assert.deepEqual(bare(s["travel.aircredit.v3.DateModel"].properties.iso8601), {
      type: "string",
      pattern: "^\\d{4}-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])$",
    });
    assert.equal(s["travel.user.v2.BusinessInfo"].properties.email.format, "email");
    assert.deepEqual(s["travel.apiuser.v2.ApiUserRole"].enum, [
      "API_USER_ROLE_UNSPECIFIED",
      "TMC_ADMIN",
      "COMPANY_ADMIN",
    ]);
    const limit = doc.paths["/v2/api-users"].get.parameters.find((p: Json) => p.name === "limit");
    assert.deepEqual(limit.schema, { type: "integer", format: "int32", minimum: 0, maximum: 100 });
    // Repeated rules: item counts and the rules of each item.
    assert.deepEqual(bare(s["travel.aircredit.v3.MigrateCompanyCreditsRequest"].properties.paymentSourceIds), {
      type: "array",
      items: { type: "string", maxLength: 64 },
      minItems: 1,
      maxItems: 100,
    });
    assert.deepEqual(bare(s["travel.user.v2.Latlng"].properties.latitude), {
      type: "number",
      minimum: -90,
      maximum: 90,
    });
  });

  test("compiles under Ajv 2020-12 strict mode, every $ref resolving", () => {
    for (const name of Object.keys(doc.components.schemas)) validatorAt(pointer("components", "schemas", name));
    for (const op of operations) {
      if (op.body) validatorAt(op.body.pointer);
      for (const p of op.parameters) validatorAt(p.pointer);
    }
  });

  test("has a sample for every operation that takes a JSON or form body or parameters", () => {
    const needing = operations.filter((o) => o.body || o.parameters.length).map((o) => o.operationId);
    assert.ok(needing.length >= 10, `found ${needing.length} operations`);
    assert.deepEqual(Object.keys(validSamples).sort(), [...needing].sort());
    for (const o of operations.filter((o) => o.body)) {
      assert.ok(
        ["application/json", "application/x-www-form-urlencoded", "application/scim+json"].includes(o.body!.mediaType),
        `${o.operationId}: ${o.body!.mediaType}`,
      );
    }
    assert.equal(operation("fetchOauth2Token").body?.mediaType, "application/x-www-form-urlencoded");
  });

  for (const [operationId, samples] of Object.entries(validSamples)) {
    test(`realistic ${operationId} requests validate`, () => {
      for (const sample of samples) assert.deepEqual(errorsOf(operationId, sample), [], JSON.stringify(sample));
    });
  }

  test("error answers refer to travel.common.v1.ErrorResponse, derived from the message like every other schema", () => {
    const ref = `#/components/schemas/${ErrorResponseSchema.typeName}`;
    const errorSchemas = Object.values(doc.paths as Json).flatMap((verbs) =>
      Object.values(verbs as Json).flatMap((op) =>
        Object.entries(op.responses as Json)
          .filter(([status]) => Number(status) >= 400)
          .flatMap(([, response]) => Object.values((response as Json).content as Json).map((c) => c.schema)),
      ),
    );
    assert.ok(errorSchemas.length >= 20, `${errorSchemas.length} documented error answers`);
    for (const schema of errorSchemas) assert.deepEqual(schema, { $ref: ref });
    const component = doc.components.schemas[ErrorResponseSchema.typeName];
    assert.deepEqual(
      Object.keys(component.properties),
      ErrorResponseSchema.fields.map((f) => f.jsonName),
    );
    assert.deepEqual(component.properties.errorMessages, {
      type: "array",
      items: { $ref: `#/components/schemas/${ErrorMessageSchema.typeName}` },
    });
  });

  test("message schemas, their properties and parameters carry the proto comments as descriptions", () => {
    const component = doc.components.schemas[ErrorResponseSchema.typeName];
    assert.equal(component.description, errorDocs[ErrorResponseSchema.typeName]);
    // Each of ErrorResponse's commented fields, under its JSON name, with the comment of
    // proto/travel/common/v1/error.proto (through the generated error_docs.ts).
    const commented = ErrorResponseSchema.fields.filter((f) => errorDocs[`${ErrorResponseSchema.typeName}.${f.name}`]);
    assert.ok(commented.length >= 7, `${commented.length} commented ErrorResponse fields`);
    for (const f of commented)
      assert.equal(
        component.properties[f.jsonName].description,
        errorDocs[`${ErrorResponseSchema.typeName}.${f.name}`],
        f.jsonName,
      );
    assert.equal(
      component.properties.debugIdentifier.description,
      "The request id that the service's logs carry for this request.",
    );
    // A $ref property keeps its comment as a 3.1 sibling keyword.
    assert.equal(doc.openapi, "3.1.0");
    const persona = doc.components.schemas[GetUserResponseSchema.typeName].properties.persona;
    assert.equal(persona.$ref, "#/components/schemas/travel.user.v2.Persona");
    assert.match(persona.description, /^Always present/);
    // Enums too, and the parameters (on the parameter, not its schema).
    assert.equal(doc.components.schemas["travel.user.v2.Persona"].description, allDocs["travel.user.v2.Persona"]);
    const described = Object.values(doc.paths as Json).flatMap((verbs) =>
      Object.values(verbs as Json).flatMap((op) => (op.parameters ?? []) as Json[]),
    );
    assert.ok(described.some((p) => p.description));
    for (const p of described) assert.equal(p.schema.description, undefined, p.name);
  });

  test("an element without a proto comment has no description", () => {
    // ErrorResponse.error_messages has no comment in error.proto.
    assert.equal(errorDocs[`${ErrorResponseSchema.typeName}.error_messages`], undefined);
    assert.equal(doc.components.schemas[ErrorResponseSchema.typeName].properties.errorMessages.description, undefined);
    for (const [name, schema] of Object.entries(doc.components.schemas as Json)) {
      assert.equal(schema.description, allDocs[name], name);
    }
  });

  test("requests the service refuses do not validate, for the right reason", () => {
    for (const { operationId, request, why } of invalidSamples) {
      const errors = errorsOf(operationId, request);
      assert.ok(
        errors.some((e) => why.test(e)),
        `${operationId} ${JSON.stringify(request)}: expected an error matching ${why}, got ${JSON.stringify(errors)}`,
      );
    }
  });
});
