import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { docs } from "../../../gen/travel/operator/v1/operator_docs.js";
import { OperatorService } from "../../../gen/travel/operator/v1/operator_pb.js";
import { COMMANDS, optionOfField, parseCommand, UsageError } from "../../../src/cli/arguments.js";

/** The CLI's public names (scripts depend on them): a proto rename must not change one unnoticed. */
const PUBLIC: Record<string, string[]> = {
  "tmc create": ["name", "max-api-users"],
  "tmc set-limit": ["tmc-id", "max-api-users"],
  "tmc list": ["limit", "offset"],
  "tmc get": ["tmc-id"],
  "company create": ["tmc-id", "name"],
  "user create": ["org-id", "email", "given-name", "family-name", "inactive"],
  "api-user create": ["tmc-id", "org-id", "role", "credential-type"],
  "api-user list": ["tmc-id", "limit", "offset"],
  "api-user revoke": ["tmc-id", "client-id"],
  "api-user set-keys": ["tmc-id", "client-id", "jwks", "jwks-uri"],
  "api-user set-dpop": ["tmc-id", "client-id", "dpop-bound-access-tokens"],
  "audit list": ["tmc-id", "limit", "action", "client-id", "since", "until", "page-token", "platform"],
  "keys rotate": ["now"],
  "keys list": [],
  "trusted-issuer add": ["tmc-id", "issuer", "jwks-uri", "jwks", "audience", "company-id"],
  "trusted-issuer list": ["tmc-id"],
  "trusted-issuer remove": ["tmc-id", "issuer"],
  "resource-server create": ["name", "audience", "jwks", "jwks-uri"],
  "resource-server list": ["limit", "offset"],
  "resource-server get": ["client-id"],
  "resource-server rotate": ["client-id"],
  "resource-server set-keys": ["client-id", "jwks", "jwks-uri"],
  "resource-server remove": ["client-id"],
  "lockout show": ["client-id", "address"],
  "lockout reset": ["client-id", "address"],
  "credits import": ["company-id", "file"],
  seed: [],
  migrate: [],
};

const parse = (...argv: string[]) => parseCommand(argv, () => {});
const TMC = "8d2c7a52-2f40-4a4e-9f0e-6a8b1c3d4e5f";

describe("the operator CLI's commands derive from OperatorService", () => {
  test("one command per RPC, with today's command and option names", () => {
    assert.equal(COMMANDS.length, OperatorService.methods.length);
    assert.deepEqual(
      Object.fromEntries(COMMANDS.map((c) => [c.name, c.options.map((o) => o.name)])),
      PUBLIC,
      "a changed name here changes the public CLI: keep it with COMMAND_NAMES/OPTION_NAMES in src/cli/arguments.ts",
    );
  });

  test("the help is the proto's comments: a command's description is its RPC's, an option's its field's", () => {
    const create = COMMANDS.find((c) => c.name === "tmc create")!;
    assert.equal(create.description, docs["travel.operator.v1.OperatorService.CreateTmc"]);
    assert.equal(create.options[0]!.help, docs["travel.operator.v1.CreateTmcRequest.name"]!.replace(/\.$/, ""));
    const rotate = COMMANDS.find((c) => c.name === "keys rotate")!;
    assert.ok(rotate.description.startsWith(`${rotate.summary}.`), "the summary is the first sentence");
    for (const c of COMMANDS) for (const o of c.options) assert.notEqual(o.help, o.field.name, `${c.name} --${o.name}`);
  });

  test("required options come from the validation rules (and the one exception)", () => {
    const required = (name: string) =>
      COMMANDS.find((c) => c.name === name)!
        .options.filter((o) => o.required)
        .map((o) => o.name);
    assert.deepEqual(required("tmc set-limit"), ["tmc-id", "max-api-users"]);
    assert.deepEqual(required("api-user create"), ["tmc-id"]);
    assert.deepEqual(required("user create"), ["org-id", "email", "given-name", "family-name"]);
    assert.deepEqual(required("lockout show"), ["address"]);
    assert.deepEqual(required("credits import"), ["company-id", "file"]);
    assert.deepEqual(required("tmc list"), []);
    assert.deepEqual(required("resource-server create"), ["name", "audience"]);
    assert.deepEqual(required("resource-server rotate"), ["client-id"]);
    // A TMC's trail, or the platform's (--platform): the service says which one is missing.
    assert.deepEqual(required("audit list"), []);
  });

  test("option values become the request's JSON by the field's type", () => {
    const audit = parse(
      "audit",
      "list",
      "--tmc-id",
      TMC,
      "--limit",
      "5",
      "--action",
      "A,B",
      "--action",
      "C",
      "--since",
      "2026-11-22",
    );
    assert.deepEqual(audit.request, {
      tmcId: TMC,
      limit: 5,
      actions: ["A", "B", "C"],
      since: "2026-11-22T00:00:00.000Z",
    });
    assert.deepEqual(parse("api-user", "create", "--tmc-id", TMC, "--role", "COMPANY_ADMIN").request, {
      tmcId: TMC,
      role: "COMPANY_ADMIN",
    });
    assert.deepEqual(parse("keys", "rotate", "--now").request, { now: true });
    assert.deepEqual(
      parse(
        "resource-server",
        "create",
        "--name",
        "Trips",
        "--audience",
        "https://trips.example/api",
        "--audience",
        "urn:x",
      ).request,
      { name: "Trips", audiences: ["https://trips.example/api", "urn:x"] },
    );
    assert.deepEqual(parse("audit", "list", "--platform").request, { platform: true });
    assert.equal(parse("seed", "--output", "table").output, "table");
  });

  test("wrong values are usage errors naming the option", () => {
    const refused = (argv: string[], message: RegExp) =>
      assert.throws(
        () => parse(...argv),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
      );
    refused(["tmc", "set-limit", "--tmc-id", TMC], /^--max-api-users is required for "tmc set-limit"$/);
    refused(["tmc", "create", "--name", "X", "--max-api-users", "x"], /^--max-api-users must be a whole number/);
    refused(
      ["api-user", "create", "--tmc-id", TMC, "--role", "BOSS"],
      /^--role must be one of TMC_ADMIN, COMPANY_ADMIN/,
    );
    refused(["audit", "list", "--tmc-id", TMC, "--since", "soon"], /^--since must be an RFC 3339 time/);
  });

  test("a validation message's field path names the option", () => {
    const spec = (name: string) => COMMANDS.find((c) => c.name === name)!;
    assert.equal(optionOfField(spec("audit list"), "actions[2]"), "--action");
    assert.equal(optionOfField(spec("audit list"), "page_token"), "--page-token");
    assert.equal(optionOfField(spec("credits import"), "credits"), "--file");
    assert.equal(optionOfField(spec("resource-server create"), "audiences[1]"), "--audience");
  });
});
