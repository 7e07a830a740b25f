// Microsoft's SCIM validator (the Postman collection of AzureAD/SCIMReferenceCode, vendored in
// test/clients/scim-validator/ with its license) run with newman against the service, as an
// identity-provider team runs it before connecting Entra ID. The suite's own departures from
// RFC 7643/7644 are repaired on a copy at run time (scim-validator/repairs.ts, listed in its
// README). Every failed assertion is then either declared unsupported (a /Groups request, which
// the service's /ResourceTypes does not list; an attribute its /Schemas does not return) or
// caused by the service, and the test requires none of the latter.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import newman from "newman";
import { backend } from "../helpers/backend.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import { newScimCompany, newTmc, type ScimTenant } from "../scim/scim-kit.js";
import {
  repairedCollection,
  requestsOf,
  testScriptOf,
  urlOf,
  type PostmanFolder,
  type PostmanItem,
} from "./scim-validator/repairs.js";

const SCIM_BASE = "/v2/scim/v2";
const VENDORED = new URL("./scim-validator/PostmanCollection.json", import.meta.url);

type Folder = "Discovery" | "Users" | "Groups";
const FOLDERS: readonly Folder[] = ["Discovery", "Users", "Groups"];

/** One request of the run: what was sent, what came back, and each assertion its script declares. */
interface Execution {
  readonly name: string;
  readonly folder: Folder;
  method: string;
  url: string;
  status?: number;
  body?: string;
  scriptError?: string;
  readonly declared: readonly string[];
  readonly results: { name: string; error?: string }[];
}

/**
 * Assertions that need an attribute's value back. RFC 7644 section 3.3 lets a service ignore an
 * attribute it does not hold, and RFC 7643 section 7's /Schemas is where it says which: such an
 * assertion's failure on a 2xx answer is declared unsupported only while the live /Schemas does
 * not list the attribute, or lists it returned "never" (once it is returned, the failure is the
 * service's).
 */
const NEEDS_ATTRIBUTE: readonly { request: string; assertion: string; attribute: string }[] = [
  { request: "Put a user OMalley", assertion: "Body contians Germany", attribute: "addresses" },
];

interface Failure {
  readonly execution: Execution;
  readonly assertion: string;
  readonly expected: string;
  readonly cause: "declared unsupported" | "service";
}

/** What the service declares: whether it serves /Groups, and the User attributes it returns (names in lower case). */
interface Declared {
  readonly groups: boolean;
  readonly returnedAttributes: ReadonlySet<string>;
}

function declaredUnsupported(execution: Execution, assertion: string, declared: Declared): boolean {
  // /Groups as the service declares it: no such resource type, and 404 for the route (a 5xx, a
  // hang or a 200 there would be the service's).
  if (execution.folder === "Groups") return !declared.groups && execution.status === 404;
  const need = NEEDS_ATTRIBUTE.find((n) => n.request === execution.name && n.assertion === assertion);
  const answered = execution.status !== undefined && execution.status >= 200 && execution.status < 300;
  return need !== undefined && answered && !declared.returnedAttributes.has(need.attribute.toLowerCase());
}

/** Discovery, Users or Groups: the resource a request's URL names (the folder names mix them). */
function folderOf(url: string): Folder {
  if (/\/Groups\b/.test(url)) return "Groups";
  if (/\/Users\b/.test(url)) return "Users";
  return "Discovery";
}

