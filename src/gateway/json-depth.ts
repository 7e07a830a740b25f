/**
 * The deepest nesting of arrays and objects a REST JSON body may have (the body itself is level 1).
 *
 * No request of the contract needs more than a few levels, but a google.protobuf.Struct or Value
 * (UpdateUser's travelPreferences) nests as deep as its JSON. The gateway hands every request to
 * the RPC core through the in-process transport, which encodes it as protobuf binary and decodes
 * it again, and protobuf's binary decoder stops at 100 nested messages; each JSON level inside a
 * Struct is two (Value, then Struct or ListValue), so bodies between ~49 and ~97 levels decoded as
 * JSON and then failed as binary (a 500). 32 levels is room for any real document and far from
 * either limit; deeper bodies are refused with 400 API_VALIDATION_FAILED before they are decoded.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * Whether a parsed JSON value nests arrays and objects more than `limit` levels deep (a scalar is
 * level 0, `{}` and `[]` level 1). Iterative, and it stops at the first level past the limit, so
 * neither a deep nor a wide body costs more than one walk over what it holds.
 */
export function jsonDepthExceeds(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  const pending: Array<[unknown, number]> = [[value, 1]];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const [node, depth] = item;
    if (node === null || typeof node !== "object") continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === "object") pending.push([child, depth + 1]);
    }
  }
  return false;
}
