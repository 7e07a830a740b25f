import { create, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { ViolationsSchema, type Violation } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDialect, ErrorResponseSchema, type ErrorResponse } from "../../../gen/travel/common/v1/error_pb.js";
import { isErrorCode, specOf, type ErrorCode } from "../../errors/codes.js";
import { DomainError, type ErrorParameter } from "../../errors/domain-error.js";
import { errorDialectOf } from "../contract.js";
import { CODE_BY_KIND } from "./connect-codes.js";
import { OAUTH_ERROR_BY_CODE, SCIM_ERROR_SCHEMA, SCIM_TYPE_BY_CODE } from "./dialects.js";
import { wellFormed } from "./printable.js";

export interface TranslatedError {
  readonly code: Code;
  readonly errorCode: ErrorCode;
  readonly body: ErrorResponse;
}

/** Why a request was refused, as its access-log line says it (never a secret: the access log redacts a parameter that names a credential). */
export interface EdgeRefusal {
  readonly errorCode: string;
  readonly message: string;
  /** The answer's errorParameters (which fields a validation refusal names). */
  readonly errorParameters: ReadonlyArray<{ readonly name: string; readonly value: string }>;
  /** The refusal's log-only fields (DomainError.logged: which client, which check failed); never sent. */
  readonly logged?: Readonly<Record<string, string>>;
}

/** A failure as it leaves the service, on any face. */
export interface ErrorAtEdge extends TranslatedError {
  /** What the request's access-log line says of it (nothing for a relayed ErrorResponse without a message). */
  readonly refusal: EdgeRefusal | undefined;
  /** The same answer as a Connect error (every RPC protocol writes it; the REST gateway reads it back). */
  connectError(): ConnectError;
}

/**
 * The one error edge: every face turns a failure into its answer here — the RPC interceptor
 * chain (errorInterceptor), the protocol layer's own refusals (src/http/protocol/), and the REST
 * gateway's and Fastify's (gateway/error-reply.ts). `at` is the RPC (its input names a validation
 * refusal's fields, its service the error dialect) or, outside any RPC, the path's dialect.
 */
export function errorAtEdge(error: unknown, requestId: string, at?: DescMethod | ErrorDialect): ErrorAtEdge {
  const method = typeof at === "object" ? at : undefined;
  const dialect = typeof at === "object" ? errorDialectOf(at.parent) : at;
  const translated = translateError(error, requestId, method?.input, dialect);
  const first = translated.body.errorMessages[0];
  const logged = error instanceof DomainError ? error.logged : undefined;
  return {
    ...translated,
    refusal: first && {
      errorCode: first.errorCode,
      message: first.message,
      errorParameters: first.errorParameters.map(({ name, value }) => ({ name, value })),
      ...(logged ? { logged } : {}),
    },
    connectError: () => toConnectError(translated, error instanceof DomainError ? error : {}),
  };
}

/**
 * The one translation of any failure into the platform's ErrorResponse and a Connect code.
 * Anything that is neither a DomainError nor a Connect error we understand becomes
 * INTERNAL_ERROR with a message that reveals nothing (the cause goes to the log).
 */
export function translateError(
  error: unknown,
  requestId: string,
  input?: DescMessage,
  dialect = ErrorDialect.ERROR_DIALECT_UNSPECIFIED,
): TranslatedError {
  const translated = baseTranslation(error, requestId, input);
  if (dialect === ErrorDialect.OAUTH) applyOAuthDialect(translated);
  if (dialect === ErrorDialect.SCIM) applyScimDialect(translated);
  return translated;
}

