import { ScalarType, type DescMessage } from "@bufbuild/protobuf";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";

/**
 * REST responses follow one rule on top of canonical protobuf JSON: numbers, booleans, lists
 * and maps always appear (a page with no users is `"apiUsers": [], "totalCount": 0`), while
 * empty strings, enum zero values and unset messages stay out (so a client-credentials
 * response never carries a `refresh_token`). Well-known types (a Struct's JSON object, a
 * Timestamp's string) are left as canonical JSON writes them: their internals (a Struct's
 * `fields` map) are not the client's JSON. 64-bit integers are JSON integers, as the
 * references type them (`"nationalNumber": 8150`), when they are exact in a double; a larger
 * one stays the canonical string rather than lose digits.
 */
export function withRestDefaults(desc: DescMessage, json: JsonObject): JsonObject {
  for (const field of desc.fields) {
    const present = Object.prototype.hasOwnProperty.call(json, field.jsonName);
    const value = json[field.jsonName];
    switch (field.fieldKind) {
      case "list":
        if (!present) {
          json[field.jsonName] = [];
        } else if (field.listKind === "message" && Array.isArray(value) && !isWellKnown(field.message)) {
          for (const item of value) if (isObject(item)) withRestDefaults(field.message, item);
        } else if (field.listKind === "scalar" && Array.isArray(value) && is64Bit(field.scalar)) {
          json[field.jsonName] = value.map(integerOf);
        }
        break;
      case "map":
        if (!present) json[field.jsonName] = {};
        break;
      case "message":
        if (present && isObject(value) && !isWellKnown(field.message)) withRestDefaults(field.message, value);
        break;
      case "scalar":
        if (present && is64Bit(field.scalar)) json[field.jsonName] = integerOf(value as JsonValue);
        else if (!present && field.presence !== FeatureSet_FieldPresence.EXPLICIT && field.oneof === undefined) {
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
    default:
      return 0;
  }
}

function is64Bit(type: ScalarType): boolean {
  return [ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64].includes(
    type,
  );
}

/** Canonical JSON's int64 string as a JSON integer when a double holds it exactly. */
function integerOf(value: JsonValue): JsonValue {
  if (typeof value !== "string") return value;
  // Canonical JSON writes an int64 as a decimal string; anything else is left as it is.
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : value;
}

function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith("google.protobuf.");
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
