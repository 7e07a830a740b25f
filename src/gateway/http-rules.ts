import {
  getOption,
  type DescField,
  type DescMessage,
  type DescMethodUnary,
  type DescService,
} from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import { rest } from "../../gen/travel/common/v1/rest_pb.js";
import { authenticationOf, AuthenticationKind, ErrorDialect, errorDialectOf } from "../rpc/contract.js";

export type HttpVerb = "GET" | "POST" | "PUT" | "DELETE" | "PATCH";

/** One REST route, read from a method's google.api.http and travel.common.v1.rest options. */
export interface RestRoute {
  readonly method: DescMethodUnary<DescMessage, DescMessage>;
  readonly verb: HttpVerb;
  /** The template as written in the contract, e.g. /v2/users/{user_id}. */
  readonly template: string;
  /** The same path in Fastify's syntax, e.g. /v2/users/:user_id. */
  readonly fastifyPath: string;
  /** Path variables and the request fields they fill. */
  readonly pathFields: ReadonlyArray<{ readonly variable: string; readonly field: DescField }>;
  /** "*" (the whole body is the request), a field name, or "" (no body). */
  readonly body: string;
  readonly operationId: string;
  /** The body is application/x-www-form-urlencoded (the OAuth endpoints); JSON otherwise. The other is refused with 415. */
  readonly formBody: boolean;
  /** How the caller authenticates (the OpenAPI security of the operation). */
  readonly authentication: AuthenticationKind;
  /** How errors are worded on this route. */
  readonly dialect: ErrorDialect;
  readonly errorStatuses: readonly number[];
  /** The response has no fields (and the route does not speak OAuth): REST answers with no content. */
  readonly noContent: boolean;
  /** The documented success status: 200, or 204 for operations that answer with no content. */
  readonly successStatus: number;
  /** Canonical protobuf JSON instead of the REST defaults (travel.common.v1.rest canonical_json). */
  readonly canonicalJson: boolean;
  /** google.api.http response_body: the response field whose JSON is the whole REST answer ("" for the message). */
  readonly responseBody: string;
  /** travel.common.v1.rest content_type: the body and answer media type when not application/json (application/json is accepted too). */
  readonly contentType: string;
  /** The rule is one of google.api.http additional_bindings (a second path for the same RPC). */
  readonly additionalBinding: boolean;
}

export function restRoutesOf(services: readonly DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      // REST maps unary calls only; streaming RPCs stay on gRPC/Connect.
      if (method.methodKind !== "unary") continue;
      const primary = getOption(method, http);
      // A rule's additional_bindings serve the same RPC on further paths (one level deep, as google.api.http allows).
      for (const [index, rule] of [primary, ...primary.additionalBindings].entries()) {
        if (rule.pattern.case === undefined || rule.pattern.case === "custom") continue;
        const template = rule.pattern.value;
        const pathFields = [...template.matchAll(/\{([a-z_][a-z0-9_]*)\}/g)].map(([, variable]) => {
          const field = method.input.fields.find((f) => f.name === variable);
          if (!field) throw new Error(`${method.name}: path variable {${variable}} names no request field`);
          return { variable: variable!, field };
        });
        const options = getOption(method, rest);
        routes.push({
          method: method as DescMethodUnary<DescMessage, DescMessage>,
          verb: rule.pattern.case.toUpperCase() as HttpVerb,
          template,
          fastifyPath: template.replace(/\{([a-z_][a-z0-9_]*)\}/g, ":$1"),
          pathFields,
          body: rule.body,
          operationId: (options.operationId || method.localName) + (index === 0 ? "" : `_${index}`),
          formBody: options.formBody,
          authentication: authenticationOf(method),
          dialect: errorDialectOf(service),
          errorStatuses: options.errorStatuses,
          // The OAuth endpoints always answer JSON, an empty answer too (RFC 7009 2.2's 200 as `{}`):
          // clients such as simple-oauth2 (wreck's strict JSON mode) refuse a 200 without a JSON
          // content type, and conforming ones ignore the body.
          noContent: method.output.fields.length === 0 && errorDialectOf(service) !== ErrorDialect.OAUTH,
          successStatus: options.successStatus || (method.output.fields.length === 0 ? 204 : 200),
          canonicalJson: options.canonicalJson,
          responseBody: rule.responseBody,
          contentType: options.contentType,
          additionalBinding: index > 0,
        });
      }
    }
  }
  return routes;
}

/** Every HTTP method, in the order an Allow header lists them. */
export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/** The methods a resource with these routes' verbs answers, in Allow order: Fastify answers HEAD on every GET route. */
export function allowedMethods(verbs: Iterable<string>): Array<(typeof HTTP_METHODS)[number]> {
  const present = new Set(verbs);
  if (present.has("GET")) present.add("HEAD");
  return HTTP_METHODS.filter((m) => present.has(m));
}
