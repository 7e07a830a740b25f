import type { Interceptor } from "@connectrpc/connect";
import { OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import type { OperatorCredential } from "../../domain/operator/operator-credential.js";
import { unauthenticated } from "../../domain/errors.js";
import { bearerTokenOf } from "../bearer-token.js";

/** OperatorService answers only to the operator credential; API-user tokens never reach it. */
export function operatorAuthInterceptor(credential: OperatorCredential): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName === OperatorService.typeName) {
      const token = bearerTokenOf(req.header);
      if (token === undefined || !credential.matches(token)) {
        throw unauthenticated("A valid operator credential is required");
      }
    }
    return next(req);
  };
}
