import {
  getOption,
  isFieldSet,
  ScalarType,
  type DescEnum,
  type DescField,
  type DescMessage,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  DoubleRulesSchema,
  field as fieldRules,
  Fixed32RulesSchema,
  FloatRulesSchema,
  Ignore,
  Int32RulesSchema,
  RepeatedRulesSchema,
  SFixed32RulesSchema,
  SInt32RulesSchema,
  StringRulesSchema,
  UInt32RulesSchema,
  type FieldRules,
  type RepeatedRules,
  type StringRules,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { field_behavior, FieldBehavior } from "../../gen/google/api/field_behavior_pb.js";
import { docs as contractDocs } from "../../gen/travel/all_docs.js";
import { ErrorResponseSchema } from "../../gen/travel/common/v1/error_pb.js";
import { AuthenticationKind, ErrorDialect } from "../rpc/contract.js";
import type { RestRoute } from "./http-rules.js";

type Schema = Record<string, unknown>;

/**
 * An OpenAPI 3.1 document derived at start from the same descriptors the gateway routes by:
 * paths from google.api.http, operationIds and documented error statuses from
 * travel.common.v1.rest, schemas and constraints from the messages and their buf.validate rules
 * (the error body too: travel.common.v1.ErrorResponse), descriptions from the proto comments
 * (gen/travel/all_docs.ts, written by scripts/protoc-gen-docs.ts).
 */
export function buildOpenApiDocument(routes: readonly RestRoute[], options: { readonly serverUrl: string }): object {
  const components = new SchemaComponents(contractDocs);
  const paths: Record<string, Record<string, unknown>> = {};
  // A google.api.http additional binding serves the same RPC on a second path (SCIM's /v2/scim
  // beside /v2/scim/v2). Listed as a second operation it would be a duplicate in every generated
  // client (scimGetUser_1...): the operation is documented once, naming its other paths.
  for (const route of routes.filter((r) => !r.additionalBinding))
    (paths[openApiPath(route)] ??= {})[route.verb.toLowerCase()] = operationOf(route, routes, components);
  return {
    openapi: "3.1.0",
    info: { title: "Authentication and API-user service", version: "v2" },
    // The public base URL (TOKEN_ISSUER, the same base the discovery documents name), so a
    // generated client has one.
    servers: [{ url: options.serverUrl }],
    paths,
    components: { schemas: components.schemas, securitySchemes: SECURITY_SCHEMES },
    security: [{ Bearer: [] }],
  };
}

/** The security scheme of the token endpoints' client authentication. */
const CLIENT_SECRET_BASIC = "ClientSecretBasic";

const SECURITY_SCHEMES = {
  Bearer: {
    type: "http",
    scheme: "bearer",
    description: "An access token of the token endpoint (or a scimToken on SCIM paths)",
  },
  [CLIENT_SECRET_BASIC]: {
    type: "http",
    scheme: "basic",
    description:
      "RFC 6749 2.3.1 client_secret_basic: the client_id and client_secret, each form-urlencoded, as HTTP Basic credentials",
  },
};

/** A route's path in OpenAPI's syntax: the template's variables named by the fields' JSON names. */
function openApiPath(route: RestRoute): string {
  return route.pathFields.reduce(
    (p, { variable, field }) => p.replace(`{${variable}}`, `{${field.jsonName}}`),
    route.template,
  );
}

function operationOf(route: RestRoute, routes: readonly RestRoute[], components: SchemaComponents): Schema {
  const aliases = routes
    .filter((r) => r.additionalBinding && r.method === route.method && r.verb === route.verb)
    .map(openApiPath);
  const parameters = parametersOf(route, components);
  // Bearer (the document's default) for access tokens. The token endpoints authenticate the
  // client instead: HTTP Basic (client_secret_basic), or client_id and client_secret in the
  // body (client_secret_post), which is the empty requirement beside it.
  const authenticatesClient = route.authentication === AuthenticationKind.CLIENT_SECRET;
  const responses = responsesOf(route, components);
  const requestBody = requestBodyOf(route, routes, components);
  return {
    operationId: route.operationId,
    summary: firstSentence(route.method),
    ...(aliases.length ? { description: `Also served at ${aliases.join(", ")}.` } : {}),
    tags: [route.method.parent.name],
    ...(route.method.deprecated ? { deprecated: true } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(authenticatesClient ? { security: [{ [CLIENT_SECRET_BASIC]: [] }, {}] } : {}),
    responses,
    ...(requestBody ? { requestBody } : {}),
  };
}

/** The path variables, then (unless the whole body is the request) the request's other fields as query parameters. */
function parametersOf(route: RestRoute, components: SchemaComponents): Schema[] {
  const pathFields = route.pathFields.map((p) => p.field);
  return [
    ...pathFields.map((field) => ({
      name: field.jsonName,
      in: "path",
      ...components.describe(field),
      required: true,
      schema: components.fieldSchema(field),
    })),
    ...(route.body === "*"
      ? []
      : route.method.input.fields
          .filter((f) => !pathFields.includes(f) && f.name !== route.body)
          .map((f) => ({
            name: f.jsonName,
            in: "query",
            ...components.describe(f),
            required: false,
            schema: components.fieldSchema(f),
          }))),
  ];
}

/** The success answer and the documented error statuses, each an ErrorResponse in the route's dialect. */
function responsesOf(route: RestRoute, components: SchemaComponents): Schema {
  const errorMediaType = route.dialect === ErrorDialect.SCIM ? "application/scim+json" : "application/json";
  return {
    [String(route.successStatus)]: route.noContent
      ? { description: "No Content" }
      : { description: "OK", content: { [mediaTypeOf(route)]: { schema: responseSchemaOf(route, components) } } },
    ...Object.fromEntries(
      route.errorStatuses.map((status) => [
        String(status),
        {
          description: "ErrorResponse",
          content: { [errorMediaType]: { schema: components.refMessage(ErrorResponseSchema) } },
        },
      ]),
    ),
  };
}

/** travel.common.v1.rest content_type (SCIM) shapes the body and the answer. */
function mediaTypeOf(route: RestRoute): string {
  return route.contentType || "application/json";
}

/**
 * The answer: the response message, or its google.api.http response_body field. Built only when
 * answered: a response message nobody sees is no component (redocly's no-unused-components).
 */
function responseSchemaOf(route: RestRoute, components: SchemaComponents): Schema {
  const responseField = route.responseBody
    ? route.method.output.fields.find((f) => f.name === route.responseBody)
    : undefined;
  return responseField ? components.fieldSchema(responseField) : components.refMessage(route.method.output);
}

/** The body: the whole request less its path fields (a form for the OAuth endpoints), or the one body field. */
function requestBodyOf(
  route: RestRoute,
  routes: readonly RestRoute[],
  components: SchemaComponents,
): Schema | undefined {
  if (route.body === "*") {
    const pathFields = route.pathFields.map((p) => p.field);
    const schema = pathFields.length
      ? components.messageSchema(route.method.input, pathFields)
      : components.refMessage(route.method.input);
    if (route.verb === "PUT" && schema.properties)
      Object.assign(schema.properties as object, readOnlyFieldsOf(route, routes, components));
    return {
      required: true,
      content: { [route.formBody ? "application/x-www-form-urlencoded" : "application/json"]: { schema } },
    };
  }
  const bodyField = route.body !== "" ? route.method.input.fields.find((f) => f.name === route.body) : undefined;
  if (!bodyField) return undefined;
  return { required: true, content: { [mediaTypeOf(route)]: { schema: components.fieldSchema(bodyField) } } };
}

/**
 * A PUT replaces what GET answers at the same path. The server's fields are readOnly (OpenAPI:
 * sent in responses only; a client may send back what it read, and generated clients leave them
 * out of request types): those GET answers that the PUT does not take, and those the PUT takes
 * only to compare, marked (google.api.field_behavior) = IMMUTABLE or OUTPUT_ONLY (AIP-203).
 */
function readOnlyFieldsOf(
  put: RestRoute,
  routes: readonly RestRoute[],
  components: SchemaComponents,
): Record<string, Schema> {
  const get = routes.find((r) => r.verb === "GET" && r.template === put.template && !r.additionalBinding);
  if (!get) return {};
  const representation = get.responseBody
    ? get.method.output.fields.find((f) => f.name === get.responseBody)?.message
    : get.method.output;
  const writable = new Set(put.method.input.fields.filter((f) => !isServerKept(f)).map((f) => f.jsonName));
  return Object.fromEntries(
    (representation?.fields ?? [])
      .filter((f) => !writable.has(f.jsonName))
      .map((f) => [f.jsonName, { ...components.propertySchema(f), readOnly: true }]),
  );
}

/** A request field the server keeps: taken back only to be compared (AIP-203 field behaviour). */
function isServerKept(field: DescField): boolean {
  const behaviours = getOption(field, field_behavior);
  return behaviours.includes(FieldBehavior.IMMUTABLE) || behaviours.includes(FieldBehavior.OUTPUT_ONLY);
}

/**
 * The document's components.schemas, one per message and enum, named by its full proto name and
 * written when an operation first references it: a component nobody references is never written.
 * Messages, enums and fields carry their proto comment as their description (`docs`: leading
 * comments by full name, a field's as Message.field_name); an element without one has none.
 */
class SchemaComponents {
  readonly schemas: Record<string, Schema> = {};

  constructor(private readonly docs: Readonly<Record<string, string>>) {}

  /** `{ description }` from the element's proto comment, or nothing when it has none. */
  describe(desc: DescMessage | DescEnum | DescField): { description?: string } {
    const name = desc.kind === "field" ? `${desc.parent.typeName}.${desc.name}` : desc.typeName;
    const description = Object.hasOwn(this.docs, name) ? this.docs[name] : undefined;
    return description ? { description } : {};
  }

  refMessage(desc: DescMessage): Schema {
    return this.ref(desc.typeName, () => this.messageSchema(desc));
  }

  refEnum(desc: DescEnum): Schema {
    return this.ref(desc.typeName, () => ({
      type: "string",
      ...this.describe(desc),
      enum: desc.values.map((v) => v.name),
    }));
  }

  /**
   * A field as a property of its message's schema, with its comment. A $ref keeps the description
   * as a sibling keyword: OpenAPI 3.1's schemas are JSON Schema 2020-12, where $ref is one applicator
   * among others (3.0 ignored its siblings).
   */
  propertySchema(f: DescField): Schema {
    return { ...this.fieldSchema(f), ...this.describe(f) };
  }

  /** The message's fields (less `omit`) by JSON name; those buf.validate requires are required. */
  messageSchema(desc: DescMessage, omit: readonly DescField[] = []): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const f of desc.fields) {
      if (omit.includes(f)) continue;
      properties[f.jsonName] = this.propertySchema(f);
      if (getOption(f, fieldRules).required) required.push(f.jsonName);
    }
    return { type: "object", ...this.describe(desc), properties, ...(required.length ? { required } : {}) };
  }

  fieldSchema(f: DescField): Schema {
    const rules = getOption(f, fieldRules);
    if (f.fieldKind === "list") {
      const repeated = rules.type.case === "repeated" && rules.ignore !== Ignore.ALWAYS ? rules.type.value : undefined;
      return {
        type: "array",
        items: this.valueSchema(f, repeated?.items),
        ...(repeated ? repeatedConstraintsOf(repeated) : {}),
      };
    }
    if (f.fieldKind === "map") {
      const value =
        f.mapKind === "message"
          ? this.messageRefOrWellKnown(f.message)
          : f.mapKind === "enum"
            ? this.refEnum(f.enum)
            : scalarSchema(f.scalar);
      return { type: "object", additionalProperties: value };
    }
    return this.valueSchema(f, rules);
  }

  /** One value of a singular or repeated field, with the rules that apply to it. */
  private valueSchema(f: DescField, rules: FieldRules | undefined): Schema {
    if (f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind === "enum")) return this.refEnum(f.enum!);
    if (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message"))
      return this.messageRefOrWellKnown(f.message!);
    const scalar = f.fieldKind === "scalar" || f.fieldKind === "list" ? f.scalar : undefined;
    return { ...scalarSchema(scalar ?? ScalarType.STRING), ...(rules ? constraintsOf(rules) : {}) };
  }

  /** The well-known types as their protobuf JSON mapping writes them; other messages by reference. */
  private messageRefOrWellKnown(desc: DescMessage): Schema {
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
        return this.refMessage(desc);
    }
  }

  private ref(name: string, build: () => Schema): Schema {
    if (!(name in this.schemas)) {
      // A placeholder first, so a message that contains itself refers to itself.
      this.schemas[name] = {};
      this.schemas[name] = build();
    }
    return { $ref: `#/components/schemas/${name}` };
  }
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
      // The REST face writes them as JSON integers (src/gateway/json-shape.ts).
      return { type: "integer", format: "int64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    default:
      return { type: "string" };
  }
}

