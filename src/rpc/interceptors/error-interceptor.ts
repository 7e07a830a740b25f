import { Code, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import { errorResponseFor, toConnectError } from "../error-details.js";
import { ServiceError } from "../../domain/errors.js";
import { requestInfoOf } from "../request-context.js";
import { AuthService } from "../../../gen/travel/auth/v2/auth_pb.js";

/**
 * Outermost interceptor: every failure leaves as a ConnectError carrying the platform
 * ErrorResponse (with the request id as debugIdentifier). Internal failures are logged with
 * their cause and answered with a message that reveals nothing.
 */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (error) {
      const { requestId } = requestInfoOf(req.contextValues);
      const { code, body } = errorResponseFor(error, requestId, req.method.input, {
        oauth: req.service.typeName === AuthService.typeName,
      });
      if (code === Code.Internal) {
        logger.error({ reqId: requestId, rpc: `${req.service.typeName}/${req.method.name}`, err: error }, "rpc failed");
      } else if (!(error instanceof ServiceError)) {
        logger.debug({ reqId: requestId, code: Code[code] }, "rpc rejected");
      }
      throw toConnectError(code, body);
    }
  };
}
