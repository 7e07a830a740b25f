// gRPC conformance: every RPC of the contract through two independent gRPC
// clients, @grpc/grpc-js (generic clients built from the descriptors, test/helpers/grpc-js.ts)
// and `buf curl --protocol grpc --http2-prior-knowledge` (connect-go; its schema a descriptor set
// written from the same descriptors, reflection only where reflection is the subject). Unary calls
// of the contract are served by the lean path on HTTP/2 streams (src/http/protocol/grpc-unary.ts),
// reflection and health by Connect-RPC behind Fastify: these are the things a gRPC caller relies on.
//
// The RPCs are the registry's (contractServices, src/rpc/areas.ts), never a list here: the first
// test fails when an RPC has no entry in CASES (what its success needs; how to make it invalid or
// not found, or why it cannot be) or is not unary. The cases a credential decides come from the
// contract's options (the service's authentication kind, the method's access rule):
//   401 none      no credential                                  → UNAUTHENTICATED
//   401 invalid   a tampered token / wrong operator token         → UNAUTHENTICATED
//                 (CLIENT_SECRET: HTTP Basic with a wrong secret → PERMISSION_DENIED INVALID_CLIENT, spec 7)
//   403 scope     an access token without the method's scope      → PERMISSION_DENIED
//   403 role      a COMPANY_ADMIN's token where the rule names TMC_ADMIN only → PERMISSION_DENIED
// Every error must carry grpc-status-details-bin: a google.rpc.Status whose code and message are
// grpc-status and grpc-message, holding a travel.common.v1.ErrorResponse whose debugIdentifier is
// the answer's x-request-id, worded in the service's error dialect (OAuth: `error`; SCIM:
// `schemas`, `detail`); buf curl's exit status must be 8 × the code. Every answer leaves one
// access-log line. grpc-js sends grpc-timeout on every call (its 15 s deadline).
//
// grpc-js runs every case below. buf curl runs every success (and the documented refusal), the
// no-credential case once per service, and each other case kind once per error dialect (OAuth,
// SCIM, none), each on the first RPC that has it: the error encoding is per protocol and dialect,
// not per RPC, and each buf curl call costs a process (about 0.2 s of CPU).
//
// Which cases an RPC has is its entry in CASES (no copy of them here, so none to keep in step): a
// 400 or 404 case, or the reason a generic call cannot provoke one; a 403 exists only where a valid
// credential can lack a right (an access token's scope or role, a TMC admin naming another TMC,
// the token endpoint's wrong secret): the operator credential has no rights to lack, and SCIM
// tokens are issued only to the COMPANY_ADMIN of a company, so SCIM's documented 403 cannot be
// reached. "tenant's …": another TMC's resource, NOT_FOUND like an unknown one.
//
// Then, once, on chosen RPCs: a deadline shorter than the call (grpc-js: DEADLINE_EXCEEDED, the
// channel still serves); a call cancelled by the client (CANCELLED, logged once, the channel still
// serves); a message over BODY_LIMIT_BYTES (INVALID_ARGUMENT PAYLOAD_TOO_LARGE with the
// ErrorResponse, one at the limit read and validated; both clients; the channel still serves); an
// unknown method and an unknown service (UNIMPLEMENTED; both clients); a gzip-compressed request
// (`grpc-encoding: gzip`, accepted: grpc-js with channel compression, and a frame compressed by
// hand); gRPC reflection (buf curl --list-services / --list-methods name every RPC of the
// registry) and gRPC health (Check on every service name, unknown names NOT_FOUND).
//
// The server ends a call at its grpc-timeout (DEADLINE_EXCEEDED with the ErrorResponse, whether
// the message never completed or the handler is slower), and an unknown method or service is
// UNIMPLEMENTED with the ErrorResponse in grpc-status-details-bin.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http2 from "node:http2";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { after, before, describe, test } from "node:test";
import {
  clone,
  create,
  fromBinary,
  toBinary,
  type DescFile,
  type DescMethod,
  type DescService,
  type JsonObject,
} from "@bufbuild/protobuf";
import {
  FileDescriptorSetSchema,
  FileDescriptorProtoSchema,
  MethodDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import {
  ApiUserService,
  GetApiUsersRequestSchema,
  GetApiUsersResponseSchema,
} from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { GetTmcRequestSchema, OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { contractServices, reflectionFilesOn, serviceNamesOn } from "../../src/rpc/areas.js";
import {
  accessRuleOf,
  authenticationOf,
  AuthenticationKind,
  errorDialectOf,
  ErrorDialect,
} from "../../src/rpc/contract.js";
import { creditJson, creditSpec } from "../air-credits/air-credit-kit.js";
import { backend, newTempDir, TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import {
  grpcJsUnary,
  jsonGrpcClient,
  rawGrpcClient,
  type GenericGrpcClient,
  type GrpcJsOutcome,
} from "../helpers/grpc-js.js";
import { grpcFrame, grpcMessages, h2GrpcCall } from "../helpers/h2-grpc.js";
import { dropStorage, operatorCall, seedDemo, startService, type RunningService } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";
import { accessTokenOf, newApiUser, newTenant, newUser, ROOMY_RATE_LIMITS, type Client } from "../helpers/token-kit.js";
import { ERROR_SCHEMA, LIST_RESPONSE, newUser as scimUserOf, PATCH_OP, scim, USER_SCHEMA } from "../scim/scim-kit.js";

const BODY_LIMIT_BYTES = 65_536;
/**
 * Budgets no run exhausts and timeouts no busy machine reaches (as the fuzzers' environment,
 * test/fuzz/fuzz-kit.ts), so that only the request decides the answer: cases run side by side,
 * and several of them lock tenant A's TMC row at once.
 */
const SERVICE_ENV: Record<string, string> = {
  ...ROOMY_RATE_LIMITS,
  REQUEST_DEADLINE_MS: "120000",
  DATABASE_QUERY_TIMEOUT_MS: "60000",
  DATABASE_ACQUIRE_TIMEOUT_MS: "60000",
  DATABASE_LOCK_WAIT_MS: "30000",
  REDIS_COMMAND_TIMEOUT_MS: "30000",
  BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES),
};
const SCIM_SCHEMA_PREFIX = "urn:ietf:params:scim:";
/** A UUID no row has. */
const NOBODY = "00000000-0000-4000-8000-000000000000";

// ---- the world the cases run in -------------------------------------------------------------------

interface World {
  readonly running: RunningService;
  readonly baseUrl: string;
  /** The tenant the cases act in (the operator's demo tenant: users and air credits). */
  readonly a: {
    readonly tmcId: string;
    readonly orgId: string;
    readonly userIds: readonly string[];
    readonly admin: Client;
    /** The TMC admin's token, every scope. */
    readonly token: string;
    /** The TMC admin's token with the scope `openid` only. */
    readonly noScopeToken: string;
    readonly companyAdminToken: string;
    readonly scimToken: string;
  };
  /** A resource server (its credential), and a token of A's admin for its audience. */
  readonly rs: { readonly clientId: string; readonly clientSecret: string; readonly token: string };
  /** Another tenant, whose resources A must not reach. */
  readonly b: {
    readonly tmcId: string;
    readonly orgId: string;
    readonly userId: string;
    readonly adminClientId: string;
  };
}

/** Who calls: the method's own credential, none, a spoiled one, or one that lacks a right. */
type Who = "own" | "none" | "invalid" | "noScope" | "companyAdmin" | "apiUser";

/** A different value of the same shape: its last four characters changed within the token's alphabet. */
function spoiled(secret: string): string {
  return secret.slice(0, -4) + (secret.slice(-4) === "AAAA" ? "BBBB" : "AAAA");
}

/** A SCIM token (padded Base64) with one character in the middle changed, its padding kept. */
function spoiledScimToken(token: string): string {
  return `${token.slice(0, 20)}${token[20] === "A" ? "B" : "A"}${token.slice(21)}`;
}

function basic(clientId: string, clientSecret: string): string {
  return `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString("base64")}`;
}

/** The Authorization value of `who` for a method of this authentication kind (undefined: none). */
function authorizationOf(who: Who, kind: AuthenticationKind, w: World, asResourceServer = false): string | undefined {
  switch (who) {
    case "none":
      return undefined;
    case "apiUser":
      return basic(w.a.admin.clientId, w.a.admin.clientSecret);
    case "noScope":
      return `Bearer ${w.a.noScopeToken}`;
    case "companyAdmin":
      return `Bearer ${w.a.companyAdminToken}`;
    case "own":
    case "invalid": {
      const own = who === "own";
      switch (kind) {
        case AuthenticationKind.CLIENT_SECRET:
          return asResourceServer
            ? basic(w.rs.clientId, own ? w.rs.clientSecret : "not-the-secret")
            : basic(w.a.admin.clientId, own ? w.a.admin.clientSecret : "not-the-secret");
        case AuthenticationKind.OPERATOR:
          return `Bearer ${own ? TEST_OPERATOR_TOKEN : spoiled(TEST_OPERATOR_TOKEN)}`;
        case AuthenticationKind.SCIM_TOKEN:
          return `Bearer ${own ? w.a.scimToken : spoiledScimToken(w.a.scimToken)}`;
        default:
          return `Bearer ${own ? w.a.token : spoiled(w.a.token)}`;
      }
    }
  }
}

// ---- the cases of each RPC (hand-written: what a success needs, what is invalid, what is not found) --

type Request = (w: World) => JsonObject | Promise<JsonObject>;
type Check = (response: JsonObject, w: World) => void;
/** Why a case cannot be made by a generic call (shown in the table above as —). */
type Reason = string;

interface RpcCases {
  /** The call that succeeds, as the method's own credential. */
  readonly success: { readonly request: Request; readonly check?: Check; readonly grpcJsOnly?: boolean };
  /** A documented refusal that follows the success (RotateSigningKey: a rotation is pending). */
  readonly refusal?: {
    readonly name: string;
    readonly request: Request;
    readonly code: Code;
    readonly errorCode: string;
  };
  /** A request that breaks a rule of the contract (protovalidate), or the service's own 400. */
  readonly invalidArgument:
    { readonly request: Request; readonly field?: string; readonly errorCode?: string } | Reason;
  readonly notFound: { readonly request: Request; readonly field?: string } | Reason;
  /** CLIENT_SECRET only: the client authenticates in these request fields, not with HTTP Basic. */
  readonly credentialFields?: { readonly id: string; readonly secret: string };
  /** A PERMISSION_DENIED beyond the contract-derived scope and role cases (another tenant). */
  readonly permissionDenied?: {
    readonly name: string;
    readonly request: Request;
    readonly who?: Who;
    readonly errorCode?: string;
  };
  /** CLIENT_SECRET only: the caller is the world's resource server, not the TMC admin (a wrong secret is then 401). */
  readonly asResourceServer?: boolean;
}

const uniq = () => crypto.randomUUID().slice(0, 8);
const ticketNumber = () => `2${String(crypto.randomInt(0, 1e12)).padStart(12, "0")}`;
const credit = (): JsonObject => creditJson(creditSpec(ticketNumber())) as JsonObject;
/** Where a trusted issuer's keys are (not fetched when it is added) and the audience its tokens carry. */
const ISSUER_KEYS = { jwksUri: "https://idp.example/.well-known/jwks.json", audience: "travel" };
/** A public key an API user or a resource server may register (RFC 8037's Ed25519 example). */
const CLIENT_KEY = { kty: "OKP", crv: "Ed25519", kid: "k1", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" };
const isJwt = (value: unknown) => typeof value === "string" && /^[\w-]+\.[\w-]+\.[\w-]+$/.test(value);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A fresh API user of tenant A (to delete, rotate or revoke). */
const freshApiUserOfA = async (w: World) => (await newApiUser(w.baseUrl, w.a.tmcId, "TMC_ADMIN")).clientId;
/** A fresh resource server (to get, rotate or remove, or whose audience is taken). */
const freshResourceServer = (w: World) =>
  operatorCall<{ clientId: string; audiences: string[] }>(w.baseUrl, "CreateResourceServer", {
    name: `Conformance ${uniq()}`,
    audiences: [`https://rs-${uniq()}.example/api`],
  });
/** A fresh SCIM user of tenant A's company, made over SCIM's REST face. */
async function freshScimUser(w: World): Promise<{ id: string; userName: string }> {
  const userName = `conformance-${uniq()}@a.example`;
  const answer = await scim(w.running, w.a.scimToken, "POST", "/v2/scim/v2/Users", scimUser(userName));
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
  return { id: answer.body.id as string, userName };
}
/** A SCIM User resource (test/scim/scim-kit.ts) as the Struct a request carries. */
const scimUser = (userName: string, extra: Record<string, unknown> = {}) => scimUserOf(userName, extra) as JsonObject;
const resourceOf = (response: JsonObject) => response.resource as Record<string, any>;

const CASES: Record<string, RpcCases> = {
  // ---- AuthService (CLIENT_SECRET: HTTP Basic; OAuth error dialect) ----
  "travel.auth.v2.AuthService/FetchOauth2Token": {
    success: {
      request: () => ({ grant_type: "client_credentials" }),
      check: (r) => {
        assert.ok(isJwt(r.access_token), JSON.stringify(r));
        assert.equal(r.token_type, "Bearer");
        assert.ok(Number(r.expires_in) > 0);
      },
    },
    invalidArgument: {
      request: () => ({ grant_type: "client_credentials", client_id: "x".repeat(257) }),
      field: "client_id",
    },
    notFound: "an unknown client is INVALID_CLIENT (RFC 6749 5.2), the 403 case",
  },
  "travel.auth.v2.AuthService/IntrospectToken": {
    success: {
      request: (w) => ({ token: w.a.token }),
      check: (r, w) => assert.deepEqual([r.active, r.client_id], [true, w.a.admin.clientId]),
    },
    invalidArgument: { request: () => ({ token: "" }), field: "token" },
    notFound: "an unknown token is {active: false} (RFC 7662 2.2)",
  },
  "travel.auth.v2.AuthService/IntrospectTokens": {
    asResourceServer: true,
    success: {
      request: (w) => ({ tokens: [w.rs.token, "junk"] }),
      check: (r, w) => {
        const results = r.results as JsonObject[];
        assert.deepEqual([results[0]?.active, results[0]?.client_id], [true, w.a.admin.clientId]);
        assert.deepEqual(results[1], { active: false });
      },
    },
    permissionDenied: {
      name: "an API user's credentials",
      request: (w) => ({ tokens: [w.rs.token] }),
      who: "apiUser",
      errorCode: "UNAUTHORIZED_CLIENT",
    },
    invalidArgument: { request: () => ({ tokens: [] }), field: "tokens" },
    notFound: "an unknown token is {active: false} (RFC 7662 2.2)",
  },
  "travel.auth.v2.AuthService/PollSecurityEvents": {
    asResourceServer: true,
    success: {
      request: () => ({ returnImmediately: true, maxEvents: 1000 }),
      check: (r) => {
        const sets = (r.sets ?? {}) as JsonObject;
        assert.ok(Object.values(sets).every(isJwt), JSON.stringify(r));
      },
    },
    permissionDenied: {
      name: "an API user's credentials",
      request: () => ({ returnImmediately: true }),
      who: "apiUser",
      errorCode: "UNAUTHORIZED_CLIENT",
    },
    invalidArgument: { request: () => ({ maxEvents: 1001 }), field: "maxEvents" },
    notFound: "a jti this feed has not delivered is acknowledged as nothing (RFC 8936 has no unknown-SET error)",
  },
  "travel.auth.v2.AuthService/RevokeToken": {
    success: {
      request: async (w) => ({ token: await accessTokenOf(w.baseUrl, w.a.admin) }),
      check: (r) => assert.deepEqual(r, {}),
    },
    invalidArgument: { request: () => ({ token: "" }), field: "token" },
    notFound: "an unknown token is revoked as well (RFC 7009 2.2)",
  },
  "travel.auth.v2.AuthService/GetAuthToken": {
    // The legacy endpoint takes its credentials in the message only.
    credentialFields: { id: "clientId", secret: "clientSecret" },
    success: { request: () => ({}), check: (r) => assert.ok(isJwt(r.token), JSON.stringify(r)) },
    invalidArgument: { request: () => ({ clientId: "x".repeat(257) }), field: "clientId" },
    notFound: "an unknown client is INVALID_CLIENT, the 403 case",
  },

  // ---- ApiUserService (ACCESS_TOKEN, scope api-users, TMC_ADMIN) ----
  "travel.apiuser.v2.ApiUserService/CreateApiUser": {
    success: { request: () => ({}), check: (r) => assert.ok(r.clientId && r.clientSecret, JSON.stringify(r)) },
    permissionDenied: { name: "another TMC's tmcId", request: (w) => ({ tmcId: w.b.tmcId }) },
    invalidArgument: { request: () => ({ role: 99 }), field: "role" },
    notFound: { request: () => ({ role: "COMPANY_ADMIN", orgId: NOBODY }), field: "orgId" },
  },
  "travel.apiuser.v2.ApiUserService/GetApiUsers": {
    success: {
      request: () => ({ limit: 100 }),
      check: (r, w) => assert.ok((r.apiUsers as JsonObject[]).some((u) => u.clientId === w.a.admin.clientId)),
    },
    invalidArgument: { request: () => ({ limit: 101 }), field: "limit" },
    notFound: "the caller's own TMC always exists; an offset past the end is an empty page",
  },
  "travel.apiuser.v2.ApiUserService/DeleteApiUser": {
    success: { request: async (w) => ({ clientId: await freshApiUserOfA(w) }), check: (r) => assert.deepEqual(r, {}) },
    invalidArgument: { request: () => ({ clientId: "x".repeat(257) }), field: "clientId" },
    notFound: { request: (w) => ({ clientId: w.b.adminClientId }), field: "clientId" },
  },
  "travel.apiuser.v2.ApiUserService/RotateClientSecret": {
    success: {
      request: async (w) => ({ clientId: await freshApiUserOfA(w) }),
      check: (r) => assert.ok(r.clientId && r.clientSecret, JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "x".repeat(257) }), field: "clientId" },
    notFound: { request: (w) => ({ clientId: w.b.adminClientId }), field: "clientId" },
  },
  "travel.apiuser.v2.ApiUserService/SetClientKeys": {
    success: {
      request: async (w) => ({ clientId: await freshApiUserOfA(w), keys: [CLIENT_KEY] }),
      check: (r) => assert.deepEqual(r.keyIds, ["k1"], JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "x".repeat(257), keys: [CLIENT_KEY] }), field: "clientId" },
    notFound: { request: (w) => ({ clientId: w.b.adminClientId, keys: [CLIENT_KEY] }), field: "clientId" },
  },
  "travel.apiuser.v2.ApiUserService/SetClientDpopPolicy": {
    success: {
      request: async (w) => ({ clientId: await freshApiUserOfA(w), dpopBoundAccessTokens: true }),
      check: (r) => assert.equal(r.dpopBoundAccessTokens, true, JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "x".repeat(257) }), field: "clientId" },
    notFound: { request: (w) => ({ clientId: w.b.adminClientId, dpopBoundAccessTokens: true }), field: "clientId" },
  },

  // ---- UserService (ACCESS_TOKEN, users:read / users:write, any role) ----
  "travel.user.v2.UserService/GetUser": {
    success: { request: (w) => ({ userId: w.a.userIds[0]! }), check: (r, w) => assert.equal(r.id, w.a.userIds[0]) },
    invalidArgument: { request: () => ({ userId: "not-a-uuid" }), field: "userId" },
    notFound: { request: (w) => ({ userId: w.b.userId }), field: "userId" },
  },
  "travel.user.v2.UserService/UpdateUser": {
    success: { request: (w) => updateUserRequest(w, w.a.userIds[1]!), check: (r) => assert.deepEqual(r, {}) },
    invalidArgument: {
      request: (w) => ({ ...updateUserRequest(w, w.a.userIds[1]!), userId: "not-a-uuid" }),
      field: "userId",
    },
    notFound: { request: (w) => updateUserRequest(w, w.b.userId), field: "userId" },
  },

  // ---- AirCreditService (ACCESS_TOKEN, air-credits:read / :write, any role) ----
  "travel.aircredit.v3.AirCreditService/ListCompanyTransferableUnusedCredits": {
    success: {
      request: (w) => ({ companyId: { id: w.a.orgId } }),
      check: (r) => assert.ok((r.unusedCreditInfos as unknown[]).length > 0, JSON.stringify(r).slice(0, 300)),
    },
    invalidArgument: { request: () => ({}), field: "companyId" },
    notFound: { request: (w) => ({ companyId: { id: w.b.orgId } }), field: "companyId.id" },
  },
  "travel.aircredit.v3.AirCreditService/MigrateCompanyCredits": {
    success: {
      request: () => ({ paymentSourceIds: [crypto.randomUUID()], updateCreditUsageTypeTo: "COMPANY" }),
      check: (r) => assert.equal((r.migrationStatus as unknown[]).length, 1, JSON.stringify(r)),
    },
    invalidArgument: {
      request: () => ({ paymentSourceIds: [], updateCreditUsageTypeTo: "COMPANY" }),
      field: "paymentSourceIds",
    },
    notFound: "an unknown payment source is answered per id (FAILED, PAYMENT_SOURCE_NOT_FOUND), as the reference does",
  },

  // ---- OperatorService (OPERATOR) ----
  "travel.operator.v1.OperatorService/CreateTmc": {
    success: {
      request: () => ({ name: `Conformance ${uniq()}`, maxApiUsers: 3 }),
      check: (r) => assert.match(String(r.tmcId), UUID),
    },
    invalidArgument: { request: () => ({ name: "" }), field: "name" },
    notFound: "it creates; nothing is looked up",
  },
  "travel.operator.v1.OperatorService/SetTmcApiUserLimit": {
    success: { request: (w) => ({ tmcId: w.b.tmcId, maxApiUsers: 50 }), check: (r) => assert.equal(r.maxApiUsers, 50) },
    invalidArgument: { request: (w) => ({ tmcId: w.b.tmcId, maxApiUsers: -1 }), field: "maxApiUsers" },
    notFound: { request: () => ({ tmcId: NOBODY, maxApiUsers: 3 }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/ListTmcs": {
    success: {
      request: () => ({ limit: 1000 }),
      check: (r, w) => assert.ok((r.tmcs as JsonObject[]).some((t) => t.tmcId === w.a.tmcId)),
    },
    invalidArgument: { request: () => ({ limit: 0 }), field: "limit" },
    notFound: "a list; no TMC is named",
  },
  "travel.operator.v1.OperatorService/GetTmc": {
    success: {
      request: (w) => ({ tmcId: w.a.tmcId }),
      check: (r, w) => assert.equal((r.tmc as JsonObject).tmcId, w.a.tmcId),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid" }), field: "tmcId" },
    notFound: { request: () => ({ tmcId: NOBODY }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/CreateCompany": {
    success: {
      request: (w) => ({ tmcId: w.b.tmcId, name: `Company ${uniq()}` }),
      check: (r) => assert.match(String(r.orgId), UUID),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid", name: "x" }), field: "tmcId" },
    notFound: { request: () => ({ tmcId: NOBODY, name: "x" }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/CreateUser": {
    success: {
      request: (w) => ({ orgId: w.b.orgId, email: `u-${uniq()}@b.example`, givenName: "Grace", familyName: "Hopper" }),
      check: (r) => assert.match(String(r.userId), UUID),
    },
    invalidArgument: {
      request: (w) => ({ orgId: w.b.orgId, email: "not-an-address", givenName: "Grace", familyName: "Hopper" }),
      field: "email",
    },
    notFound: {
      request: () => ({ orgId: NOBODY, email: `u-${uniq()}@b.example`, givenName: "Grace", familyName: "Hopper" }),
      field: "orgId",
    },
  },
  "travel.operator.v1.OperatorService/CreateApiUser": {
    success: { request: (w) => ({ tmcId: w.b.tmcId }), check: (r) => assert.ok(r.clientId && r.clientSecret) },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid" }), field: "tmcId" },
    notFound: { request: () => ({ tmcId: NOBODY }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/ListApiUsers": {
    success: {
      request: (w) => ({ tmcId: w.a.tmcId }),
      check: (r, w) => assert.ok((r.apiUsers as JsonObject[]).some((u) => u.clientId === w.a.admin.clientId)),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid" }), field: "tmcId" },
    notFound: { request: () => ({ tmcId: NOBODY }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/RevokeApiUser": {
    success: {
      request: async (w) => ({ tmcId: w.a.tmcId, clientId: await freshApiUserOfA(w) }),
      check: (r, w) => assert.equal(r.tmcId, w.a.tmcId),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid", clientId: "x" }), field: "tmcId" },
    notFound: { request: (w) => ({ tmcId: w.a.tmcId, clientId: "nobody" }), field: "clientId" },
  },
  "travel.operator.v1.OperatorService/SetApiUserKeys": {
    success: {
      request: async (w) => ({
        tmcId: w.a.tmcId,
        clientId: await freshApiUserOfA(w),
        jwks: JSON.stringify({ keys: [CLIENT_KEY] }),
      }),
      check: (r, w) => assert.deepEqual([r.tmcId, r.keyIds], [w.a.tmcId, ["k1"]], JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid", clientId: "x", jwks: "{}" }), field: "tmcId" },
    notFound: {
      request: (w) => ({ tmcId: w.a.tmcId, clientId: "nobody", jwks: JSON.stringify({ keys: [CLIENT_KEY] }) }),
      field: "clientId",
    },
  },
  "travel.operator.v1.OperatorService/ListAuditEvents": {
    success: {
      request: (w) => ({ tmcId: w.a.tmcId, limit: 5 }),
      check: (r) => assert.ok(Array.isArray(r.events ?? [])),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid" }), field: "tmcId" },
    notFound: "an unknown TMC has an empty audit trail",
  },
  "travel.operator.v1.OperatorService/RotateSigningKey": {
    // Its success publishes a key that waits to activate, so a second call is refused: once only.
    success: { request: () => ({}), check: (r) => assert.ok(r.kid, JSON.stringify(r)), grpcJsOnly: true },
    refusal: {
      name: "FAILED_PRECONDITION while a published key waits to activate",
      request: () => ({}),
      code: Code.FailedPrecondition,
      errorCode: "SIGNING_KEY_ROTATION_PENDING",
    },
    invalidArgument: "its one field is a boolean",
    notFound: "nothing is named",
  },
  "travel.operator.v1.OperatorService/ListSigningKeys": {
    success: { request: () => ({}), check: (r) => assert.ok((r.keys as unknown[]).length > 0) },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.operator.v1.OperatorService/AddTrustedIssuer": {
    success: {
      request: (w) => ({
        tmcId: w.b.tmcId,
        issuer: `https://idp-${uniq()}.example`,
        ...ISSUER_KEYS,
      }),
      check: (r, w) => assert.equal(r.tmcId, w.b.tmcId),
    },
    invalidArgument: {
      request: (w) => ({ tmcId: w.b.tmcId, issuer: "", ...ISSUER_KEYS }),
      field: "issuer",
    },
    notFound: {
      request: () => ({ tmcId: NOBODY, issuer: "https://idp.example", ...ISSUER_KEYS }),
      field: "tmcId",
    },
  },
  "travel.operator.v1.OperatorService/ListTrustedIssuers": {
    success: { request: (w) => ({ tmcId: w.b.tmcId }), check: (r) => assert.ok(Array.isArray(r.issuers ?? [])) },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid" }), field: "tmcId" },
    notFound: { request: () => ({ tmcId: NOBODY }), field: "tmcId" },
  },
  "travel.operator.v1.OperatorService/RemoveTrustedIssuer": {
    success: {
      request: async (w) => {
        const issuer = `https://idp-${uniq()}.example`;
        await operatorCall(w.baseUrl, "AddTrustedIssuer", {
          tmcId: w.b.tmcId,
          issuer,
          ...ISSUER_KEYS,
        });
        return { tmcId: w.b.tmcId, issuer };
      },
      check: (r, w) => assert.equal(r.tmcId, w.b.tmcId),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid", issuer: "https://idp.example" }), field: "tmcId" },
    notFound: { request: (w) => ({ tmcId: w.b.tmcId, issuer: "https://nowhere.example" }) },
  },
  "travel.operator.v1.OperatorService/CreateResourceServer": {
    success: {
      request: () => ({ name: `Conformance ${uniq()}`, audiences: [`https://rs-${uniq()}.example/api`] }),
      check: (r) => assert.ok(String(r.clientId).startsWith("rs-") && r.clientSecret, JSON.stringify(r)),
    },
    refusal: {
      name: "ALREADY_EXISTS for an audience another resource server serves",
      request: async (w) => {
        const audience = (await freshResourceServer(w)).audiences[0]!;
        return { name: `Conformance ${uniq()}`, audiences: [audience] };
      },
      code: Code.AlreadyExists,
      errorCode: "ALREADY_EXISTS",
    },
    invalidArgument: { request: () => ({ name: "No audience", audiences: [] }), field: "audiences" },
    notFound: "it creates; nothing is looked up",
  },
  "travel.operator.v1.OperatorService/ListResourceServers": {
    success: {
      request: () => ({ limit: 1000 }),
      check: (r) => assert.ok(Array.isArray(r.resourceServers ?? []), JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ limit: 0 }), field: "limit" },
    notFound: "a list; no resource server is named",
  },
  "travel.operator.v1.OperatorService/GetResourceServer": {
    success: {
      request: async (w) => ({ clientId: (await freshResourceServer(w)).clientId }),
      check: (r) => assert.ok(String((r.resourceServer as JsonObject).clientId).startsWith("rs-")),
    },
    invalidArgument: { request: () => ({ clientId: "" }), field: "clientId" },
    notFound: { request: () => ({ clientId: "rs-nobody" }), field: "clientId" },
  },
  "travel.operator.v1.OperatorService/RotateResourceServerSecret": {
    success: {
      request: async (w) => ({ clientId: (await freshResourceServer(w)).clientId }),
      check: (r) => assert.ok(String(r.clientId).startsWith("rs-") && r.clientSecret, JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "" }), field: "clientId" },
    notFound: { request: () => ({ clientId: "rs-nobody" }), field: "clientId" },
  },
  "travel.operator.v1.OperatorService/SetResourceServerKeys": {
    success: {
      request: async (w) => ({
        clientId: (await freshResourceServer(w)).clientId,
        jwks: JSON.stringify({ keys: [CLIENT_KEY] }),
      }),
      check: (r) => assert.deepEqual(r.keyIds, ["k1"], JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "rs-x", jwks: "{not json" }), field: "jwks" },
    notFound: {
      request: () => ({ clientId: "rs-nobody", jwks: JSON.stringify({ keys: [CLIENT_KEY] }) }),
      field: "clientId",
    },
  },
  "travel.operator.v1.OperatorService/RemoveResourceServer": {
    success: {
      request: async (w) => ({ clientId: (await freshResourceServer(w)).clientId }),
      check: (r) => assert.ok(String(r.clientId).startsWith("rs-"), JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ clientId: "" }), field: "clientId" },
    notFound: { request: () => ({ clientId: "rs-nobody" }), field: "clientId" },
  },
  "travel.operator.v1.OperatorService/GetTokenLockout": {
    success: { request: () => ({ address: "192.0.2.1" }), check: (r) => assert.equal(r.address, "192.0.2.1") },
    invalidArgument: { request: () => ({ address: "not-an-address" }), field: "address" },
    notFound: "an address without failures has a count of zero",
  },
  "travel.operator.v1.OperatorService/ResetTokenLockout": {
    success: { request: () => ({ address: "192.0.2.1" }), check: (r) => assert.equal(r.address, "192.0.2.1") },
    invalidArgument: { request: () => ({ address: "not-an-address" }), field: "address" },
    notFound: "forgetting a count that is not there succeeds",
  },
  "travel.operator.v1.OperatorService/ImportAirCredits": {
    success: {
      request: (w) => ({ companyId: w.b.orgId, credits: [credit()] }),
      check: (r) => assert.equal(r.created, 1),
    },
    invalidArgument: { request: () => ({ companyId: "not-a-uuid", credits: [credit()] }), field: "companyId" },
    notFound: { request: () => ({ companyId: NOBODY, credits: [credit()] }), field: "companyId" },
  },
  "travel.operator.v1.OperatorService/Seed": {
    success: { request: () => ({}), check: (r) => assert.match(String(r.tmcId), UUID) },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.operator.v1.OperatorService/Migrate": {
    success: { request: () => ({}), check: (r) => assert.deepEqual(r.applied ?? [], []) },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.operator.v1.OperatorService/SetApiUserDpopPolicy": {
    success: {
      request: async (w) => ({ tmcId: w.a.tmcId, clientId: await freshApiUserOfA(w), dpopBoundAccessTokens: true }),
      check: (r, w) => assert.deepEqual([r.tmcId, r.dpopBoundAccessTokens], [w.a.tmcId, true], JSON.stringify(r)),
    },
    invalidArgument: { request: () => ({ tmcId: "not-a-uuid", clientId: "x" }), field: "tmcId" },
    notFound: { request: (w) => ({ tmcId: w.a.tmcId, clientId: "nobody" }), field: "clientId" },
  },

  // ---- ScimService (SCIM_TOKEN of a COMPANY_ADMIN; SCIM error dialect) ----
  "travel.scim.v2.ScimService/ListUsers": {
    success: { request: () => ({ count: 5 }), check: (r) => assert.deepEqual(resourceOf(r).schemas, [LIST_RESPONSE]) },
    invalidArgument: { request: () => ({ filter: 'userName zz "x"' }), errorCode: "INVALID_FILTER" },
    notFound: "a list; an unmatched filter is an empty one",
  },
  "travel.scim.v2.ScimService/GetUser": {
    success: {
      request: (w) => ({ userId: w.a.userIds[0]! }),
      check: (r, w) => assert.equal(resourceOf(r).id, w.a.userIds[0]),
    },
    invalidArgument: {
      request: (w) => ({ userId: w.a.userIds[0]!, attributes: "name..givenName" }),
      errorCode: "INVALID_VALUE",
    },
    notFound: { request: (w) => ({ userId: w.b.userId }) },
  },
  "travel.scim.v2.ScimService/CreateUser": {
    success: {
      request: () => ({ resource: scimUser(`conformance-${uniq()}@a.example`) }),
      check: (r) => assert.deepEqual(resourceOf(r).schemas, [USER_SCHEMA]),
    },
    invalidArgument: { request: () => ({ resource: {} }), field: "schemas" },
    notFound: "it creates; nothing is looked up",
  },
  "travel.scim.v2.ScimService/ReplaceUser": {
    success: {
      request: async (w) => {
        const user = await freshScimUser(w);
        return {
          userId: user.id,
          resource: scimUser(user.userName, { name: { givenName: "Grace", familyName: "Hopper" } }),
        };
      },
      check: (r) => assert.equal(resourceOf(r).name?.givenName, "Grace"),
    },
    invalidArgument: { request: (w) => ({ userId: w.a.userIds[0]!, resource: {} }), field: "schemas" },
    notFound: { request: () => ({ userId: NOBODY, resource: scimUser(`x-${uniq()}@a.example`) }) },
  },
  "travel.scim.v2.ScimService/PatchUser": {
    success: {
      request: async (w) => ({
        userId: (await freshScimUser(w)).id,
        patch: { schemas: [PATCH_OP], Operations: [{ op: "replace", path: "active", value: false }] },
      }),
      check: (r) => assert.equal(resourceOf(r).active, false),
    },
    invalidArgument: {
      request: (w) => ({
        userId: w.a.userIds[0]!,
        patch: { schemas: [PATCH_OP], Operations: [{ op: "explode", path: "active" }] },
      }),
    },
    notFound: {
      request: () => ({
        userId: NOBODY,
        patch: { schemas: [PATCH_OP], Operations: [{ op: "replace", path: "active", value: false }] },
      }),
    },
  },
  "travel.scim.v2.ScimService/DeleteUser": {
    success: { request: async (w) => ({ userId: (await freshScimUser(w)).id }), check: (r) => assert.deepEqual(r, {}) },
    invalidArgument: "its one field is the id: any id is looked up (documented 401, 403, 404)",
    notFound: { request: () => ({ userId: NOBODY }) },
  },
  "travel.scim.v2.ScimService/GetServiceProviderConfig": {
    success: {
      request: () => ({}),
      check: (r) => assert.ok((resourceOf(r).schemas as string[])[0]!.startsWith(SCIM_SCHEMA_PREFIX)),
    },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.scim.v2.ScimService/ListResourceTypes": {
    success: { request: () => ({}), check: (r) => assert.deepEqual(resourceOf(r).schemas, [LIST_RESPONSE]) },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.scim.v2.ScimService/GetResourceType": {
    success: { request: () => ({ resourceTypeId: "User" }), check: (r) => assert.equal(resourceOf(r).id, "User") },
    invalidArgument: "any id is looked up (documented 401, 404)",
    notFound: { request: () => ({ resourceTypeId: "Group" }), field: "resourceTypeId" },
  },
  "travel.scim.v2.ScimService/ListSchemas": {
    success: { request: () => ({}), check: (r) => assert.deepEqual(resourceOf(r).schemas, [LIST_RESPONSE]) },
    invalidArgument: "it has no fields",
    notFound: "nothing is named",
  },
  "travel.scim.v2.ScimService/GetSchema": {
    success: { request: () => ({ schemaId: USER_SCHEMA }), check: (r) => assert.equal(resourceOf(r).id, USER_SCHEMA) },
    invalidArgument: "any id is looked up (documented 401, 404)",
    notFound: { request: () => ({ schemaId: "urn:example:nope" }), field: "schemaId" },
  },
};

/** A valid UpdateUser request for a user of tenant A's company (the fuzzers' seed, test/fuzz/fuzz-kit.ts validRequests). */
function updateUserRequest(w: World, userId: string): JsonObject {
  return {
    userId,
    persona: "EMPLOYEE",
    businessInfo: { legalEntityRef: { id: w.a.orgId }, organizationRef: { id: w.a.orgId } },
    personalInfo: { email: "a@b.example" },
    travelPreferences: { preferences: { air: { seat: "AISLE" } } },
  };
}

// ---- the cases, derived from the contract and CASES -----------------------------------------------

const ALL_METHODS: readonly DescMethod[] = contractServices.flatMap((service) => service.methods);
const METHODS: readonly DescMethod[] = ALL_METHODS.filter((method) => method.methodKind === "unary");
const keyOf = (method: DescMethod) => `${method.parent.typeName}/${method.name}`;
/**
 * The streaming RPCs: this harness calls unary RPCs only, so each has a conformance test of its own
 * through grpc-js and Connect (named here; a new one must be added with its test).
 */
const STREAMING: Readonly<Record<string, string>> = {
  "travel.auth.v2.AuthService/WatchCredentialChanges": "test/tokens/credential-change-stream.test.ts",
};

type Expect = "OK" | { readonly code: Code; readonly errorCode: string; readonly field?: string };

interface Case {
  readonly name: string;
  /** What buf curl samples: successes and documented refusals always, `none` once per service, the rest once per error dialect. */
  readonly sample: "success" | "none" | "invalid" | "scope" | "role" | "tenant" | "invalidArgument" | "notFound";
  readonly who: Who;
  readonly request: Request;
  readonly expect: Expect;
  readonly check?: Check;
  readonly viaBufCurl: boolean;
}

const sampledByBufCurl = new Set<string>();

/** The cases of one RPC, in order: its success (and documented refusal), then its errors. */
function casesOf(method: DescMethod): Case[] {
  const spec = CASES[keyOf(method)];
  if (!spec) return [];
  const kind = authenticationOf(method);
  const rule = accessRuleOf(method);
  // The errors a credential decides carry the success's request; its set-up (a fresh API user, a
  // fresh token) is made once for all of them.
  let shared: Promise<JsonObject> | undefined;
  const successRequest: Request = (w) => (shared ??= Promise.resolve(spec.success.request(w)));
  const clientSecret = kind === AuthenticationKind.CLIENT_SECRET;
  const cases: Array<Omit<Case, "viaBufCurl"> & { grpcJsOnly?: boolean }> = [
    { name: "success", sample: "success", who: "own", ...spec.success, expect: "OK" },
  ];
  if (spec.refusal) {
    const { name, request, code, errorCode } = spec.refusal;
    cases.push({
      name: `documented refusal: ${name}`,
      sample: "success",
      who: "own",
      request,
      expect: { code, errorCode },
    });
  }
  cases.push({
    name: "no credential: UNAUTHENTICATED",
    sample: "none",
    who: "none",
    request: successRequest,
    expect: {
      code: Code.Unauthenticated,
      errorCode: clientSecret ? "CLIENT_AUTHENTICATION_REQUIRED" : "USER_NOT_AUTHENTICATED",
    },
  });
  cases.push({
    name: spec.asResourceServer
      ? "a resource server's wrong secret: UNAUTHENTICATED RESOURCE_SERVER_AUTHENTICATION_FAILED"
      : clientSecret
        ? "a wrong client secret: PERMISSION_DENIED INVALID_CLIENT"
        : "an invalid credential: UNAUTHENTICATED",
    sample: "invalid",
    who: "invalid",
    request: successRequest,
    expect: spec.asResourceServer
      ? { code: Code.Unauthenticated, errorCode: "RESOURCE_SERVER_AUTHENTICATION_FAILED" }
      : clientSecret
        ? { code: Code.PermissionDenied, errorCode: "INVALID_CLIENT" }
        : { code: Code.Unauthenticated, errorCode: "USER_NOT_AUTHENTICATED" },
  });
  if (kind === AuthenticationKind.ACCESS_TOKEN) {
    const denied = { code: Code.PermissionDenied, errorCode: "PERMISSION_DENIED" };
    cases.push({
      name: `a token without the scope "${rule.scope}": PERMISSION_DENIED`,
      sample: "scope",
      who: "noScope",
      request: successRequest,
      expect: denied,
    });
    if (rule.roles.length > 0 && !rule.roles.includes("COMPANY_ADMIN")) {
      cases.push({
        name: `a COMPANY_ADMIN where the rule names ${rule.roles.join(", ")}: PERMISSION_DENIED`,
        sample: "role",
        who: "companyAdmin",
        request: successRequest,
        expect: denied,
      });
    }
  }
  if (spec.permissionDenied) {
    cases.push({
      name: `${spec.permissionDenied.name}: PERMISSION_DENIED`,
      sample: "tenant",
      who: spec.permissionDenied.who ?? "own",
      request: spec.permissionDenied.request,
      expect: { code: Code.PermissionDenied, errorCode: spec.permissionDenied.errorCode ?? "PERMISSION_DENIED" },
    });
  }
  if (typeof spec.invalidArgument !== "string") {
    const { request, field, errorCode } = spec.invalidArgument;
    cases.push({
      name: `invalid${field ? ` ${field}` : ""}: INVALID_ARGUMENT`,
      sample: "invalidArgument",
      who: "own",
      request,
      expect: { code: Code.InvalidArgument, errorCode: errorCode ?? "API_VALIDATION_FAILED", field },
    });
  }
  if (typeof spec.notFound !== "string") {
    const { request, field } = spec.notFound;
    cases.push({
      name: "not found: NOT_FOUND",
      sample: "notFound",
      who: "own",
      request,
      expect: { code: Code.NotFound, errorCode: "NOT_FOUND", field },
    });
  }
  return cases.map(({ grpcJsOnly, ...c }) => {
    // No credential once per service (each authentication kind refuses its own way); every other error
    // once per error dialect (the ErrorResponse's extra fields are the dialect's).
    const sample = `${c.sample === "none" ? method.parent.typeName : ErrorDialect[errorDialectOf(method.parent)]} ${c.sample}`;
    const viaBufCurl = c.sample === "success" ? !grpcJsOnly : !sampledByBufCurl.has(sample);
    if (viaBufCurl) sampledByBufCurl.add(sample);
    return { ...c, viaBufCurl };
  });
}

/** The request of a case as sent, and the Authorization header that goes with it. */
async function callOf(method: DescMethod, c: Case, w: World): Promise<{ request: JsonObject; authorization?: string }> {
  const request = await c.request(w);
  const kind = authenticationOf(method);
  const fields = CASES[keyOf(method)]?.credentialFields;
  if (kind !== AuthenticationKind.CLIENT_SECRET || !fields)
    return { request, authorization: authorizationOf(c.who, kind, w, CASES[keyOf(method)]?.asResourceServer) };
  if (c.who !== "own" && c.who !== "invalid") return { request };
  const secret = c.who === "own" ? w.a.admin.clientSecret : "not-the-secret";
  // The case's own values (an invalid clientId) win over the credential.
  return { request: { [fields.id]: w.a.admin.clientId, [fields.secret]: secret, ...request } };
}

// ---- two clients, one view of an answer -------------------------------------------------------------

interface Answer {
  readonly client: "grpc-js" | "buf curl";
  readonly ok: boolean;
  readonly response?: JsonObject;
  readonly code: Code;
  readonly requestId?: string;
  readonly errorResponse?: ErrorResponse;
  /** What the wire format got wrong (details that do not match the status, a wrong exit status). */
  readonly wireProblems: readonly string[];
  readonly raw: string;
}

function grpcJsAnswer(outcome: GrpcJsOutcome<unknown>): Answer {
  const problems: string[] = [];
  if (!outcome.ok) {
    if (!outcome.rpcStatus) problems.push("no grpc-status-details-bin holding a google.rpc.Status");
    else {
      if (outcome.rpcStatus.code !== (outcome.code as number))
        problems.push(`google.rpc.Status.code ${outcome.rpcStatus.code} but grpc-status ${outcome.code}`);
      if (outcome.rpcStatus.message !== outcome.details)
        problems.push(
          `google.rpc.Status.message ${JSON.stringify(outcome.rpcStatus.message)} but grpc-message ${JSON.stringify(outcome.details)}`,
        );
    }
  }
  return {
    client: "grpc-js",
    ok: outcome.ok,
    response: outcome.response as JsonObject | undefined,
    code: outcome.code as number as Code,
    requestId: outcome.requestId,
    errorResponse: outcome.errorResponse,
    wireProblems: problems,
    raw: `${grpc.status[outcome.code]} ${outcome.details}`,
  };
}

/** Connect's code names, as buf curl prints them: "permission_denied". */
const codeName = (code: Code) => Code[code].replace(/(?<!^)([A-Z])/g, "_$1").toLowerCase();

const BUF_PACKAGES: Record<string, string> = {
  "darwin arm64": "@bufbuild/buf-darwin-arm64",
  "darwin x64": "@bufbuild/buf-darwin-x64",
  "linux arm64": "@bufbuild/buf-linux-aarch64",
  "linux x64": "@bufbuild/buf-linux-x64",
};

/** buf's own binary: node_modules/.bin/buf is a Node script that starts it, which would double each call's start. */
const BUF = (() => {
  const require = createRequire(import.meta.url);
  const pkg = BUF_PACKAGES[`${os.platform()} ${os.arch()}`];
  try {
    if (pkg) return require.resolve(`${pkg}/bin/buf`);
  } catch {
    // not installed for this platform: the wrapper finds what it can
  }
  return path.join(path.dirname(require.resolve("@bufbuild/buf/package.json")), "bin", "buf");
})();

interface BufRun {
  readonly exit: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A few buf processes at a time: each starts a 45 MB binary (about 0.2 s of CPU). */
const bufSlots = (() => {
  let free = 3;
  const waiting: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (free === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    else free--;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else free++;
    }
  };
})();

function runBuf(args: readonly string[], input = ""): Promise<BufRun> {
  return bufSlots(
    () =>
      new Promise<BufRun>((resolve, reject) => {
        const child = spawn(BUF, args, { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
        // A backstop for a call that never ends (the answers come in well under a second).
        const backstop = setTimeout(() => child.kill("SIGKILL"), 60_000);
        child.on("error", reject);
        child.on("close", (code, signal) => {
          clearTimeout(backstop);
          resolve({ exit: code ?? (signal ? 128 : -1), stdout, stderr });
        });
        child.stdin.end(input);
      }),
  );
}

/**
 * buf curl's answer: exit status 0 and the response JSON on stdout, or 8 × the code and the error
 * JSON ({code, message, details: [{type, value}]}) on stderr; `-v` adds the headers and trailers.
 */
function bufAnswer(run: BufRun): Answer {
  const requestId = /^buf: < \(#\d+\) X-Request-Id: (\S+)/im.exec(run.stderr)?.[1];
  const raw = `exit ${run.exit} ${run.stdout.slice(0, 300)} ${run.stderr
    .split("\n")
    .filter((l) => !l.startsWith("buf: "))
    .join(" ")
    .slice(0, 500)}`;
  if (run.exit === 0)
    return {
      client: "buf curl",
      ok: true,
      response: JSON.parse(run.stdout || "{}") as JsonObject,
      code: 0 as Code,
      requestId,
      wireProblems: [],
      raw,
    };
  const text = run.stderr
    .split("\n")
    .filter((line) => !line.startsWith("buf: "))
    .join("\n")
    .trim();
  let json: { code?: string; message?: string; details?: Array<{ type?: string; value?: string }> };
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    return {
      client: "buf curl",
      ok: false,
      code: Code.Unknown,
      requestId,
      wireProblems: [`not an RPC error: ${text.slice(0, 300)}`],
      raw,
    };
  }
  const code = (Object.values(Code).find((c) => typeof c === "number" && codeName(c) === json.code) ??
    Code.Unknown) as Code;
  const problems: string[] = [];
  if (run.exit !== 8 * code) problems.push(`exit status ${run.exit}, not 8 × ${code}`);
  const detail = json.details?.find((d) => d.type === "travel.common.v1.ErrorResponse");
  if (!detail?.value)
    problems.push(`no travel.common.v1.ErrorResponse among the details: ${JSON.stringify(json.details)}`);
  return {
    client: "buf curl",
    ok: false,
    code,
    requestId,
    errorResponse: detail?.value ? fromBinary(ErrorResponseSchema, Buffer.from(detail.value, "base64")) : undefined,
    wireProblems: problems,
    raw,
  };
}

// ---- what every answer must be ------------------------------------------------------------------------

const summary = (er: ErrorResponse | undefined) =>
  er
    ? JSON.stringify({
        debugIdentifier: er.debugIdentifier,
        errorMessages: er.errorMessages.map(({ errorCode, message }) => ({ errorCode, message })),
      })
    : "(no ErrorResponse)";

/** An error's grpc-status-details-bin: the ErrorResponse, its debugIdentifier the answer's x-request-id, in the service's dialect. */
function assertErrorResponse(answer: Answer, service: DescService | undefined, context: string): ErrorResponse {
  assert.deepEqual(answer.wireProblems, [], context);
  const er = answer.errorResponse;
  assert.ok(er, `grpc-status-details-bin holds a travel.common.v1.ErrorResponse: ${context}`);
  assert.match(er.debugIdentifier, /\S/, `a debugIdentifier: ${context}`);
  assert.equal(er.debugIdentifier, answer.requestId, `the debugIdentifier is the x-request-id: ${context}`);
  assert.match(er.errorMessages[0]?.errorCode ?? "", /^[A-Z_]+$/, `an errorCode: ${context}`);
  if (service) {
    switch (errorDialectOf(service)) {
      case ErrorDialect.OAUTH:
        assert.match(er.error, /^[a-z_]+$/, `the OAuth dialect's error: ${context} ${summary(er)}`);
        break;
      case ErrorDialect.SCIM:
        assert.deepEqual(er.schemas, [ERROR_SCHEMA], `the SCIM dialect's schemas: ${context}`);
        assert.match(er.detail, /\S/, `the SCIM dialect's detail: ${context}`);
        break;
      default:
        break;
    }
  }
  return er;
}

function assertAnswer(answer: Answer, c: Case, method: DescMethod, w: World): void {
  const context = `${answer.client} ${keyOf(method)} [${c.name}]: ${answer.raw}`;
  if (c.expect === "OK") {
    assert.equal(answer.ok, true, `expected a success: ${context} ${summary(answer.errorResponse)}`);
    c.check?.(answer.response ?? {}, w);
    return;
  }
  const { code, errorCode, field } = c.expect;
  assert.equal(answer.ok, false, `expected ${Code[code]} ${errorCode}, got a success: ${context}`);
  assert.equal(Code[answer.code], Code[code], `${context} ${summary(answer.errorResponse)}`);
  const er = assertErrorResponse(answer, method.parent, context);
  assert.equal(er.errorMessages[0]?.errorCode, errorCode, `${context} ${summary(er)}`);
  if (field)
    assert.ok(
      er.errorMessages[0]!.errorParameters.some((p) => p.name === field),
      `the error names ${field}: ${context} ${JSON.stringify(er.errorMessages[0]!.errorParameters)}`,
    );
}

// ---- the test ---------------------------------------------------------------------------------------

describe(`gRPC conformance: every RPC through grpc-js and buf curl (${backend})`, () => {
  let world: World;
  let schemaFile: string;
  const clients = new Map<string, GenericGrpcClient>();
  /** Every x-request-id an answer carried: each must have one access-log line. */
  const answered = new Set<string>();

  const clientOf = (service: DescService): GenericGrpcClient => {
    let client = clients.get(service.typeName);
    if (!client) clients.set(service.typeName, (client = jsonGrpcClient(service, new URL(world.baseUrl).host)));
    return client;
  };
  const note = (answer: Answer) => {
    if (answer.requestId) answered.add(answer.requestId);
    return answer;
  };

  before(async () => {
    const running = await startService({ env: SERVICE_ENV });
    const { baseUrl } = running;
    const seed = await seedDemo(baseUrl);
    // Cases make API users in the demo TMC (5 by default).
    await operatorCall(baseUrl, "SetTmcApiUserLimit", { tmcId: seed.tmcId, maxApiUsers: 100 });
    const admin: Client = {
      clientId: seed.clientId,
      clientSecret: seed.clientSecret,
      tmcId: seed.tmcId,
      role: "TMC_ADMIN",
    };
    const [token, noScopeToken, companyAdmin, scimClient, b] = await Promise.all([
      accessTokenOf(baseUrl, admin),
      accessTokenOf(baseUrl, admin, { scope: "openid" }),
      newApiUser(baseUrl, seed.tmcId, "COMPANY_ADMIN", seed.orgId),
      operatorCall<{ scimToken: string }>(baseUrl, "CreateApiUser", {
        tmcId: seed.tmcId,
        orgId: seed.orgId,
        role: "COMPANY_ADMIN",
        credentialType: "SCIM_TOKEN",
      }),
      newTenant(baseUrl),
    ]);
    const [companyAdminToken, bUserId] = await Promise.all([
      accessTokenOf(baseUrl, companyAdmin),
      newUser(baseUrl, b.orgId, `b-${uniq()}@b.example`),
    ]);
    const rs = await operatorCall<{ clientId: string; clientSecret: string }>(baseUrl, "CreateResourceServer", {
      name: "Conformance gateway",
      audiences: ["https://conformance-gateway.example/api"],
    });
    const rsToken = await accessTokenOf(baseUrl, admin, { resource: "https://conformance-gateway.example/api" });
    world = {
      running,
      baseUrl,
      rs: { ...rs, token: rsToken },
      a: {
        tmcId: seed.tmcId,
        orgId: seed.orgId,
        userIds: seed.userIds,
        admin,
        token,
        noScopeToken,
        companyAdminToken,
        scimToken: scimClient.scimToken,
      },
      b: { tmcId: b.tmcId, orgId: b.orgId, userId: bUserId, adminClientId: b.admin.clientId },
    };
    schemaFile = writeSchema(newTempDir());
  });

  after(async () => {
    for (const client of clients.values()) client.close();
    if (!world) return;
    await world.running.stop();
    await dropStorage(world.running.storage);
  });

  test("CASES holds exactly the registry's unary RPCs; every streaming RPC has a conformance test of its own", () => {
    assert.deepEqual(Object.keys(CASES).sort(), METHODS.map(keyOf).sort());
    const streaming = ALL_METHODS.filter((method) => method.methodKind !== "unary").map(keyOf);
    assert.deepEqual(streaming.sort(), Object.keys(STREAMING).sort(), "a streaming RPC needs a test of its own");
  });

  describe("every RPC: success, and each error class a generic call can provoke", { concurrency: 6 }, () => {
    for (const method of METHODS) {
      // An RPC's cases side by side, but in order where a success causes the refusal that follows it.
      describe(keyOf(method), { concurrency: CASES[keyOf(method)]?.refusal ? 1 : true }, () => {
        for (const c of casesOf(method)) {
          test(`grpc-js: ${c.name}`, async () => {
            const { request, authorization } = await callOf(method, c, world);
            const outcome = await grpcJsUnary(clientOf(method.parent), method.name, request, {
              metadata: authorization ? { authorization } : {},
            });
            assertAnswer(note(grpcJsAnswer(outcome)), c, method, world);
          });
          if (!c.viaBufCurl) continue;
          test(`buf curl: ${c.name}`, async () => {
            const { request, authorization } = await callOf(method, c, world);
            const run = await runBuf(
              [
                ...bufCurlArgs(schemaFile),
                ...(authorization ? ["-H", `authorization: ${authorization}`] : []),
                "-d",
                "@-",
                `${world.baseUrl}/${keyOf(method)}`,
              ],
              JSON.stringify(request),
            );
            assertAnswer(note(bufAnswer(run)), c, method, world);
          });
        }
      });
    }
  });

  describe("deadlines, cancellation, the size limit, unknown methods, compression", () => {
    const operator = () => ({ authorization: `Bearer ${TEST_OPERATOR_TOKEN}` });
    const admin = () => ({ authorization: `Bearer ${world.a.token}` });
    const connect = () => {
      const session = http2.connect(world.baseUrl);
      session.on("error", () => undefined);
      return session;
    };
    const accessLines = (url: string) => accessLog(world.running).filter((line) => line.req?.url === url);

    test("a deadline shorter than the call: grpc-js reports DEADLINE_EXCEEDED, and the channel serves the next call", async () => {
      const client = clientOf(OperatorService);
      const late = await grpcJsUnary(client, "Seed", {}, { metadata: operator(), deadline: 1 });
      assert.equal(grpc.status[late.code], "DEADLINE_EXCEEDED", late.details);
      const next = grpcJsAnswer(await grpcJsUnary(client, "ListSigningKeys", {}, { metadata: operator() }));
      assert.equal(next.ok, true, next.raw);
    });

    test("the server ends a call at its grpc-timeout: DEADLINE_EXCEEDED with the ErrorResponse", async () => {
      const session = connect();
      try {
        // The request's message never completes: only the deadline can end the call.
        const stalled = await h2GrpcCall(
          session,
          "/travel.operator.v1.OperatorService/ListTmcs",
          { ...operator(), "grpc-timeout": "100m" },
          grpcFrame(Buffer.from([0x08]), 0, 10),
          { end: false, timeoutMs: 2_000 },
        );
        assert.equal(
          stalled.gaveUp,
          false,
          `no answer 2 s into a 100 ms grpc-timeout (${stalled.elapsedMs.toFixed(0)} ms)`,
        );
        assert.equal(stalled.grpcStatus, Code.DeadlineExceeded, JSON.stringify(stalled.trailers));
        assert.equal(stalled.errorResponse?.errorMessages[0]?.errorCode, "DEADLINE_EXCEEDED");
        // A handler slower than the timeout (Seed writes a whole tenant) is not answered OK.
        const slow = await h2GrpcCall(
          session,
          "/travel.operator.v1.OperatorService/Seed",
          { ...operator(), "grpc-timeout": "1m" },
          grpcFrame(Buffer.alloc(0)),
        );
        assert.equal(slow.grpcStatus, Code.DeadlineExceeded, JSON.stringify(slow.trailers));
      } finally {
        session.destroy();
      }
    });

    test("a call the client cancels: CANCELLED for grpc-js; the server logs it once and its connection serves the next call", async () => {
      const client = clientOf(OperatorService);
      const cancelled = await grpcJsUnary(
        client,
        "Seed",
        {},
        {
          metadata: operator(),
          onCall: (call) => setTimeout(() => call.cancel(), 5),
        },
      );
      assert.equal(grpc.status[cancelled.code], "CANCELLED", cancelled.details);
      const next = grpcJsAnswer(await grpcJsUnary(client, "ListSigningKeys", {}, { metadata: operator() }));
      assert.equal(next.ok, true, next.raw);

      // By hand, so the call is certainly in the server when it is cancelled: its message never completes.
      const url = "/travel.operator.v1.OperatorService/GetTmc";
      const before = accessLines(url).length;
      const session = connect();
      try {
        const gone = await h2GrpcCall(session, url, operator(), grpcFrame(Buffer.from([0x0a]), 0, 40), {
          end: false,
          timeoutMs: 100,
        });
        assert.equal(
          gone.gaveUp,
          true,
          `the server answered a call whose message never came: ${JSON.stringify(gone.trailers)}`,
        );
        const after = await h2GrpcCall(
          session,
          url,
          operator(),
          grpcFrame(toBinary(GetTmcRequestSchema, create(GetTmcRequestSchema, { tmcId: world.a.tmcId }))),
        );
        assert.equal(
          after.grpcStatus,
          0,
          `the same connection serves the next call: ${JSON.stringify(after.trailers)}`,
        );
        await waitFor(
          "the cancelled call's and the next call's access-log lines",
          () => accessLines(url).length - before >= 2,
        );
        assert.equal(
          accessLines(url).length - before,
          2,
          "one access-log line for the cancelled call, one for the next",
        );
      } finally {
        session.close();
      }
    });

    test("a message over BODY_LIMIT_BYTES: INVALID_ARGUMENT PAYLOAD_TOO_LARGE with the ErrorResponse; at the limit it is read; the channel serves the next call", async () => {
      const raw = rawGrpcClient(ApiUserService, new URL(world.baseUrl).host);
      try {
        const atLimit = grpcJsAnswer(
          await grpcJsUnary(raw, "RotateClientSecret", stringField1(BODY_LIMIT_BYTES), { metadata: admin() }),
        );
        assert.equal(Code[atLimit.code], "InvalidArgument", atLimit.raw);
        assert.equal(
          assertErrorResponse(note(atLimit), ApiUserService, atLimit.raw).errorMessages[0]?.errorCode,
          "API_VALIDATION_FAILED",
        );
        const over = grpcJsAnswer(
          await grpcJsUnary(raw, "RotateClientSecret", stringField1(BODY_LIMIT_BYTES + 1), { metadata: admin() }),
        );
        assert.equal(Code[over.code], "InvalidArgument", over.raw);
        assert.equal(
          assertErrorResponse(note(over), ApiUserService, over.raw).errorMessages[0]?.errorCode,
          "PAYLOAD_TOO_LARGE",
        );
        const next = grpcJsAnswer(await grpcJsUnary(raw, "GetApiUsers", Buffer.alloc(0), { metadata: admin() }));
        assert.equal(next.ok, true, next.raw);
      } finally {
        raw.close();
      }
      const run = await runBuf(
        [
          ...bufCurlArgs(schemaFile),
          "-H",
          `authorization: ${admin().authorization}`,
          "-d",
          "@-",
          `${world.baseUrl}/travel.apiuser.v2.ApiUserService/RotateClientSecret`,
        ],
        JSON.stringify({ clientId: "x".repeat(BODY_LIMIT_BYTES) }),
      );
      const answer = note(bufAnswer(run));
      assert.equal(Code[answer.code], "InvalidArgument", answer.raw);
      assert.equal(
        assertErrorResponse(answer, ApiUserService, answer.raw).errorMessages[0]?.errorCode,
        "PAYLOAD_TOO_LARGE",
      );
    });

    test("an unknown method or service: UNIMPLEMENTED (grpc-js, buf curl)", async () => {
      for (const unknown of ["/travel.apiuser.v2.ApiUserService/NoSuchMethod", "/travel.nothing.v1.NoService/Call"]) {
        const outcome = await rawPathCall(new URL(world.baseUrl).host, unknown);
        assert.equal(grpc.status[outcome.code], "UNIMPLEMENTED", `${unknown}: ${outcome.details}`);
      }
      // The schema buf curl is given has ApiUserService/NoSuchMethod, which the server does not.
      const run = await runBuf([
        ...bufCurlArgs(schemaFile),
        "-d",
        "{}",
        `${world.baseUrl}/travel.apiuser.v2.ApiUserService/NoSuchMethod`,
      ]);
      assert.equal(run.exit, 8 * Code.Unimplemented, `${run.exit} ${run.stderr.slice(-600)}`);
    });

    test("an unknown method's UNIMPLEMENTED carries the ErrorResponse", async () => {
      const outcome = await rawPathCall(new URL(world.baseUrl).host, "/travel.apiuser.v2.ApiUserService/NoSuchMethod");
      const answer = note(grpcJsAnswer(outcome));
      assert.equal(Code[answer.code], "Unimplemented", answer.raw);
      assertErrorResponse(answer, undefined, answer.raw);
    });

    test("a gzip-compressed request (grpc-encoding: gzip) is accepted, its errors too carry the ErrorResponse", async () => {
      const gzip = jsonGrpcClient(ApiUserService, new URL(world.baseUrl).host, {
        "grpc.default_compression_algorithm": 2,
      });
      try {
        const ok = note(grpcJsAnswer(await grpcJsUnary(gzip, "GetApiUsers", { limit: 100 }, { metadata: admin() })));
        assert.equal(ok.ok, true, ok.raw);
        assert.ok((ok.response!.apiUsers as JsonObject[]).some((u) => u.clientId === world.a.admin.clientId));
        const refused = note(grpcJsAnswer(await grpcJsUnary(gzip, "GetApiUsers", { limit: 100 })));
        assert.equal(Code[refused.code], "Unauthenticated", refused.raw);
        assertErrorResponse(refused, ApiUserService, refused.raw);
      } finally {
        gzip.close();
      }
      // By hand, to be sure the message went compressed: flag 1, gzip bytes.
      const session = connect();
      try {
        const request = zlib.gzipSync(
          Buffer.from(toBinary(GetApiUsersRequestSchema, create(GetApiUsersRequestSchema, { limit: 100 }))),
        );
        const answer = await h2GrpcCall(
          session,
          "/travel.apiuser.v2.ApiUserService/GetApiUsers",
          { ...admin(), "grpc-encoding": "gzip", "grpc-accept-encoding": "gzip" },
          grpcFrame(request, 1),
        );
        assert.equal(answer.grpcStatus, 0, JSON.stringify({ headers: answer.headers, trailers: answer.trailers }));
        const [message] = grpcMessages(answer.body, answer.headers["grpc-encoding"]);
        const page = fromBinary(GetApiUsersResponseSchema, message!);
        assert.ok(page.apiUsers.some((u) => u.clientId === world.a.admin.clientId));
        if (answer.headers["x-request-id"]) answered.add(answer.headers["x-request-id"]);
      } finally {
        session.close();
      }
    });
  });

  describe("reflection and health", () => {
    const registryServices = () => serviceNamesOn("public", false);

    test("buf curl --list-services over reflection: the registry's services, health and reflection", async () => {
      const run = await runBuf(["curl", "--http2-prior-knowledge", "--list-services", world.baseUrl]);
      assert.equal(run.exit, 0, run.stderr);
      assert.deepEqual(
        run.stdout.trim().split("\n").sort(),
        [
          ...registryServices(),
          "grpc.health.v1.Health",
          "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection",
        ].sort(),
      );
    });

    test("buf curl --list-methods over reflection: every RPC of the registry", async () => {
      const run = await runBuf(["curl", "--http2-prior-knowledge", "--list-methods", world.baseUrl]);
      assert.equal(run.exit, 0, run.stderr);
      const listed = new Set(run.stdout.trim().split("\n"));
      assert.deepEqual(
        METHODS.map(keyOf).filter((rpc) => !listed.has(rpc)),
        [],
        run.stdout,
      );
      assert.ok(listed.has("grpc.health.v1.Health/Check"), run.stdout);
    });

    test("gRPC health: SERVING overall and for every service of the registry (grpc-js, buf curl); an unknown name NOT_FOUND", async () => {
      const health = clientOf(Health);
      for (const service of ["", ...registryServices()]) {
        const outcome = await grpcJsUnary(health, "Check", { service });
        assert.deepEqual(
          [outcome.code, outcome.response],
          [grpc.status.OK, { status: "SERVING" }],
          `${service}: ${outcome.details}`,
        );
      }
      const unknown = note(
        grpcJsAnswer(await grpcJsUnary(health, "Check", { service: "travel.nothing.v1.NoService" })),
      );
      assert.equal(Code[unknown.code], "NotFound", unknown.raw);
      assertErrorResponse(unknown, undefined, unknown.raw);
      // buf curl with the schema from reflection.
      const run = await runBuf([
        "curl",
        "--http2-prior-knowledge",
        "--protocol",
        "grpc",
        "-d",
        "{}",
        `${world.baseUrl}/grpc.health.v1.Health/Check`,
      ]);
      assert.equal(run.exit, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), { status: "SERVING" });
    });
  });

  test("every answered call left exactly one access-log line", async () => {
    const ids = [...answered];
    assert.ok(ids.length > 200, `answers with a request id: ${ids.length}`);
    const counts = () => {
      const count = new Map<string, number>();
      for (const line of accessLog(world.running))
        if (line.reqId) count.set(line.reqId, (count.get(line.reqId) ?? 0) + 1);
      return count;
    };
    await waitFor("an access-log line for every answer", () => {
      const count = counts();
      return ids.every((id) => (count.get(id) ?? 0) >= 1);
    });
    const count = counts();
    assert.deepEqual(
      ids.filter((id) => count.get(id) !== 1).map((id) => `${id}: ${count.get(id)}`),
      [],
    );
  });
});

// ---- small pieces -----------------------------------------------------------------------------------

/** buf curl over gRPC with the contract's schema from a file (no reflection round trips per call), verbose for the headers. */
function bufCurlArgs(schemaFile: string): string[] {
  return ["curl", "--http2-prior-knowledge", "--protocol", "grpc", "--schema", schemaFile, "-v"];
}

/**
 * The schema buf curl calls with: the files reflection serves (the registry's, from the same
 * descriptors) with their imports, as a FileDescriptorSet, plus one method the server does not
 * have (ApiUserService/NoSuchMethod) for the unknown-method case.
 */
function writeSchema(dir: string): string {
  const files: Array<DescFile["proto"]> = [];
  const seen = new Set<string>();
  const add = (file: DescFile) => {
    if (seen.has(file.name)) return;
    seen.add(file.name);
    file.dependencies.forEach(add);
    let proto = file.proto;
    if (file === ApiUserService.file) {
      proto = clone(FileDescriptorProtoSchema, proto);
      proto.service
        .find((s) => s.name === ApiUserService.name)!
        .method.push(
          create(MethodDescriptorProtoSchema, {
            name: "NoSuchMethod",
            inputType: `.${GetApiUsersRequestSchema.typeName}`,
            outputType: `.${GetApiUsersResponseSchema.typeName}`,
          }),
        );
    }
    files.push(proto);
  };
  reflectionFilesOn("public", false).forEach(add);
  const file = path.join(dir, "contract.binpb");
  fs.writeFileSync(file, toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: files })));
  return file;
}

/** A message whose field 1 (a string in the requests used here) fills it to exactly `size` bytes. */
function stringField1(size: number): Buffer {
  for (let length = size - 2; length > 0; length--) {
    const prefix = Buffer.concat([Buffer.from([0x0a]), varint(length)]);
    if (prefix.length + length === size) return Buffer.concat([prefix, Buffer.alloc(length, "x")]);
  }
  throw new Error(`no message of ${size} bytes`);
}

function varint(n: number): Buffer {
  const out: number[] = [];
  for (; n > 0x7f; n = Math.floor(n / 128)) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return Buffer.from(out);
}

/** A grpc-js call of a path the contract may not have, with an empty message. */
function rawPathCall(address: string, rpcPath: string): Promise<GrpcJsOutcome<Buffer>> {
  const same = (bytes: Buffer) => bytes;
  const Client = grpc.makeGenericClientConstructor(
    {
      Call: {
        path: rpcPath,
        requestStream: false,
        responseStream: false,
        requestSerialize: same,
        requestDeserialize: same,
        responseSerialize: same,
        responseDeserialize: same,
      },
    },
    "Unknown",
  );
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as GenericGrpcClient;
  return grpcJsUnary<Buffer, Buffer>(client, "Call", Buffer.alloc(0)).finally(() => client.close());
}

interface AccessLine {
  reqId?: string;
  msg?: string;
  req?: { url?: string };
}

/** The service's access-log lines ("request completed", or "request errored" when the answer failed). */
function accessLog(running: RunningService): AccessLine[] {
  return running
    .logs()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as AccessLine)
    .filter((line) => line.msg === "request completed" || line.msg === "request errored");
}
