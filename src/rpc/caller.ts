import type { HandlerContext } from "@connectrpc/connect";
import { unauthenticated } from "../errors/domain-error.js";
import type { Principal } from "../domain/tokens/model.js";
import { principalKey } from "./interceptors/authentication-interceptor.js";

/** The verified access-token principal the authentication interceptor put in the context. */
export function callerOf(ctx: HandlerContext): Principal {
  const principal = ctx.values.get(principalKey);
  if (!principal) throw unauthenticated();
  return principal;
}