/**
 * The buf.validate rules a REST client can act on, as JSON Schema keywords. Only rules that are
 * set are written: the rule messages are proto2, and protobuf-es reads an unset rule as its zero
 * value (max_len 0, pattern ""), which would forbid every value.
 */
function constraintsOf(rules: FieldRules): Schema {
  if (rules.ignore === Ignore.ALWAYS) return {};
  const t = rules.type;
  switch (t.case) {
    case "string":
      return stringConstraintsOf(t.value);
    case "int32":
      return numericConstraintsOf(Int32RulesSchema, t.value);
    case "sint32":
      return numericConstraintsOf(SInt32RulesSchema, t.value);
    case "sfixed32":
      return numericConstraintsOf(SFixed32RulesSchema, t.value);
    case "uint32":
      return numericConstraintsOf(UInt32RulesSchema, t.value);
    case "fixed32":
      return numericConstraintsOf(Fixed32RulesSchema, t.value);
    case "double":
      return numericConstraintsOf(DoubleRulesSchema, t.value);
    case "float":
      return numericConstraintsOf(FloatRulesSchema, t.value);
    // 64-bit integers are JSON strings here, where minimum/maximum do not apply; bytes are base64
    // text whose length is not the rule's byte length; enum values are the referenced enum.
    default:
      return {};
  }
}

