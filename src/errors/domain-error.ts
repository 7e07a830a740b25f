import { specOf, type ErrorCode, type ErrorKind } from "./codes.js";

export interface ErrorParameter {
  readonly name: string;
  readonly value: string;
}

export interface DomainErrorOptions {
  /** ErrorResponse.errorMessages[].errorParameters: which input, which limit. */
  readonly params?: readonly ErrorParameter[];
  /** ErrorResponse.errorMessages[].errorDetail. */
  readonly detail?: string;
  /** Kept for the log; never sent to the caller. */
  readonly cause?: unknown;
  /** The WWW-Authenticate challenge of an authentication refusal (RFC 6750 section 3), sent as a response header. */
  readonly challenge?: string;
  /** Seconds after which a retry may succeed, sent as the Retry-After header (RFC 9110 10.2.3) on 429, 503 and 409 ABORTED. */
  readonly retryAfterSeconds?: number;
  /** The nonce the next DPoP proof must carry (RFC 9449 8 and 9), sent as the DPoP-Nonce header. */
  readonly dpopNonce?: string;
  /**
   * For the operator's log line of the refusal only, never sent to the caller: which client, which
   * check failed, where the wire answer is deliberately uniform (INVALID_CLIENT). Never a secret.
   */
  readonly logged?: Readonly<Record<string, string>>;
}

/**
 * A failure the caller may see: a stable code from the catalogue and a message safe to show.
 * Anything thrown that is not a DomainError is an internal failure: the edge logs it with its
 * cause and answers a generic INTERNAL_ERROR.
 */
export class DomainError extends Error {
  readonly params: readonly ErrorParameter[];
  readonly detail: string;
  readonly challenge: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly dpopNonce: string | undefined;
  readonly logged: Readonly<Record<string, string>> | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: DomainErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DomainError";
    this.params = options.params ?? [];
    this.detail = options.detail ?? "";
    this.challenge = options.challenge;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.dpopNonce = options.dpopNonce;
    this.logged = options.logged;
  }

  get kind(): ErrorKind {
    return specOf(this.code).kind;
  }
}

export const notFound = (what: string, params: readonly ErrorParameter[] = []) =>
  new DomainError("NOT_FOUND", `${what} not found`, { params });

export const invalidArgument = (message: string, params: readonly ErrorParameter[] = []) =>
  new DomainError("API_VALIDATION_FAILED", message, { params });

export const unauthenticated = (message = "Authentication is required") =>
  new DomainError("USER_NOT_AUTHENTICATED", message);

export const permissionDenied = (message = "The caller may not perform this operation") =>
  new DomainError("PERMISSION_DENIED", message);
