import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  FieldPathSchema,
  ViolationSchema,
  ViolationsSchema,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { GetApiUsersRequestSchema } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { ErrorDialect, ErrorResponseSchema } from "../../../gen/travel/common/v1/error_pb.js";
import { ERROR_CODES, type ErrorCode } from "../../../src/errors/codes.js";
import { DomainError } from "../../../src/errors/domain-error.js";
import { renderError } from "../../../src/gateway/error-reply.js";
import { httpStatusOf, STATUS_BY_CODE } from "../../../src/gateway/http-status.js";
import { CODE_BY_KIND } from "../../../src/rpc/errors/connect-codes.js";
import { OAUTH_ERROR_BY_CODE, SCIM_TYPE_BY_CODE } from "../../../src/rpc/errors/dialects.js";
import { toConnectError, translateError } from "../../../src/rpc/errors/error-response.js";

/** Every Connect code (the numeric members of the enum). */
const ALL_CODES = Object.values(Code).filter((v): v is Code => typeof v === "number");

/** The REST status of every catalogue code, as docs/errors.md and the spec document them. */
const EXPECTED: Readonly<Record<ErrorCode, { code: Code; status: number; oauth?: string }>> = {
  API_VALIDATION_FAILED: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  PAYLOAD_TOO_LARGE: { code: Code.InvalidArgument, status: 413, oauth: "invalid_request" },
  UNSUPPORTED_MEDIA_TYPE: { code: Code.InvalidArgument, status: 415, oauth: "invalid_request" },
  URI_TOO_LONG: { code: Code.InvalidArgument, status: 414, oauth: "invalid_request" },
  REQUEST_HEADERS_TOO_LARGE: { code: Code.InvalidArgument, status: 431, oauth: "invalid_request" },
  REQUEST_TIMEOUT: { code: Code.DeadlineExceeded, status: 408 },
  USER_NOT_AUTHENTICATED: { code: Code.Unauthenticated, status: 401 },
  PERMISSION_DENIED: { code: Code.PermissionDenied, status: 403 },
  NOT_FOUND: { code: Code.NotFound, status: 404 },
  ROUTE_NOT_FOUND: { code: Code.NotFound, status: 404 },
  METHOD_NOT_ALLOWED: { code: Code.InvalidArgument, status: 405, oauth: "invalid_request" },
  ALREADY_EXISTS: { code: Code.AlreadyExists, status: 409 },
  API_USER_LIMIT_EXCEEDED: { code: Code.FailedPrecondition, status: 409 },
  SIGNING_KEY_ROTATION_PENDING: { code: Code.FailedPrecondition, status: 409 },
  INVALID_FILTER: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  INVALID_PATH: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  INVALID_VALUE: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  NO_TARGET: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  MUTABILITY: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  INVALID_REQUEST: { code: Code.InvalidArgument, status: 400, oauth: "invalid_request" },
  INVALID_CLIENT: { code: Code.PermissionDenied, status: 403, oauth: "invalid_client" },
  CLIENT_AUTHENTICATION_REQUIRED: { code: Code.Unauthenticated, status: 401, oauth: "invalid_client" },
  RESOURCE_SERVER_AUTHENTICATION_FAILED: { code: Code.Unauthenticated, status: 401, oauth: "invalid_client" },
  UNAUTHORIZED_CLIENT: { code: Code.PermissionDenied, status: 403, oauth: "unauthorized_client" },
  INVALID_GRANT: { code: Code.InvalidArgument, status: 400, oauth: "invalid_grant" },
  INVALID_SCOPE: { code: Code.InvalidArgument, status: 400, oauth: "invalid_scope" },
  INVALID_TARGET: { code: Code.InvalidArgument, status: 400, oauth: "invalid_target" },
  UNSUPPORTED_GRANT_TYPE: { code: Code.InvalidArgument, status: 400, oauth: "unsupported_grant_type" },
  INVALID_DPOP_PROOF: { code: Code.InvalidArgument, status: 400, oauth: "invalid_dpop_proof" },
  USE_DPOP_NONCE: { code: Code.InvalidArgument, status: 400, oauth: "use_dpop_nonce" },
  TOO_MANY_REQUESTS: { code: Code.ResourceExhausted, status: 429, oauth: "slow_down" },
  TOO_MANY_CONCURRENT_REQUESTS: { code: Code.ResourceExhausted, status: 429 },
  TOO_MANY_OPEN_STREAMS: { code: Code.ResourceExhausted, status: 429 },
  TOO_MANY_OPEN_POLLS: { code: Code.ResourceExhausted, status: 429 },
  RESOURCE_BUSY: { code: Code.Aborted, status: 409 },
  NOT_IMPLEMENTED: { code: Code.Unimplemented, status: 501 },
  SERVICE_NOT_READY: { code: Code.Unavailable, status: 503 },
  DEPENDENCY_UNAVAILABLE: { code: Code.Unavailable, status: 503 },
  SERVICE_OVERLOADED: { code: Code.Unavailable, status: 503 },
  CANCELED: { code: Code.Canceled, status: 499 },
  DEADLINE_EXCEEDED: { code: Code.DeadlineExceeded, status: 504 },
  INTERNAL_ERROR: { code: Code.Internal, status: 500 },
};

