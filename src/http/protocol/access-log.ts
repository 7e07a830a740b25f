import type { FastifyBaseLogger } from "fastify";
import type { Refusal } from "../../gateway/error-reply.js";
import type { Metrics } from "../../observability/metrics.js";

/**
 * What every face records of a finished request, whichever server answered it (Fastify's routes,
 * or the lean gRPC path of grpc-unary.ts): the HTTP metrics, and its one "request completed" line.
 */
export function recordRequest(
  metrics: Metrics,
  request: { readonly method: string; readonly route: string; readonly status: number },
  responseTimeMs: number,
): void {
  metrics.httpRequests.inc({ method: request.method, route: request.route, status: String(request.status) });
  metrics.httpDuration.observe({ method: request.method, route: request.route }, responseTimeMs / 1000);
}

/** The request as its line shows it; the logger's `req` serializer (logger.ts) picks these fields (a FastifyRequest has them). */
export interface LoggedRequest {
  readonly method: string;
  readonly url: string;
  readonly ip?: string | undefined;
}

/** How the request ended, for its line: refused (why), cancelled by the caller before its answer, or answered. */
export type Outcome = Refusal | typeof CANCELLED | undefined;
export const CANCELLED = "cancelled";

/**
 * The one access-log writer: one line per request at info, written when it ends, with the
 * request, the status and the time (Fastify writes two: a line per request was a tenth of the CPU
 * under load); its `reqId` is the debugIdentifier of any error the request got. Fastify's
 * requests (fastify-app.ts) and the lean gRPC path's calls (grpc-unary.ts) write through the same
 * instance, so both lines carry the same fields.
 *
 * The completed line holds fixed fields only — the `req` and `res` serializers (logger.ts) pick the
 * method, the URL without its query values, the address and the status; the refusal fields below
 * are messages written for callers and parameters whose credential values are replaced — so it
 * is written by a child of the app's logger without the redaction pass, which looked for
 * secret-named keys in every field of every line (about 5 times the cost of the line itself) and
 * could never find one here. Every other line, an errored request's with its error included,
 * keeps the redaction. test/server/logging.test.ts sends secrets every way a caller can and
 * looks for them in the log.
 */
export class AccessLog {
  private readonly lines: FastifyBaseLogger;

  constructor(logger: FastifyBaseLogger) {
    this.lines = logger.child({}, { redact: [] });
  }

  /** The request's line. No allocation beyond the line itself: the lean gRPC path writes one per call. */
  completed(
    reqId: string,
    req: LoggedRequest,
    res: { readonly statusCode: number },
    responseTime: number,
    traceId: string | undefined,
    outcome: Outcome,
  ): void {
    this.lines.info(
      { reqId, req, res, responseTime, ...traceField(traceId), ...outcomeFields(outcome) },
      "request completed",
    );
  }

  /** The line of a request that failed after its answer began, at error with the error, on the request's own (redacting) logger. */
  static errored(
    log: FastifyBaseLogger,
    error: Error,
    req: LoggedRequest,
    res: { readonly statusCode: number },
    responseTime: number,
    traceId: string | undefined,
    outcome: Outcome,
  ): void {
    log.error(
      { req, res, responseTime, ...traceField(traceId), ...outcomeFields(outcome), err: error },
      "request errored",
    );
  }
}

const NOTHING: object = Object.freeze({});
const CANCELLED_FIELDS: object = Object.freeze({ cancelled: true });

/** `{trace_id}` (the OpenTelemetry name, as the logger's other lines) for a traced request, else nothing. */
function traceField(traceId: string | undefined): object {
  return traceId === undefined ? NOTHING : { trace_id: traceId };
}

/**
 * A refusal says why: the catalogue errorCode, its message, the RPC, its errorParameters (a
 * validation refusal's fields) and its log-only fields (INVALID_CLIENT's client id and failed
 * check). Never a secret: messages are written for callers, and a parameter naming a credential
 * has its value redacted. Nothing for a request that was answered.
 */
function outcomeFields(outcome: Outcome): object {
  if (outcome === undefined) return NOTHING;
  if (outcome === CANCELLED) return CANCELLED_FIELDS;
  const parameters = outcome.errorParameters?.map(({ name, value }) => ({
    name,
    value: CREDENTIAL_PARAMETER.test(name) ? "[redacted]" : value,
  }));
  return {
    errorCode: outcome.errorCode,
    errorMessage: outcome.message,
    rpc: outcome.rpc,
    ...(parameters?.length ? { errorParameters: parameters } : {}),
    ...outcome.logged,
  };
}

/** Parameter names whose value would be a credential (client_secret, subject_token, scimToken); token_type_hint is not. */
const CREDENTIAL_PARAMETER = /secret|password|authorization|(^|[._])token$|Token$/i;
