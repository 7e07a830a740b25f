import { ScalarType, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { Interceptor } from "@connectrpc/connect";
import { invalidArgument } from "../../errors/domain-error.js";
import { FORBIDDEN_TEXT } from "../../domain/shared/text.js";
import { printable } from "../errors/printable.js";

/**
 * The text rule (domain/shared/text.ts) in every string of every request, whatever the protocol:
 * no identifier, form field or body value carries those characters into logs, Postgres or the
 * audit trail. Nor into the refusal: a map key named in the field path has them escaped
 * (`fields[\u0000]`), so the message is printable, well-formed Unicode on every protocol.
 */
const FORBIDDEN = FORBIDDEN_TEXT;

export function textInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (req.stream) return next(req);
    const offending = firstOffendingField(req.method.input, req.message as Message);
    if (offending !== undefined) {
      throw invalidArgument(`Field "${offending}" contains control characters or invalid Unicode`, [
        { name: offending, value: "invalid characters" },
      ]);
    }
    return next(req);
  };
}

/** The JSON path of the first string holding a forbidden character, or undefined. */
export function firstOffendingField(desc: DescMessage, message: Message): string | undefined {
  return walk(reflect(desc, message), "");
}

function walk(message: ReflectMessage, prefix: string): string | undefined {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const path = prefix + field.jsonName;
    const found = inField(field, message.get(field), path);
    if (found !== undefined) return found;
  }
  return undefined;
}

function inField(field: DescField, value: unknown, path: string): string | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return field.scalar === ScalarType.STRING && FORBIDDEN.test(value as string) ? path : undefined;
    case "message":
      return walk(value as ReflectMessage, `${path}.`);
    case "list": {
      let index = 0;
      for (const item of value as Iterable<unknown>) {
        const itemPath = `${path}[${index++}]`;
        if (field.listKind === "scalar" && field.scalar === ScalarType.STRING && FORBIDDEN.test(item as string))
          return itemPath;
        if (field.listKind === "message") {
          const found = walk(item as ReflectMessage, `${itemPath}.`);
          if (found !== undefined) return found;
        }
      }
      return undefined;
    }
    case "map":
      for (const [key, item] of value as Iterable<[unknown, unknown]>) {
        const itemPath = `${path}[${printable(String(key))}]`;
        if (typeof key === "string" && FORBIDDEN.test(key)) return itemPath;
        if (field.mapKind === "scalar" && field.scalar === ScalarType.STRING && FORBIDDEN.test(item as string))
          return itemPath;
        if (field.mapKind === "message") {
          const found = walk(item as ReflectMessage, `${itemPath}.`);
          if (found !== undefined) return found;
        }
      }
      return undefined;
    default:
      return undefined;
  }
}