function baseTranslation(error: unknown, requestId: string, input?: DescMessage): TranslatedError {
  if (error instanceof DomainError) {
    return fromParts(error.code, error.message, error.params, requestId, error.detail);
  }
  if (error instanceof ConnectError) {
    const existing = error.findDetails(ErrorResponseSchema)[0];
    const existingCode = existing?.errorMessages[0]?.errorCode ?? "";
    if (existing)
      return {
        code: error.code,
        errorCode: isErrorCode(existingCode) ? existingCode : "INTERNAL_ERROR",
        body: existing,
      };
    switch (error.code) {
      case Code.InvalidArgument: {
        // protovalidate's interceptor: one errorParameter per violated field path.
        const violations: Violation[] = error.findDetails(ViolationsSchema).flatMap((v) => v.violations);
        const parameters = violations.map((v) => ({ name: fieldPathOf(v, input), value: v.message }));
        return fromParts("API_VALIDATION_FAILED", "The request is invalid", parameters, requestId);
      }
      case Code.NotFound:
        return fromParts("NOT_FOUND", error.rawMessage, [], requestId);
      case Code.Unimplemented:
        return fromParts("NOT_IMPLEMENTED", error.rawMessage, [], requestId);
      case Code.Canceled:
        return fromParts("CANCELED", error.rawMessage, [], requestId);
      case Code.DeadlineExceeded:
        return fromParts("DEADLINE_EXCEEDED", error.rawMessage, [], requestId);
      default:
        break;
    }
  }
  return fromParts("INTERNAL_ERROR", "An internal error occurred", [], requestId);
}

function fromParts(
  errorCode: ErrorCode,
  message: string,
  parameters: readonly ErrorParameter[],
  requestId: string,
  detail = "",
): TranslatedError {
  return {
    code: CODE_BY_KIND[specOf(errorCode).kind],
    errorCode,
    body: create(ErrorResponseSchema, {
      debugIdentifier: requestId,
      errorMessages: [
        {
          errorCode,
          message,
          errorParameters: parameters.map((p) => ({ name: p.name, value: p.value })),
          errorDetail: detail,
        },
      ],
    }),
  };
}

/** RFC 6749 5.2: `error` and `error_description` beside the ErrorResponse fields. */
function applyOAuthDialect(translated: TranslatedError): void {
  if (translated.body.error) return;
  const oauthError =
    OAUTH_ERROR_BY_CODE[translated.errorCode] ??
    (translated.code === Code.InvalidArgument ? "invalid_request" : undefined);
  if (!oauthError) return;
  translated.body.error = oauthError;
  translated.body.errorDescription = translated.body.errorMessages[0]?.message ?? "The request is invalid";
}

/**
 * RFC 7644 3.12: `schemas`, `scimType` and `detail` beside the ErrorResponse fields. `status` is
 * the HTTP status, which only the REST face knows: it sets it (gateway/error-reply.ts).
 */
function applyScimDialect(translated: TranslatedError): void {
  if (translated.body.schemas.length > 0) return;
  translated.body.schemas = [SCIM_ERROR_SCHEMA];
  translated.body.scimType = SCIM_TYPE_BY_CODE[translated.errorCode] ?? "";
  translated.body.detail = translated.body.errorMessages[0]?.message ?? "The request failed";
}

/** The violated field as a REST client names it: JSON names joined by dots ("companyId.id"). */
function fieldPathOf(violation: Violation, input: DescMessage | undefined): string {
  let message = input;
  const parts: string[] = [];
  for (const element of violation.field?.elements ?? []) {
    const field = message?.fields.find((f) => f.number === element.fieldNumber);
    let part = field?.jsonName ?? element.fieldName;
    if (element.subscript.case) part += `[${String(element.subscript.value)}]`;
    parts.push(part);
    message = field?.message;
  }
  return parts.join(".");
}

/**
 * The ConnectError that carries an ErrorResponse as its detail, for every protocol. Its message is
 * well-formed Unicode: gRPC's grpc-message (percent-encoded) cannot be written otherwise.
 */
export function toConnectError(
  translated: TranslatedError,
  headers: { challenge?: string; retryAfterSeconds?: number; dpopNonce?: string } = {},
): ConnectError {
  const message = wellFormed(translated.body.errorMessages[0]?.message ?? "error");
  // The challenge and Retry-After travel as error metadata: response headers on every protocol and for REST.
  const metadata = new Headers();
  if (headers.challenge !== undefined) metadata.set("www-authenticate", headers.challenge);
  if (headers.dpopNonce !== undefined) metadata.set("dpop-nonce", headers.dpopNonce);
  if (headers.retryAfterSeconds !== undefined)
    metadata.set("retry-after", String(Math.max(1, Math.ceil(headers.retryAfterSeconds))));
  return new ConnectError(message, translated.code, metadata, [{ desc: ErrorResponseSchema, value: translated.body }]);
}
