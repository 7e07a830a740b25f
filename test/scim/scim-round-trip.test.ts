// PATCH → GET round trip over every attribute and sub-attribute the live /Schemas lists:
// each PATCH form an IdP uses (replace and add with a path, a path-less value, remove) is either
// applied — GET shows the value written, or the attribute gone after a remove — or refused with
// the scimType the attribute's characteristics call for, and a refusal writes nothing. Never a
// 200 that changes nothing (one was: a PATCH of displayName accepted and dropped). The
// attributes come from the /Schemas response, so an attribute added to user-schema.ts is covered
// without touching this file. Over REST, on the backend TEST_BACKEND names.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { backend } from "../helpers/backend.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import { newScimCompany, newTmc, newUser, PATCH_OP, scim, USER_SCHEMA, type ScimTenant } from "./scim-kit.js";

interface Attribute {
  readonly name: string;
  readonly type: string;
  readonly multiValued: boolean;
  readonly required: boolean;
  readonly mutability: string;
  readonly returned?: string;
  readonly canonicalValues?: readonly string[];
  readonly subAttributes?: readonly Attribute[];
}

/** One target: an attribute of a schema, or one of its sub-attributes. */
interface Target {
  readonly schema: string;
  readonly attribute: Attribute;
  readonly sub: Attribute | undefined;
}

type Resource = Record<string, any>;

/** RFC 7644 3.12 scimTypes a refusal may carry, by why it is refused. */
const READ_ONLY = ["mutability"];
/** A value the held state cannot take (a second email, removing the one userName): invalidValue; or mutability. */
const CONFLICT = ["invalidValue", "mutability"];

