import type { Filter } from "scim2-parse-filter";
import { DomainError } from "../../errors/domain-error.js";
import { parseFilterSyntax } from "./filter-syntax.js";
import {
  MAX_FILTER_LENGTH,
  MAX_FILTER_TERMS,
  USER_SCHEMA,
  type CompareOperator,
  type FilterAttribute,
  type UserFilter,
} from "./model.js";

const invalidFilter = (message: string) =>
  new DomainError("INVALID_FILTER", message, { params: [{ name: "filter", value: "invalid" }] });

type Kind = "string" | "caseExact" | "boolean" | "date";

/** The filterable attributes (lower-cased SCIM path → stored attribute) and the operators each supports. */
const ATTRIBUTES: Readonly<Record<string, { attribute: FilterAttribute; kind: Kind; ops: readonly string[] }>> = {
  id: { attribute: "id", kind: "caseExact", ops: ["eq", "ne", "pr"] },
  username: { attribute: "userName", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  // Any of the user's emails, or its userName (which stands in when it has none).
  emails: { attribute: "emails", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  "emails.value": { attribute: "emails", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  externalid: { attribute: "externalId", kind: "caseExact", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  "name.givenname": { attribute: "givenName", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  "name.familyname": { attribute: "familyName", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  displayname: { attribute: "displayName", kind: "string", ops: ["eq", "ne", "co", "sw", "ew", "pr"] },
  active: { attribute: "active", kind: "boolean", ops: ["eq", "ne", "pr"] },
  "meta.created": { attribute: "created", kind: "date", ops: ["eq", "gt", "ge", "lt", "le", "pr"] },
  "meta.lastmodified": { attribute: "lastModified", kind: "date", ops: ["eq", "gt", "ge", "lt", "le", "pr"] },
};

/** The date-times a filter may compare with (UTC): what Postgres and RFC 3339's four-digit years share. */
const MIN_FILTER_YEAR = 1;
const MAX_FILTER_YEAR = 9999;

/** Inside emails[...]: value compares every email; type and primary are those of the userName's work email. */
const EMAIL_SUBATTRIBUTES = new Set(["type", "primary", "value"]);

/**
 * Parses a SCIM filter (RFC 7644 3.4.2.2) with scim2-parse-filter and translates its syntax tree
 * into a UserFilter over the supported attributes. Anything malformed or unsupported is a 400
 * invalidFilter, never a query: values stay values (the repository binds them as parameters).
 */
export function parseUserFilter(text: string): UserFilter | undefined {
  if (text.trim() === "") return undefined;
  if (text.length > MAX_FILTER_LENGTH) throw invalidFilter(`The filter is longer than ${MAX_FILTER_LENGTH} characters`);
  let tree: Filter;
  try {
    tree = parseFilterSyntax(text);
  } catch {
    throw invalidFilter("The filter is not a valid SCIM filter expression");
  }
  const counter = { terms: 0 };
  return translate(tree, counter);
}

function translate(node: Filter, counter: { terms: number }): UserFilter {
  if (++counter.terms > MAX_FILTER_TERMS) throw invalidFilter(`The filter has more than ${MAX_FILTER_TERMS} terms`);
  switch (node.op) {
    case "and":
    case "or":
      return { kind: node.op, filters: node.filters.map((f) => translate(f, counter)) };
    case "not":
      return { kind: "not", filter: translate(node.filter, counter) };
    case "[]": {
      if (attributeName(node.attrPath) !== "emails")
        throw invalidFilter(`Filtering on "${printable(node.attrPath)}[...]" is not supported`);
      return translateEmail(node.valFilter, counter);
    }
    case "pr":
      return { kind: "present", attribute: lookup(node.attrPath, "pr").attribute };
    default: {
      const compare = node as { op: string; attrPath: string; compValue: unknown };
      const spec = lookup(compare.attrPath, compare.op);
      return {
        kind: "compare",
        attribute: spec.attribute,
        op: compare.op as CompareOperator,
        value: valueOf(spec.kind, compare.attrPath, compare.compValue),
      };
    }
  }
}

/**
 * emails[<filter>]: `value` compares the userName and every stored email; `type eq "work"` and
 * `primary eq true` hold (the userName is always the user's primary work identity); the parts of a
 * value filter are not matched against one email together.
 */
function translateEmail(node: Filter, counter: { terms: number }): UserFilter {
  if (++counter.terms > MAX_FILTER_TERMS) throw invalidFilter(`The filter has more than ${MAX_FILTER_TERMS} terms`);
  switch (node.op) {
    case "and":
    case "or":
      return { kind: node.op, filters: node.filters.map((f) => translateEmail(f, counter)) };
    case "not":
      return { kind: "not", filter: translateEmail(node.filter, counter) };
    case "[]":
      throw invalidFilter("Nested value filters are not supported");
    default: {
      const leaf = node as { op: string; attrPath: string; compValue?: unknown };
      const name = leaf.attrPath.toLowerCase();
      if (!EMAIL_SUBATTRIBUTES.has(name))
        throw invalidFilter(`emails has no sub-attribute "${printable(leaf.attrPath)}"`);
      if (name === "value") {
        if (leaf.op === "pr") return { kind: "present", attribute: "emails" };
        const spec = lookup("emails.value", leaf.op);
        return {
          kind: "compare",
          attribute: spec.attribute,
          op: leaf.op as CompareOperator,
          value: valueOf(spec.kind, "emails.value", leaf.compValue),
        };
      }
      if (leaf.op === "pr") return { kind: "constant", value: true };
      if (leaf.op !== "eq" && leaf.op !== "ne") throw invalidFilter(`emails.${name} supports eq, ne and pr`);
      const actual: string | boolean = name === "type" ? "work" : true;
      const expected =
        name === "type"
          ? typeof leaf.compValue === "string"
            ? leaf.compValue.toLowerCase()
            : undefined
          : leaf.compValue;
      if (name === "type" && typeof expected !== "string") throw invalidFilter("emails.type compares with a string");
      if (name === "primary" && typeof expected !== "boolean")
        throw invalidFilter("emails.primary compares with true or false");
      return { kind: "constant", value: (expected === actual) === (leaf.op === "eq") };
    }
  }
}

/** RFC 7644 3.10: attribute names are case-insensitive and may carry the core schema URN. */
function attributeName(path: string): string {
  const lower = path.toLowerCase();
  const urn = `${USER_SCHEMA.toLowerCase()}:`;
  return lower.startsWith(urn) ? lower.slice(urn.length) : lower;
}

function lookup(path: string, op: string) {
  // Own keys only: "__proto__", "constructor" or "toString" must not find Object.prototype's members.
  const name = attributeName(path);
  const spec = Object.hasOwn(ATTRIBUTES, name) ? ATTRIBUTES[name] : undefined;
  if (!spec) throw invalidFilter(`Filtering on "${printable(path)}" is not supported`);
  if (!spec.ops.includes(op)) throw invalidFilter(`The operator "${op}" is not supported on "${printable(path)}"`);
  return spec;
}

function valueOf(kind: Kind, path: string, value: unknown): string | boolean | Date {
  switch (kind) {
    case "boolean":
      if (typeof value === "boolean") return value;
      // Some clients quote booleans.
      if (typeof value === "string" && /^(true|false)$/i.test(value)) return value.toLowerCase() === "true";
      throw invalidFilter(`"${printable(path)}" compares with true or false`);
    case "date": {
      const date = typeof value === "string" && /^\d{4}-\d{2}-\d{2}T/.test(value) ? new Date(value) : undefined;
      if (!date || Number.isNaN(date.getTime()))
        throw invalidFilter(`"${printable(path)}" compares with a date-time (RFC 3339)`);
      // Postgres timestamps have no year 0 and the column's ISO text has four digits: years 0001–9999
      // in UTC (an offset can move "0001-01-01T00:00:00+01:00" into year 0).
      const year = date.getUTCFullYear();
      if (year < MIN_FILTER_YEAR || year > MAX_FILTER_YEAR)
        throw invalidFilter(`"${printable(path)}" compares with a date-time in the years 0001 to 9999`);
      return date;
    }
    default:
      if (typeof value !== "string") throw invalidFilter(`"${printable(path)}" compares with a string`);
      return kind === "string" ? value.toLowerCase() : value;
  }
}

/** Attribute paths echoed in messages, without anything that is not plain text. */
function printable(text: string): string {
  return text.replace(/[^\w.:$-]/g, "?").slice(0, 100);
}
