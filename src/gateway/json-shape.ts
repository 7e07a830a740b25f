import { ScalarType, type DescMessage } from "@bufbuild/protobuf";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";

/**
 * REST responses follow one rule on top of canonical protobuf JSON: numbers, booleans, lists
 * and maps always appear (a page with no users is `"apiUsers": [], "totalCount": 0`), while
 * empty strings, enum zero values and unset messages stay out (so a client-credentials
 * response never carries a `refresh_token`).
 */
export function withRestDefaults(desc: DescMessage, json: JsonObject): JsonObject {
  for (const field of desc.fields) {
    const present = Object.prototype.hasOwnProperty.call(json, field.jsonName);
    const value = json[field.jsonName];
    switch (field.fieldKind) {
      case "list":
        if (!present) json[field.jsonName] = [];
        else if (field.listKind === "message" && Array.isArray(value))
          for (const item of value) if (isObject(item)) withRestDefaults(field.message, item);
        break;
      case "map":
        if (!present) json[field.jsonName] = {};
        break;
      case "message":
        if (present && isObject(value) && !isWellKnown(field.message)) withRestDefaults(field.message, value);
        break;
      case "scalar":
        if (!present && field.presence !== FeatureSet_FieldPresence.EXPLICIT && field.oneof === undefined) {
          const zero = zeroOf(field.scalar);
          if (zero !== undefined) json[field.jsonName] = zero;
        }
        break;
      default:
        break;
    }
  }
  return json;
}

function zeroOf(type: ScalarType): JsonValue | undefined {
  switch (type) {
    case ScalarType.BOOL:
      return false;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return undefined;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return "0";
    default:
      return 0;
  }
}

function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith("google.protobuf.");
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