describe(`SCIM PATCH → GET round trip over every attribute /Schemas lists (${backend})`, () => {
  let running: RunningService;
  let tenant: ScimTenant;
  let serial = 0;
  const users = "/v2/scim/v2/Users";

  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "Round trip TMC");
    tenant = await newScimCompany(running.baseUrl, tmcId, "Round trip company");
  });
  after(async () => {
    await running?.stop();
    await dropStorage(running.storage);
  });

  const get = async (id: string): Promise<Resource> => {
    const answer = await scim(running, tenant.scimToken, "GET", `${users}/${id}`);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return answer.body;
  };
  const create = async (): Promise<Resource> => {
    const answer = await scim(
      running,
      tenant.scimToken,
      "POST",
      users,
      newUser(`rt${++serial}.${Date.now()}@rt.example`),
    );
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body;
  };

  test("every attribute and sub-attribute: applied (GET shows it) or refused with its scimType, never a 200 that changes nothing", async () => {
    const schemas = await scim(running, tenant.scimToken, "GET", "/v2/scim/v2/Schemas");
    assert.equal(schemas.status, 200);
    const targets: Target[] = schemas.body.Resources.flatMap((schema: any) =>
      schema.attributes.flatMap((attribute: Attribute) => [
        { schema: schema.id, attribute, sub: undefined },
        ...(attribute.subAttributes ?? []).map((sub) => ({ schema: schema.id, attribute, sub })),
      ]),
    );
    const manager = await create();
    const user = await create();
    const checked = new Map<string, string[]>();

    for (const target of targets) {
      const label = labelOf(target);
      const outcomes: string[] = [];
      for (const form of ["replace", "add", "path-less replace", "remove"] as const) {
        const before = await get(user.id);
        const path = pathOf(target, before);
        const value = sampleOf(target, before, manager.id, ++serial);
        const operation =
          form === "remove"
            ? { op: "remove", path }
            : form === "path-less replace"
              ? { op: "replace", value: pathLess(target, path, value) }
              : { op: form === "add" ? "Add" : "Replace", path, value };
        const answer = await scim(running, tenant.scimToken, "PATCH", `${users}/${user.id}`, {
          schemas: [PATCH_OP],
          Operations: [operation],
        });
        const after = await get(user.id);
        const context = `${form} ${label} (${JSON.stringify(operation)}) → ${answer.status} ${JSON.stringify(answer.body)}`;
        const readOnly = target.attribute.mutability === "readOnly" || target.sub?.mutability === "readOnly";
        const ignored = target.attribute.returned === "never";
        if (ignored) {
          // Accepted and ignored (writeOnly, returned never): a 200 that stores nothing, as /Schemas says.
          assert.equal(answer.status, 200, `ignored: ${context}`);
          assert.deepEqual(withoutLastModified(after), withoutLastModified(before), `nothing stored: ${context}`);
        } else if (readOnly && form === "path-less replace" && answer.status === 200) {
          // RFC 7644 3.3: a read-only value a client echoes back inside a path-less value is ignored.
          // (The write still stamps meta.lastModified.)
          assert.deepEqual(
            withoutLastModified(after),
            withoutLastModified(before),
            `an echoed read-only value is ignored: ${context}`,
          );
        } else if (readOnly) {
          assert.equal(answer.status, 400, `read-only: ${context}`);
          assert.ok(READ_ONLY.includes(answer.body.scimType), `read-only is mutability: ${context}`);
        } else if (answer.status === 200) {
          assert.deepEqual(answer.body, after, `the PATCH answer is what GET shows: ${context}`);
          const held = valueAt(target, after);
          const message = `GET shows the value written, not ${JSON.stringify(held)}: ${context}`;
          if (form === "remove")
            assert.ok(isUnassigned(held), `removed, GET shows ${JSON.stringify(held)}: ${context}`);
          // RFC 7644 3.5.2.1: add to a multi-valued attribute appends the values.
          else if (form === "add" && target.attribute.multiValued && !target.sub && Array.isArray(value))
            assertHolds(Array.isArray(held) ? held.slice(-value.length) : held, value, message);
          else assertHolds(held, value, message);
        } else {
          assert.equal(answer.status, 400, context);
          // A replace of a writable attribute with a value of its type is never refused; an add to a
          // multi-valued attribute (a second value) or a remove may conflict with what is held.
          const conflict = form === "remove" || (form === "add" && target.attribute.multiValued);
          assert.ok(conflict, `a writable attribute refused a ${form}: ${context}`);
          assert.ok(CONFLICT.includes(answer.body.scimType), `scimType: ${context}`);
          if (target.attribute.required && target.sub === undefined && form === "remove")
            assert.equal(answer.body.scimType, "invalidValue", `required: ${context}`);
        }
        if (answer.status !== 200) assert.deepEqual(after, before, `a refusal writes nothing: ${context}`);
        outcomes.push(
          `${form}: ${answer.status !== 200 ? answer.body.scimType : readOnly || ignored ? "ignored" : "applied"}`,
        );
      }
      checked.set(label, outcomes);
    }

    // Every attribute and sub-attribute /Schemas lists was tried, in every form.
    assert.deepEqual([...checked.keys()], targets.map(labelOf));
    assert.ok(checked.size >= 23, [...checked.keys()].join(", "));
    // The bug this guards against: displayName was accepted and dropped.
    assert.deepEqual(checked.get("displayName"), [
      "replace: applied",
      "add: applied",
      "path-less replace: applied",
      "remove: applied",
    ]);
    // Required and always-held attributes are refused on remove, not answered 200 and kept.
    assert.equal(checked.get("userName")?.at(-1), "remove: invalidValue");
    assert.equal(checked.get("active")?.at(-1), "remove: mutability");
    // Stored as sent: an email's type can be removed like any value.
    assert.equal(checked.get("emails.type")?.at(-1), "remove: applied");
    assert.deepEqual(checked.get("password"), [
      "replace: ignored",
      "add: ignored",
      "path-less replace: ignored",
      "remove: ignored",
    ]);
  });
});

function withoutLastModified(resource: Resource): Resource {
  const { lastModified: _stamped, ...meta } = resource.meta;
  return { ...resource, meta };
}

function labelOf(target: Target): string {
  const prefix = target.schema === USER_SCHEMA ? "" : `${target.schema}:`;
  return `${prefix}${target.attribute.name}${target.sub ? `.${target.sub.name}` : ""}`;
}

