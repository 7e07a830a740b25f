import { Code, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "../../domain/shared/observability.js";
import { DomainError } from "../../errors/domain-error.js";
import { errorDialectOf } from "../contract.js";
import { toConnectError, translateError } from "../errors/error-response.js";
import { requestInfoOf } from "../request-context.js";

/**
 * Outermost interceptor: every failure leaves as a ConnectError carrying the platform
 * ErrorResponse (with the request id as debugIdentifier), in the service's error dialect.
 * Internal failures are logged with their cause and answered with a message that reveals nothing.
 */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (error) {
      const { requestId } = requestInfoOf(req.contextValues);
      const translated = translateError(error, requestId, req.method.input, errorDialectOf(req.service));
      if (translated.code === Code.Internal) {
        logger.error({ reqId: requestId, rpc: `${req.service.typeName}/${req.method.name}`, err: error }, "rpc failed");
      } else if (!(error instanceof DomainError)) {
        logger.debug({ reqId: requestId, code: Code[translated.code] }, "rpc rejected");
      }
      throw toConnectError(translated);
    }
  };
}
