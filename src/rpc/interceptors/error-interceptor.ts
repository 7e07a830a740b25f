import { Code, type ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "../../domain/shared/observability.js";
import { RepeatedWarnings } from "../../domain/shared/repeated-warnings.js";
import { DomainError } from "../../errors/domain-error.js";
import { errorAtEdge } from "../errors/error-response.js";
import { printable } from "../errors/printable.js";
import { chainProtocolRefusal } from "../errors/protocol-errors.js";
import { requestInfoOf } from "../request-context.js";

/**
 * Outermost interceptor: every failure leaves as a ConnectError carrying the platform
 * ErrorResponse (with the request id as debugIdentifier), in the service's error dialect.
 * Internal failures are logged with their cause and answered with a message that reveals nothing;
 * `classify` names failures of dependencies the RPC layer cannot know (a database that is down).
 * Those are answered 503/409 and each request's access-log line says which (`databaseFailure`);
 * their warning with the driver's error is logged once per RPC and code per interval, with the
 * count held back: a Postgres outage logged one error line with a stack per request.
 */
export function errorInterceptor(
  logger: Logger,
  classify: (error: unknown) => DomainError | undefined = () => undefined,
): Interceptor {
  const dependencyWarnings = new RepeatedWarnings();
  return (next) => async (req) => {
    const fail = (thrown: unknown) => {
      const { requestId, refused } = requestInfoOf(req.contextValues);
      const rpc = `${req.service.typeName}/${req.method.name}`;
      // A stream's message that does not decode: the caller's bytes, logged as the protocol layer's refusals are.
      const protocol = chainProtocolRefusal(thrown, /^application\/grpc/i.test(req.header.get("content-type") ?? ""));
      // A driver's failure the composition root knows how to name (the database is unavailable: 503).
      const error = thrown instanceof DomainError ? thrown : (protocol ?? classify(thrown) ?? thrown);
      const answer = errorAtEdge(error, requestId, req.method);
      if (protocol) {
        const cause = printable((thrown as ConnectError).rawMessage, 300);
        logger.info({ reqId: requestId, rpc, errorCode: protocol.code, cause }, "rpc refused by the protocol layer");
      } else if (answer.code === Code.Internal) {
        logger.error({ reqId: requestId, rpc, err: thrown }, "rpc failed");
      } else if (error !== thrown) {
        const { code } = error as DomainError;
        dependencyWarnings.warn(
          logger,
          `${rpc} ${code}`,
          { reqId: requestId, rpc, errorCode: code, err: thrown },
          "rpc failed: a dependency",
        );
      } else if (!(error instanceof DomainError)) {
        logger.debug({ reqId: requestId, code: Code[answer.code] }, "rpc rejected");
      }
      if (answer.refusal) refused?.({ ...answer.refusal, rpc });
      return answer.connectError();
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (thrown) {
      throw fail(thrown);
    }
    // A streaming response fails while it is read: its messages are translated the same way.
    return res.stream ? { ...res, message: failingAs(res.message, fail) } : res;
  };
}

async function* failingAs<T>(messages: AsyncIterable<T>, fail: (thrown: unknown) => Error): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (thrown) {
    throw fail(thrown);
  }
}
