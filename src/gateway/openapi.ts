import { getOption, ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { field as fieldRules } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { AuthenticationKind } from "../rpc/contract.js";
import type { RestRoute } from "./http-rules.js";

type Schema = Record<string, unknown>;

/**
 * An OpenAPI 3.1 document derived at start from the same descriptors the gateway routes by:
 * paths from google.api.http, operationIds and documented error statuses from
 * travel.common.v1.rest, schemas and constraints from the messages and their buf.validate rules.
 */
export function buildOpenApiDocument(routes: readonly RestRoute[]): object {
  const schemas: Record<string, Schema> = {};
  const refMessage = (desc: DescMessage) => ref(desc.typeName, () => messageSchema(desc));
  const refEnum = (desc: DescEnum) => ref(desc.typeName, () => ({ type: "string", enum: desc.values.map((v) => v.name) }));

  function ref(name: string, build: () => Schema): Schema {
    if (!(name in schemas)) {
      schemas[name] = {};
      schemas[name] = build();
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  function messageSchema(desc: DescMessage, omit: readonly DescField[] = []): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const f of desc.fields) {
      if (omit.includes(f)) continue;
      properties[f.jsonName] = fieldSchema(f);
      if (getOption(f, fieldRules).required) required.push(f.jsonName);
    }
    return { type: "object", properties, ...(required.length ? { required } : {}) };
  }

  function fieldSchema(f: DescField): Schema {
    const single = (): Schema => {
      if (f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind === "enum")) return refEnum(f.enum!);
      if (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")) return messageRefOrWellKnown(f.message!);
      const scalar = f.fieldKind === "scalar" || f.fieldKind === "list" ? f.scalar : undefined;
      return { ...scalarSchema(scalar ?? ScalarType.STRING), ...constraintsOf(f) };
    };
    if (f.fieldKind === "list") return { type: "array", items: single() };
    if (f.fieldKind === "map") {
      const value =
        f.mapKind === "message" ? messageRefOrWellKnown(f.message) : f.mapKind === "enum" ? refEnum(f.enum) : scalarSchema(f.scalar);
      return { type: "object", additionalProperties: value };
    }
    return single();
  }

  function messageRefOrWellKnown(desc: DescMessage): Schema {
    switch (desc.typeName) {
      case "google.protobuf.Struct":
        return { type: "object", additionalProperties: true };
      case "google.protobuf.Value":
        return {};
      case "google.protobuf.ListValue":
        return { type: "array" };
      case "google.protobuf.Timestamp":
        return { type: "string", format: "date-time" };
      case "google.protobuf.Duration":
        return { type: "string", pattern: "^-?\\d+(\\.\\d+)?s$" };
      default:
        return refMessage(desc);
    }
  }

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.pathFields.reduce((p, { variable, field }) => p.replace(`{${variable}}`, `{${field.jsonName}}`), route.template);
    const pathFieldDescs = route.pathFields.map((p) => p.field);
    const parameters = [
      ...route.pathFields.map(({ field }) => ({ name: field.jsonName, in: "path", required: true, schema: fieldSchema(field) })),
      ...(route.body === "*"
        ? []
        : route.method.input.fields
            .filter((f) => !pathFieldDescs.includes(f) && f.name !== route.body)
            .map((f) => ({ name: f.jsonName, in: "query", required: false, schema: fieldSchema(f) }))),
    ];
    // Bearer (the document's default) for access tokens; the token endpoints authenticate the client in the request.
    const isPublic = route.authentication === AuthenticationKind.CLIENT_SECRET;
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: firstSentence(route.method),
      tags: [route.method.parent.name],
      ...(route.method.deprecated ? { deprecated: true } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(isPublic ? { security: [] } : {}),
      responses: {
        ...(route.noContent
          ? { [String(route.successStatus)]: { description: "No Content" } }
          : { "200": { description: "OK", content: { "application/json": { schema: refMessage(route.method.output) } } } }),
        ...Object.fromEntries(
          route.errorStatuses.map((status) => [
            String(status),
            { description: "ErrorResponse", content: { "application/json": { schema: { $ref: "#/components/schemas/travel.common.v1.ErrorResponse" } } } },
          ]),
        ),
      },
    };
    if (route.body === "*") {
      const schema = pathFieldDescs.length ? messageSchema(route.method.input, pathFieldDescs) : refMessage(route.method.input);
      operation.requestBody = {
        required: true,
        content: { [route.formBody ? "application/x-www-form-urlencoded" : "application/json"]: { schema } },
      };
    }
    (paths[path] ??= {})[route.verb.toLowerCase()] = operation;
  }

  schemas["travel.common.v1.ErrorResponse"] = {
    type: "object",
    properties: {
      debugIdentifier: { type: "string", description: "The request id the service's logs carry" },
      errorMessages: {
        type: "array",
        items: {
          type: "object",
          properties: {
            errorCode: { type: "string" },
            message: { type: "string" },
            errorParameters: { type: "array", items: { type: "object", properties: { name: { type: "string" }, value: { type: "string" } } } },
            errorDetail: { type: "string" },
          },
        },
      },
      error: { type: "string", description: "RFC 6749 error code (token endpoint only)" },
      error_description: { type: "string", description: "RFC 6749 error description (token endpoint only)" },
    },
  };

  return {
    openapi: "3.1.0",
    info: { title: "Authentication and API-user service", version: "v2" },
    paths,
    components: {
      schemas,
      securitySchemes: { Bearer: { type: "http", scheme: "bearer" } },
    },
    security: [{ Bearer: [] }],
  };
}

function scalarSchema(type: ScalarType): Schema {
  switch (type) {
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int32", minimum: 0 };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "string", format: "int64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    default:
      return { type: "string" };
  }
}

/** The buf.validate rules a REST client can act on, as JSON Schema keywords. */
function constraintsOf(f: DescField): Schema {
  const rules = getOption(f, fieldRules).type;
  const out: Schema = {};
  if (rules.case === "string") {
    const s = rules.value;
    if (s.minLen !== undefined) out.minLength = Number(s.minLen);
    if (s.maxLen !== undefined) out.maxLength = Number(s.maxLen);
    if (s.pattern !== undefined) out.pattern = s.pattern;
    if (s.wellKnown.case === "uuid") out.format = "uuid";
    if (s.wellKnown.case === "email") out.format = "email";
    if (s.in.length) out.enum = [...s.in];
  } else if (rules.case === "int32") {
    const r = rules.value;
    if (r.greaterThan.case === "gte") out.minimum = r.greaterThan.value;
    if (r.greaterThan.case === "gt") out.exclusiveMinimum = r.greaterThan.value;
    if (r.lessThan.case === "lte") out.maximum = r.lessThan.value;
    if (r.lessThan.case === "lt") out.exclusiveMaximum = r.lessThan.value;
  }
  return out;
}

function firstSentence(method: { name: string }): string {
  return method.name.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
}
