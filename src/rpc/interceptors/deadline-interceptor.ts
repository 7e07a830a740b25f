import type { Interceptor } from "@connectrpc/connect";
import { DomainError } from "../../errors/domain-error.js";
import { authenticationOf, AuthenticationKind } from "../contract.js";

/**
 * Every RPC but the operator's (migrations and seeding may take long) answers within `deadlineMs`:
 * a dependency that stalls past its own timeouts still cannot hold a caller longer than this.
 * The work itself goes on until its own (bounded) timeouts end it.
 */
export function deadlineInterceptor(deadlineMs: number): Interceptor {
  return (next) => async (req) => {
    if (req.stream || authenticationOf(req.method) === AuthenticationKind.OPERATOR) return next(req);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new DomainError("DEADLINE_EXCEEDED", `The request did not complete within ${deadlineMs} ms`)),
        deadlineMs,
      );
    });
    try {
      return await Promise.race([next(req), deadline]);
    } finally {
      clearTimeout(timer);
    }
  };
}