/** The PATCH path: a multi-valued attribute's element is selected by a value filter on what GET shows. */
function pathOf(target: Target, resource: Resource): string {
  const prefix = target.schema === USER_SCHEMA ? "" : `${target.schema}:`;
  let path = `${prefix}${target.attribute.name}`;
  if (target.attribute.multiValued && target.sub) {
    const element = (holderOf(target, resource)[target.attribute.name] ?? [])[0] ?? {};
    const key = Object.keys(element).find((k) => typeof element[k] === "string") ?? "value";
    path += `[${key} eq ${JSON.stringify(element[key] ?? "")}]`;
  }
  return target.sub ? `${path}.${target.sub.name}` : path;
}

/** A path-less replace names the attribute in the value (RFC 7644 3.5.2.3), the extension's under its URN. */
function pathLess(target: Target, path: string, value: unknown): Record<string, unknown> {
  if (target.schema === USER_SCHEMA) return { [path]: value };
  return { [target.schema]: { [path.slice(target.schema.length + 1)]: value } };
}

function holderOf(target: Target, resource: Resource): Resource {
  return target.schema === USER_SCHEMA ? resource : (resource[target.schema] ?? {});
}

/** What GET shows at the target (a multi-valued attribute's first element for a sub-attribute). */
function valueAt(target: Target, resource: Resource): unknown {
  const held = holderOf(target, resource)[target.attribute.name];
  if (!target.sub) return held;
  const element = target.attribute.multiValued ? held?.[0] : held;
  return element?.[target.sub.name];
}

/** A value of the target's type that differs from what is held where the type allows. */
function sampleOf(target: Target, resource: Resource, managerId: string, n: number): unknown {
  const leaf = (attribute: Attribute, parent: Attribute | undefined): unknown => {
    // RFC 7643 4.3: manager.value is the id of another User.
    if ((parent ?? attribute).name === "manager" && attribute.name === "value") return managerId;
    if (attribute.canonicalValues) return attribute.canonicalValues[0];
    if (attribute.type === "boolean") {
      // RFC 7643 2.4: "primary" marks the one preferred value; a single value is primary.
      if (attribute.name === "primary") return true;
      const held = parent ? undefined : holderOf(target, resource)[attribute.name];
      return held !== true;
    }
    // An email address is a string of every attribute's syntax, and the one userName accepts.
    return `rt${n}.${attribute.name.toLowerCase()}@rt.example`;
  };
  const complex = (attribute: Attribute): Record<string, unknown> => {
    if (attribute.name === "manager") return { value: managerId };
    return Object.fromEntries(
      (attribute.subAttributes ?? [])
        .filter((s) => s.mutability !== "readOnly")
        .map((s) => [s.name, leaf(s, attribute)]),
    );
  };
  if (target.sub) return leaf(target.sub, target.attribute);
  if (target.attribute.subAttributes) {
    const value = complex(target.attribute);
    return target.attribute.multiValued ? [value] : value;
  }
  return leaf(target.attribute, undefined);
}

/** Every part of what was written is held (a complex value may hold more: $ref, the defaults). */
function assertHolds(held: unknown, written: unknown, message: string): void {
  if (Array.isArray(written)) {
    assert.ok(Array.isArray(held) && held.length === written.length, message);
    written.forEach((w, i) => assertHolds(held[i], w, message));
  } else if (written !== null && typeof written === "object") {
    assert.ok(held !== null && typeof held === "object", message);
    for (const [key, value] of Object.entries(written)) assertHolds((held as Resource)[key], value, message);
  } else {
    assert.deepEqual(held, written, message);
  }
}

/** Unassigned (RFC 7643 2.5): absent, null, empty, or a complex value whose parts all are. */
function isUnassigned(held: unknown): boolean {
  if (held === undefined || held === null || held === "") return true;
  if (Array.isArray(held)) return held.every(isUnassigned);
  if (typeof held === "object") return Object.values(held as object).every(isUnassigned);
  return false;
}