function stringConstraintsOf(s: StringRules): Schema {
  const field = StringRulesSchema.field;
  const out: Schema = {};
  if (isFieldSet(s, field.const)) out.const = s.const;
  if (isFieldSet(s, field.len)) out.minLength = out.maxLength = Number(s.len);
  if (isFieldSet(s, field.minLen)) out.minLength = Number(s.minLen);
  if (isFieldSet(s, field.maxLen)) out.maxLength = Number(s.maxLen);
  if (isFieldSet(s, field.pattern)) out.pattern = s.pattern;
  if (s.wellKnown.case === "uuid" && s.wellKnown.value) out.format = "uuid";
  if (s.wellKnown.case === "email" && s.wellKnown.value) out.format = "email";
  if (s.wellKnown.case === "uri" && s.wellKnown.value) out.format = "uri";
  if (isFieldSet(s, field.in)) out.enum = [...s.in];
  if (isFieldSet(s, field.notIn)) out.not = { enum: [...s.notIn] };
  return out;
}

type Bound<L extends string> = { case: L; value: number } | { case: undefined; value?: undefined };

/** The rule messages of the number types JSON writes as numbers share these fields. */
interface NumericRules {
  const: number;
  lessThan: Bound<"lt" | "lte">;
  greaterThan: Bound<"gt" | "gte">;
  in: number[];
  notIn: number[];
}