describe("Connect code → HTTP status", () => {
  test("every Connect code has a status, and it is an HTTP error status", () => {
    assert.equal(ALL_CODES.length, 16);
    for (const code of ALL_CODES) {
      const status = STATUS_BY_CODE[code];
      assert.ok(Number.isInteger(status) && status >= 400 && status <= 599, `${Code[code]} → ${status}`);
      assert.equal(httpStatusOf(code, undefined), status);
      assert.equal(httpStatusOf(code, "NOT_A_CATALOGUE_CODE"), status, "unknown errorCodes do not change the status");
    }
  });

  test("the documented statuses", () => {
    const documented: Array<[Code, number]> = [
      [Code.InvalidArgument, 400],
      [Code.Unauthenticated, 401],
      [Code.PermissionDenied, 403],
      [Code.NotFound, 404],
      [Code.AlreadyExists, 409],
      [Code.ResourceExhausted, 429],
      [Code.Unimplemented, 501],
      [Code.Unavailable, 503],
      [Code.Internal, 500],
    ];
    for (const [code, status] of documented) assert.equal(STATUS_BY_CODE[code], status, Code[code]);
  });

  test("the rest follow the Connect protocol's table", () => {
    assert.deepEqual(Object.fromEntries(ALL_CODES.map((code) => [Code[code], STATUS_BY_CODE[code]])), {
      Canceled: 499,
      Unknown: 500,
      InvalidArgument: 400,
      DeadlineExceeded: 504,
      NotFound: 404,
      AlreadyExists: 409,
      PermissionDenied: 403,
      ResourceExhausted: 429,
      FailedPrecondition: 400,
      Aborted: 409,
      OutOfRange: 400,
      Unimplemented: 501,
      Internal: 500,
      Unavailable: 503,
      DataLoss: 500,
      Unauthenticated: 401,
    });
  });
});

describe("catalogue code → translateError → Connect code → HTTP status", () => {
  test("the expectations cover the whole catalogue, and nothing else", () => {
    assert.deepEqual(Object.keys(EXPECTED).sort(), Object.keys(ERROR_CODES).sort());
  });

  for (const errorCode of Object.keys(ERROR_CODES) as ErrorCode[]) {
    test(errorCode, () => {
      const expected = EXPECTED[errorCode];
      const error = new DomainError(errorCode, `message of ${errorCode}`, {
        params: [{ name: "p", value: "v" }],
        detail: "d",
      });
      const translated = translateError(error, "req-7");
      assert.equal(translated.code, expected.code, `Connect code of ${errorCode}`);
      assert.equal(CODE_BY_KIND[error.kind], expected.code);
      assert.equal(httpStatusOf(translated.code, translated.errorCode), expected.status, `HTTP status of ${errorCode}`);
      assert.deepEqual(
        {
          debugIdentifier: translated.body.debugIdentifier,
          messages: translated.body.errorMessages.map((m) => [
            m.errorCode,
            m.message,
            m.errorParameters.map((p) => [p.name, p.value]),
            m.errorDetail,
          ]),
          error: translated.body.error,
          errorDescription: translated.body.errorDescription,
        },
        {
          debugIdentifier: "req-7",
          messages: [[errorCode, `message of ${errorCode}`, [["p", "v"]], "d"]],
          error: "",
          errorDescription: "",
        },
      );

      // The OAuth dialect: RFC 6749's `error` for the token endpoints' codes, invalid_request for any other 400, nothing else.
      const oauth = translateError(error, "req-7", undefined, ErrorDialect.OAUTH);
      assert.equal(oauth.code, expected.code);
      assert.deepEqual(
        [oauth.body.error, oauth.body.errorDescription],
        expected.oauth ? [expected.oauth, `message of ${errorCode}`] : ["", ""],
      );

      // The ConnectError carries the body as its detail, for every protocol.
      const connectError = toConnectError(translated);
      assert.equal(connectError.code, expected.code);
      assert.equal(connectError.rawMessage, `message of ${errorCode}`);
      assert.deepEqual(connectError.findDetails(ErrorResponseSchema), [translated.body]);
    });
  }

  test("the dialect table only names catalogue codes", () => {
    for (const code of Object.keys(OAUTH_ERROR_BY_CODE)) assert.ok(code in ERROR_CODES, code);
    for (const code of Object.keys(SCIM_TYPE_BY_CODE)) assert.ok(code in ERROR_CODES, code);
  });

  test("the SCIM dialect (RFC 7644 3.12): schemas, scimType and detail beside the ErrorResponse; the REST face adds status", () => {
    const scimTypes: Partial<Record<ErrorCode, string>> = {
      INVALID_FILTER: "invalidFilter",
      INVALID_PATH: "invalidPath",
      INVALID_VALUE: "invalidValue",
      NO_TARGET: "noTarget",
      MUTABILITY: "mutability",
      ALREADY_EXISTS: "uniqueness",
      API_VALIDATION_FAILED: "invalidSyntax",
    };
    for (const errorCode of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const translated = translateError(
        new DomainError(errorCode, `message of ${errorCode}`),
        "req-s",
        undefined,
        ErrorDialect.SCIM,
      );
      assert.deepEqual(
        [
          translated.code,
          translated.body.schemas,
          translated.body.scimType,
          translated.body.detail,
          translated.body.status,
          translated.body.error,
        ],
        [
          EXPECTED[errorCode].code,
          ["urn:ietf:params:scim:api:messages:2.0:Error"],
          scimTypes[errorCode] ?? "",
          `message of ${errorCode}`,
          "",
          "",
        ],
        errorCode,
      );
      const { status, json } = renderError(
        new DomainError(errorCode, `message of ${errorCode}`),
        "req-s",
        ErrorDialect.SCIM,
      );
      assert.equal(status, EXPECTED[errorCode].status);
      assert.equal((json as Record<string, unknown>).status, String(status), errorCode);
    }
    const plain = translateError(new DomainError("INVALID_FILTER", "x"), "req-p");
    assert.deepEqual(
      [plain.body.schemas, plain.body.scimType, plain.body.detail],
      [[], "", ""],
      "other dialects carry no SCIM fields",
    );
  });
});

