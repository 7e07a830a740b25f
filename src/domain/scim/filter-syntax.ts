import { parse, type Filter } from "scim2-parse-filter";
import { holdsForbiddenText } from "../shared/text.js";

/**
 * A string of the filter that breaks the text rule once its JSON escapes are decoded (`"\u0000"`,
 * a lone `"\ud800"`): the edge sees only the escape, so the rule is applied here to the value.
 */
export class ForbiddenFilterText extends Error {
  constructor() {
    super("A string in the filter contains control characters or invalid Unicode");
  }
}

/** The JSON escapes of RFC 8259 §7 other than \uXXXX, and what each stands for. */
const JSON_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

/**
 * The syntax tree of a SCIM filter (RFC 7644 §3.4.2.2), whose string values are JSON strings.
 * scim2-parse-filter (0.2.10, the latest) reads strings its own way: it doubles every backslash
 * not followed by a quote, so `"\\"` (one backslash) and any value ending in an escaped backslash
 * fail to parse, and `"a\\b"` comes out with two backslashes. Each string is therefore read here
 * and stood in for by its index ("0", "1", …), the library parses the rest, and the values are put
 * back. A backslash that starts no JSON escape stays a backslash, as the library kept it
 * (`"DOMAIN\user"`). Throws on a filter the grammar refuses, and ForbiddenFilterText on a decoded
 * string the text rule refuses.
 */
export function parseFilterSyntax(text: string): Filter {
  const values: string[] = [];
  let placeheld = "";
  for (let i = 0; i < text.length;) {
    if (text[i] !== '"') {
      placeheld += text[i++];
      continue;
    }
    const literal = readString(text, i + 1);
    if (!literal) throw new Error("unterminated string");
    if (holdsForbiddenText(literal.value)) throw new ForbiddenFilterText();
    placeheld += `"${values.length}"`;
    values.push(literal.value);
    i = literal.end;
  }
  return withValues(parse(placeheld), values);
}

/** The JSON string starting after the quote at `start - 1`: its value and the index after its closing quote. */
function readString(text: string, start: number): { value: string; end: number } | undefined {
  let value = "";
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') return { value, end: i + 1 };
    if (c !== "\\") {
      value += c;
      continue;
    }
    const next = text[i + 1] ?? "";
    const hex = /^[0-9a-fA-F]{4}$/.exec(text.slice(i + 2, i + 6));
    if (next === "u" && hex) {
      value += String.fromCharCode(parseInt(hex[0], 16));
      i += 5;
    } else if (next in JSON_ESCAPES) {
      value += JSON_ESCAPES[next];
      i += 1;
    } else {
      value += "\\";
    }
  }
  return undefined;
}

/** `tree` with each string value (an index into `values`, see parseFilterSyntax) replaced by its value. */
function withValues(tree: Filter, values: readonly string[]): Filter {
  switch (tree.op) {
    case "and":
    case "or":
      return { ...tree, filters: tree.filters.map((f) => withValues(f, values)) };
    case "not":
      return { ...tree, filter: withValues(tree.filter, values) };
    case "[]":
      return { ...tree, valFilter: withValues(tree.valFilter, values) };
    case "pr":
      return tree;
    default: {
      const compare = tree as Filter & { compValue: unknown };
      return typeof compare.compValue === "string"
        ? ({ ...compare, compValue: values[Number(compare.compValue)] } as Filter)
        : tree;
    }
  }
}