function numericConstraintsOf<Desc extends DescMessage>(desc: Desc, r: MessageShape<Desc> & NumericRules): Schema {
  const out: Schema = {};
  if (isFieldSet(r, desc.field.const!)) out.const = r.const;
  const lower: Schema = {};
  const upper: Schema = {};
  if (r.greaterThan.case === "gte") lower.minimum = r.greaterThan.value;
  if (r.greaterThan.case === "gt") lower.exclusiveMinimum = r.greaterThan.value;
  if (r.lessThan.case === "lte") upper.maximum = r.lessThan.value;
  if (r.lessThan.case === "lt") upper.exclusiveMaximum = r.lessThan.value;
  // buf.validate reads a lower bound above the upper bound as "outside the range".
  if (r.greaterThan.case !== undefined && r.lessThan.case !== undefined && r.greaterThan.value > r.lessThan.value)
    out.anyOf = [upper, lower];
  else Object.assign(out, lower, upper);
  if (isFieldSet(r, desc.field.in!)) out.enum = [...r.in];
  if (isFieldSet(r, desc.field.notIn!)) out.not = { enum: [...r.notIn] };
  return out;
}

function repeatedConstraintsOf(r: RepeatedRules): Schema {
  const field = RepeatedRulesSchema.field;
  const out: Schema = {};
  if (isFieldSet(r, field.minItems)) out.minItems = Number(r.minItems);
  if (isFieldSet(r, field.maxItems)) out.maxItems = Number(r.maxItems);
  if (isFieldSet(r, field.unique) && r.unique) out.uniqueItems = true;
  return out;
}

function firstSentence(method: { name: string }): string {
  return method.name.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
}
