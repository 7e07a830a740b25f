import assert from "node:assert/strict";
import type { ErrorCode } from "../../src/errors/codes.js";
import { DomainError, type ErrorParameter } from "../../src/errors/domain-error.js";

export interface ExpectedDomainError {
  readonly code: ErrorCode;
  readonly message: string;
  /** Exactly these errorParameters; none when omitted. */
  readonly params?: readonly ErrorParameter[];
  readonly detail?: string;
}

/** jose's style: the exact code, message and parameters of the DomainError a call rejects with. */
export async function rejectsWith(
  action: Promise<unknown> | (() => Promise<unknown>),
  expected: ExpectedDomainError,
): Promise<DomainError> {
  let caught: unknown;
  try {
    await (typeof action === "function" ? action() : action);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught !== undefined, `expected a DomainError ${expected.code}, but the call succeeded`);
  assert.ok(caught instanceof DomainError, `expected a DomainError ${expected.code}, got ${String(caught)}`);
  assert.deepEqual(
    { code: caught.code, message: caught.message, params: caught.params, detail: caught.detail },
    { code: expected.code, message: expected.message, params: expected.params ?? [], detail: expected.detail ?? "" },
  );
  return caught;
}