/** The assertions a request's test script declares (pm.test names), whether or not the script reaches them. */
function declaredAssertions(item: PostmanItem): string[] {
  return [...testScriptOf(item).matchAll(/pm\.test\("([^"]*)"/g)].map((match) => match[1]!);
}

/** Runs the collection; resolves with one Execution per request, in order. */
function runNewman(collection: PostmanFolder, environment: Record<string, string>): Promise<Execution[]> {
  // Requests run in collection order (the suite never calls setNextRequest); names repeat, so the
  // nth item event is the nth request.
  const items = requestsOf(collection);
  const executions: Execution[] = [];
  const current = () => executions.at(-1)!;
  return new Promise((resolve, reject) => {
    newman
      .run(
        {
          collection,
          environment: { values: Object.entries(environment).map(([key, value]) => ({ key, value, enabled: true })) },
          reporters: [],
          timeoutRequest: 20_000,
          ignoreRedirects: true,
        },
        (error) => (error ? reject(error) : resolve(executions)),
      )
      .on("beforeItem", (_error, args: newman.RunEventArgs) => {
        // A request out of order keeps its own name, and the test's order check fails.
        const item = items[executions.length];
        const declared = item?.name === args.item.name ? declaredAssertions(item) : [];
        const folder = folderOf(item ? urlOf(item) : "");
        executions.push({ name: args.item.name, folder, method: "", url: "", declared, results: [] });
      })
      .on("request", (error: Error | null, args: newman.RunEventArgs) => {
        const execution = current();
        execution.method = args.request?.method ?? "";
        execution.url = args.request?.url.toString() ?? "";
        if (error) execution.scriptError = `no response: ${error.message}`;
        execution.status = args.response?.code;
        execution.body = args.response?.text();
      })
      .on("assertion", (_error, args: newman.RunEventArgs) => {
        current().results.push({ name: args.assertion ?? "", error: args.error?.message });
      })
      .on("script", (error: Error | null) => {
        if (error) current().scriptError = error.message;
      });
  });
}

/** Each declared assertion that did not pass (failed, or never reached because its script stopped). */
function failuresOf(executions: readonly Execution[], declared: Declared): Failure[] {
  return executions.flatMap((execution) => {
    const results = [...execution.results];
    return execution.declared.flatMap((assertion): Failure[] => {
      const index = results.findIndex((result) => result.name === assertion);
      const result = index >= 0 ? results.splice(index, 1)[0] : undefined;
      if (result && result.error === undefined) return [];
      const expected = result?.error ?? `not reached: ${execution.scriptError ?? "the script stopped before it"}`;
      const cause = declaredUnsupported(execution, assertion, declared) ? "declared unsupported" : "service";
      return [{ execution, assertion, expected, cause }];
    });
  });
}

function describeFailure({ execution, assertion, expected }: Failure): string {
  const body = (execution.body ?? "").replace(/\s+/g, " ").slice(0, 300);
  return `${execution.method} ${execution.url.replace(/^https?:\/\/[^/]+/, "")} (${execution.name}): "${assertion}" expected ${expected}; got ${execution.status ?? "no response"} ${body}`;
}

test("the repairs leave none of the deviations they list in the collection newman runs", () => {
  const original = JSON.parse(fs.readFileSync(VENDORED, "utf8")) as PostmanFolder;
  const found = (collection: PostmanFolder) => {
    const items = requestsOf(collection);
    const bodies = items.map((item) => item.request.body?.raw ?? "");
    const urls = items.map(urlOf);
    return {
      tokenEndpoint: urls.filter((url) => url.endsWith("/Token")).length,
      serviceConfiguration: urls.filter((url) => url.includes("/serviceConfiguration")).length,
      lowerCaseUsers: urls.filter((url) => /\/users\b/.test(url)).length,
      uuidPlaceholder: bodies.filter((body) => body.includes("${__UUID}")).length,
      sharedExternalId: items.filter(
        (item) =>
          item.request.method === "POST" && item.request.body?.raw?.includes("22fbc523-6032-4c5f-939d-5d4850cf3e52"),
      ).length,
      managerNamesNoResource: bodies.filter((body) => body.includes('"SuzzyQ"')).length,
      userNameNotAnEmail: bodies.flatMap((body) => [...body.matchAll(/"userName"\s*:\s*"([^"@]*)"/g)]).length,
      attributesWithValueFilter: urls.filter((url) => /[?&]attributes=[^&]*%5B/.test(url)).length,
      unquotedFilterValue: urls.filter((url) => / (eq|co|sw|gt) [^"\s]/.test(url)).length,
      patchExpectsOnly204: items.filter(
        (item) => item.request.method === "PATCH" && testScriptOf(item).includes("to.have.status(204)"),
      ).length,
    };
  };
  const before = found(original);
  // Each deviation is there as published (so the checks can fail), and gone from what runs.
  for (const [deviation, count] of Object.entries(before))
    assert.ok(count > 0, `${deviation} not in the vendored file`);
  const after = found(repairedCollection(original).collection);
  assert.deepEqual(after, Object.fromEntries(Object.keys(before).map((key) => [key, 0])));
});

describe(`Microsoft's SCIM validator with newman (${backend})`, () => {
  let running: RunningService;
  let tenant: ScimTenant;
  before(async () => {
    running = await startService();
    const tmcId = await newTmc(running.baseUrl, "SCIM validator TMC");
    tenant = await newScimCompany(running.baseUrl, tmcId, "SCIM validator company");
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  async function discovery(path: string): Promise<any> {
    const response = await fetch(`${running.baseUrl}${SCIM_BASE}${path}`, {
      headers: { authorization: `Bearer ${tenant.scimToken}`, accept: "application/scim+json" },
    });
    assert.equal(response.status, 200, path);
    return response.json();
  }

  test("the repaired collection: 0 failures caused by the service; /Groups declared unsupported", async () => {
    // What the service declares: its resource types (Users only) and the User schema's attributes.
    const resourceTypes = await discovery("/ResourceTypes");
    const endpoints = (resourceTypes.Resources as { endpoint: string }[]).map((type) => type.endpoint);
    assert.deepEqual(endpoints, ["/Users"]);
    const userSchema = await discovery("/Schemas/urn:ietf:params:scim:schemas:core:2.0:User");
    const declared: Declared = {
      groups: endpoints.includes("/Groups"),
      returnedAttributes: new Set(
        (userSchema.attributes as { name: string; returned?: string }[])
          .filter((attribute) => attribute.returned !== "never")
          .map((attribute) => attribute.name.toLowerCase()),
      ),
    };

    const original = JSON.parse(fs.readFileSync(VENDORED, "utf8")) as PostmanFolder;
    const { collection, changes } = repairedCollection(original);
    for (const { repair, requests } of changes)
      assert.ok(requests.length > 0, `repair ${repair.id} changed no request: the vendored collection moved`);

    const { hostname, port } = new URL(running.baseUrl);
    const executions = await runNewman(collection, {
      Protocol: "http",
      Server: hostname,
      Port: `:${port}`,
      Api: SCIM_BASE.slice(1),
      token: tenant.scimToken,
    });
    assert.deepEqual(
      executions.map((execution) => execution.name),
      requestsOf(collection).map((item) => item.name),
      "every request of the collection ran, once, in order",
    );

    const failures = failuresOf(executions, declared);
    for (const folder of FOLDERS) {
      const total = executions.filter((e) => e.folder === folder).reduce((sum, e) => sum + e.declared.length, 0);
      const failed = failures.filter((f) => f.execution.folder === folder).length;
      console.log(`scim-validator: ${folder} ${total - failed}/${total}`);
    }
    for (const { repair, requests } of changes)
      console.log(`scim-validator: repair ${repair.id}: ${requests.join(", ")}`);
    for (const failure of failures.filter((f) => f.cause === "declared unsupported" && f.execution.folder !== "Groups"))
      console.log(`scim-validator: declared unsupported (not in /Schemas): ${describeFailure(failure)}`);
    const groups = failures.filter((f) => f.cause === "declared unsupported" && f.execution.folder === "Groups");
    console.log(`scim-validator: ${groups.length} failed assertions on /Groups (declared unsupported)`);

    const serviceCaused = failures.filter((f) => f.cause === "service");
    assert.equal(
      serviceCaused.length,
      0,
      `failures caused by the service:\n${serviceCaused.map(describeFailure).join("\n")}`,
    );
  });
});
