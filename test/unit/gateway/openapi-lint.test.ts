import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { restRoutesOf } from "../../../src/gateway/http-rules.js";
import { buildOpenApiDocument } from "../../../src/gateway/openapi.js";
import { contractServices } from "../../../src/rpc/areas.js";

/*
 * The generated OpenAPI document as client generators (openapi-typescript,
 * @hey-api/openapi-ts) and `redocly lint` read it. The lint runs with the repository's
 * redocly.yaml (recommended rules; unused components, duplicate operationIds, missing servers
 * are errors) and must find no error.
 */

type Json = Record<string, any>;
const root = fileURLToPath(new URL("../../../", import.meta.url));
const SERVER_URL = "https://auth.travel-platform.test";
const doc = buildOpenApiDocument(restRoutesOf(contractServices), { serverUrl: SERVER_URL }) as Json;
const operations = Object.entries(doc.paths as Json).flatMap(([p, verbs]) =>
  Object.entries(verbs as Json).map(([verb, op]) => ({ path: p, verb, op: op as Json })),
);

test("redocly lint finds no error in the generated document", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "openapi-lint-"));
  try {
    const file = path.join(dir, "openapi.json");
    fs.writeFileSync(file, JSON.stringify(doc, null, 2));
    const result = spawnSync(
      path.join(root, "node_modules/.bin/redocly"),
      ["lint", file, "--config", path.join(root, "redocly.yaml"), "--format", "stylish"],
      {
        encoding: "utf8",
        timeout: 120_000,
        // No telemetry or update check: the lint is offline.
        env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
      },
    );
    const problems = `${result.stdout}\n${result.stderr}`
      .split("\n")
      .filter((line) => /\b(error|warning)\b/.test(line) && /^\s+\d+:\d+/.test(line));
    assert.equal(result.status, 0, `redocly lint failed:\n${problems.join("\n") || result.stderr}`);
    assert.deepEqual(
      problems.filter((line) => /\berror\b/.test(line)),
      [],
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("generated clients get a base URL: servers names the public URL", () => {
  assert.deepEqual(doc.servers, [{ url: SERVER_URL }]);
});

test("the token, introspection and revocation endpoints declare client authentication: HTTP Basic, or the form's client_secret", () => {
  assert.deepEqual(doc.components.securitySchemes.ClientSecretBasic, {
    type: "http",
    scheme: "basic",
    description:
      "RFC 6749 2.3.1 client_secret_basic: the client_id and client_secret, each form-urlencoded, as HTTP Basic credentials",
  });
  for (const p of ["/v2/auth/oauth2-token", "/v2/auth/introspect", "/v2/auth/revoke"]) {
    assert.deepEqual(doc.paths[p].post.security, [{ ClientSecretBasic: [] }, {}], p);
  }
  assert.deepEqual(doc.security, [{ Bearer: [] }], "every other operation takes a bearer token");
});

test("each operation once, with a unique operationId: the SCIM aliases are named, not duplicated", () => {
  const ids = operations.map((o) => o.op.operationId);
  assert.equal(new Set(ids).size, ids.length);
  assert.deepEqual(
    ids.filter((id) => /_\d+$/.test(id)),
    [],
  );
  assert.equal(doc.paths["/v2/scim/Users"], undefined);
  assert.equal(doc.paths["/v2/scim/v2/Users/{userId}"].get.description, "Also served at /v2/scim/Users/{userId}.");
});

test("no component is unused", () => {
  const text = JSON.stringify({ ...doc, components: { ...doc.components, schemas: {} } });
  const schemas = doc.components.schemas as Json;
  // Referenced from the operations, or from another schema that is.
  const used = new Set<string>();
  const visit = (json: string) => {
    for (const [, name] of json.matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
      if (used.has(name!)) continue;
      used.add(name!);
      visit(JSON.stringify(schemas[name!]));
    }
  };
  visit(text);
  assert.deepEqual(
    Object.keys(schemas).filter((name) => !used.has(name)),
    [],
  );
});

test("the PUT body lists the fields GET answers that the server keeps as readOnly", () => {
  const put = doc.paths["/v2/users/{userId}"].put.requestBody.content["application/json"].schema;
  const readOnly = Object.entries(put.properties as Json)
    .filter(([, schema]) => schema.readOnly === true)
    .map(([name]) => name);
  assert.deepEqual(readOnly.sort(), ["bookingTmcRef", "contractingTmcRef", "id", "isActive", "stealthMode"]);
  for (const name of readOnly) assert.ok(!put.required?.includes(name), `${name} is not required`);
});