describe("failures that are not DomainErrors", () => {
  test("anything else is INTERNAL_ERROR (500) with a message that reveals nothing", () => {
    const secrets = new Error('password authentication failed for user "postgres" at 10.0.0.5:5432 (secret=hunter2)');
    for (const thrown of [
      secrets,
      new TypeError("Cannot read properties of undefined (reading 'tmcId')"),
      "a string",
      undefined,
      { code: "23505" },
    ]) {
      const translated = translateError(thrown, "req-9", undefined, ErrorDialect.OAUTH);
      assert.equal(translated.code, Code.Internal);
      assert.equal(translated.errorCode, "INTERNAL_ERROR");
      assert.equal(httpStatusOf(translated.code, translated.errorCode), 500);
      assert.deepEqual(
        translated.body.errorMessages.map((m) => [m.errorCode, m.message, m.errorParameters.length, m.errorDetail]),
        [["INTERNAL_ERROR", "An internal error occurred", 0, ""]],
      );
      assert.deepEqual(
        [translated.body.error, translated.body.errorDescription, translated.body.debugIdentifier],
        ["", "", "req-9"],
      );
      const wire = JSON.stringify(toConnectError(translated).findDetails(ErrorResponseSchema));
      for (const leak of ["hunter2", "postgres", "10.0.0.5", "tmcId", "23505"])
        assert.equal(wire.includes(leak), false, leak);
    }
  });

  test("a ConnectError that already carries an ErrorResponse keeps it; other Connect codes map to their catalogue code", () => {
    const body = translateError(new DomainError("NOT_FOUND", "TMC not found"), "req-a").body;
    const passed = translateError(
      new ConnectError("x", Code.NotFound, undefined, [{ desc: ErrorResponseSchema, value: body }]),
      "req-b",
    );
    assert.deepEqual(
      [passed.code, passed.errorCode, passed.body.debugIdentifier, passed.body.errorMessages[0]?.message],
      [Code.NotFound, "NOT_FOUND", "req-a", "TMC not found"],
    );

    const mapped: Array<[Code, ErrorCode]> = [
      [Code.NotFound, "NOT_FOUND"],
      [Code.Unimplemented, "NOT_IMPLEMENTED"],
      [Code.Canceled, "CANCELED"],
      [Code.DeadlineExceeded, "DEADLINE_EXCEEDED"],
      [Code.Unavailable, "INTERNAL_ERROR"],
      [Code.Unknown, "INTERNAL_ERROR"],
    ];
    for (const [code, errorCode] of mapped) {
      const translated = translateError(new ConnectError("raw words", code), "req-c");
      assert.deepEqual(
        [translated.errorCode, translated.body.errorMessages[0]?.message],
        [errorCode, errorCode === "INTERNAL_ERROR" ? "An internal error occurred" : "raw words"],
        Code[code],
      );
    }
  });

  test("protovalidate violations become one errorParameter per field, by JSON name", () => {
    const violation = (fieldNumber: number, fieldName: string, message: string) =>
      create(ViolationSchema, { field: create(FieldPathSchema, { elements: [{ fieldNumber, fieldName }] }), message });
    const error = new ConnectError("invalid", Code.InvalidArgument, undefined, [
      {
        desc: ViolationsSchema,
        value: create(ViolationsSchema, {
          violations: [violation(1, "limit", "too big"), violation(2, "offset", "too small")],
        }),
      },
    ]);
    const translated = translateError(error, "req-v", GetApiUsersRequestSchema, ErrorDialect.OAUTH);
    assert.deepEqual(
      [
        translated.code,
        translated.errorCode,
        translated.body.errorMessages[0]?.errorParameters.map((p) => [p.name, p.value]),
        translated.body.error,
      ],
      [
        Code.InvalidArgument,
        "API_VALIDATION_FAILED",
        [
          ["limit", "too big"],
          ["offset", "too small"],
        ],
        "invalid_request",
      ],
    );
  });
});
