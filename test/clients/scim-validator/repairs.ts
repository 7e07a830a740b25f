// The validator collection's own departures from RFC 7643/7644, repaired at run time on a copy of
// the vendored file (which stays byte-identical to Microsoft's). Each repair names what the suite
// does, the text it departs from, and what the harness sends instead; README.md lists the same.
// A repair that no longer changes any request fails the run: the vendored file moved under it.

/** A request of a Postman v2.1 collection, as the harness reads and edits it. */
export interface PostmanItem {
  name: string;
  request: { method: string; url: string | PostmanUrl; body?: { raw?: string } };
  event?: { listen: string; script: { exec: string[] } }[];
}
/** A v2.1 URL object: newman sends what its parts say (its raw string is only a display copy). */
export interface PostmanUrl {
  raw: string;
  protocol?: string;
  host?: string[];
  port?: string;
  path?: string[];
  query?: { key: string; value?: string | null }[];
}
/** A folder (or the collection itself). */
export interface PostmanFolder {
  name: string;
  item: (PostmanItem | PostmanFolder)[];
}

export interface Repair {
  readonly id: string;
  readonly deviation: string;
  readonly repair: string;
  /** Edits the collection in place; returns the names of the requests it changed (or removed). */
  apply(collection: PostmanFolder): string[];
}

/** The domain the harness gives the suite's bare userName literals. */
export const USERNAME_DOMAIN = "validator.example";

const isFolder = (node: PostmanItem | PostmanFolder): node is PostmanFolder => "item" in node;

export function requestsOf(folder: PostmanFolder): PostmanItem[] {
  return folder.item.flatMap((node) => (isFolder(node) ? requestsOf(node) : [node]));
}

/** The URL newman sends: the parts of a URL object, which can disagree with its raw string. */
export function urlOf(item: PostmanItem): string {
  const url = item.request.url;
  if (typeof url === "string") return url;
  const host = (url.host ?? []).join(".") + (url.port ? `:${url.port}` : "");
  const query = (url.query ?? []).map(({ key, value }) =>
    value === undefined || value === null ? key : `${key}=${value}`,
  );
  return `${url.protocol ?? "http"}://${host}/${(url.path ?? []).join("/")}${query.length > 0 ? `?${query.join("&")}` : ""}`;
}

/** The test script's text (the pm.test assertions), "" when the request has none. */
export function testScriptOf(item: PostmanItem): string {
  return (item.event ?? [])
    .filter((event) => event.listen === "test")
    .map((event) => event.script.exec.join("\n"))
    .join("\n");
}

/** Applies `edit` to each request; returns the names of those it changed. */
function editEach(collection: PostmanFolder, edit: (item: PostmanItem) => void): string[] {
  const changed: string[] = [];
  for (const item of requestsOf(collection)) {
    const before = JSON.stringify(item);
    edit(item);
    if (JSON.stringify(item) !== before) changed.push(item.name);
  }
  return changed;
}

/** Edits the URL newman sends; an edited URL is kept as one string, which newman parses whole. */
function editUrl(item: PostmanItem, edit: (url: string) => string): void {
  const before = urlOf(item);
  const after = edit(before);
  if (after !== before) item.request.url = after;
}

function editBody(item: PostmanItem, edit: (raw: string) => string): void {
  if (item.request.body?.raw !== undefined) item.request.body.raw = edit(item.request.body.raw);
}

function editTests(item: PostmanItem, edit: (script: string) => string): void {
  for (const event of item.event ?? []) {
    if (event.listen !== "test") continue;
    const before = event.script.exec.join("\n");
    const after = edit(before);
    if (after !== before) event.script.exec = after.split("\n");
  }
}

/** A bare userName literal as an e-mail address; a literal that already is one is kept. */
export const asEmail = (literal: string) => (literal.includes("@") ? literal : `${literal}@${USERNAME_DOMAIN}`);

export const REPAIRS: readonly Repair[] = [
  {
    id: "token-endpoint",
    deviation:
      "The \"Get Token\" folder asks the reference implementation's own development endpoint GET /Token for a token; SCIM defines no token endpoint (RFC 7644 section 2: authentication is the HTTP layer's).",
    repair:
      'The folder is left out; every request carries the SCIM token the operator API issued (environment "token").',
    apply(collection) {
      const removed = collection.item.filter((node) => node.name === "Get Token");
      collection.item = collection.item.filter((node) => node.name !== "Get Token");
      return removed.flatMap((node) => (isFolder(node) ? requestsOf(node) : [node])).map((item) => item.name);
    },
  },
  {
    id: "service-provider-config",
    deviation:
      "GET /serviceConfiguration is SCIM 1.1's name; SCIM 2.0's is /ServiceProviderConfig (RFC 7644 section 4).",
    repair: "The request is sent to /ServiceProviderConfig.",
    apply: (collection) =>
      editEach(collection, (item) =>
        editUrl(item, (url) => url.replace(/\/serviceConfiguration\b/, "/ServiceProviderConfig")),
      ),
  },
  {
    id: "resource-endpoint",
    deviation:
      'A lower-case /users ("Get empty Users": its URL object\'s path, which newman sends, says users where its raw text says Users); RFC 7644 section 3.2 names the endpoint /Users, and a URI path is case-sensitive (RFC 3986 section 6.2.2.1).',
    repair: "The path is sent as /Users.",
    apply: (collection) =>
      editEach(collection, (item) => editUrl(item, (url) => url.replace(/\/users(?=[/?]|$)/, "/Users"))),
  },
  {
    id: "uuid-placeholder",
    deviation:
      'externalId "${__UUID}" is a JMeter function that Postman never expands: every user and group would share that literal externalId.',
    repair: "It is sent as {{$guid}}, Postman's own dynamic variable, which newman expands (a fresh UUID per request).",
    apply: (collection) =>
      editEach(collection, (item) => editBody(item, (raw) => raw.replaceAll("${__UUID}", "{{$guid}}"))),
  },
  {
    id: "shared-external-id",
    deviation:
      'Every user of the "User tests with garbage" folder is created with one externalId, "22fbc523-6032-4c5f-939d-5d4850cf3e52". An externalId is the provisioning client\'s identifier for the resource (RFC 7643 section 3.1): one value for five users identifies none of them, and this service declares it uniqueness "server" in /Schemas (docs/scim.md), so the second create is 409.',
    repair:
      'Each POST sends a fresh {{$guid}} instead (the PUTs keep the literal: they replace the user created first). "Post emp3 exists" still collides, on its userName.',
    apply: (collection) =>
      editEach(collection, (item) => {
        if (item.request.method !== "POST") return;
        editBody(item, (raw) => raw.replace('"22fbc523-6032-4c5f-939d-5d4850cf3e52"', '"{{$guid}}"'));
      }),
  },
  {
    id: "manager-reference",
    deviation:
      '"Post EnterpriseUser" names its manager { "Value": "SuzzyQ" }, which is no resource\'s id; the enterprise extension\'s manager.value is "the id of the SCIM resource representing the User\'s manager" (RFC 7643 section 4.3), and this service refuses one that names no user of the company (400 invalidValue, docs/scim.md).',
    repair: 'The manager is the user the folder created just before: { "Value": "{{id1}}" }.',
    apply: (collection) =>
      editEach(collection, (item) => editBody(item, (raw) => raw.replace(/("Value"\s*:\s*)"SuzzyQ"/, '$1"{{id1}}"'))),
  },
  {
    id: "username-email",
    deviation:
      'userName literals that are not e-mail addresses ("UserName123", "emp1", "OMalley", PATCH values "ryan3", "newusername"): this service\'s userName is the user\'s business e-mail address (docs/scim.md), which RFC 7643 section 4.1.1 leaves to the service provider.',
    repair: `Each bare literal L is sent as L@${USERNAME_DOMAIN}, and the assertions that compare userName expect that address.`,
    apply: (collection) =>
      editEach(collection, (item) => {
        editBody(item, (raw) =>
          raw
            .replace(
              /("userName"\s*:\s*")([^"]*)(")/g,
              (_, open: string, name: string, close: string) => open + asEmail(name) + close,
            )
            .replace(
              /("path"\s*:\s*"userName"\s*,\s*"value"\s*:\s*")([^"]*)(")/g,
              (_, open: string, name: string, close: string) => open + asEmail(name) + close,
            ),
        );
        editTests(item, (script) =>
          script.replace(
            /(jsonData\.userName\)\.to\.eql\(")([^"]*)("\))/g,
            (_, open: string, name: string, close: string) => open + asEmail(name) + close,
          ),
        );
      }),
  },
  {
    id: "attributes-value-filter",
    deviation:
      'attributes=emails[type eq "work"] and attributes=emails[value eq "…"]: the attributes parameter lists attribute names (RFC 7644 section 3.4.2.5); selecting values is the filter parameter\'s work (3.4.2.2).',
    repair: "The value filter moves to filter= (emails[…]) and attributes=emails asks for the e-mails.",
    apply: (collection) =>
      editEach(collection, (item) =>
        editUrl(item, (url) => url.replace(/\?attributes=emails(%5B.*%5D)$/, "?filter=emails$1&attributes=emails")),
      ),
  },
  {
    id: "unquoted-filter-values",
    deviation:
      "Filters with unquoted string and date values (eq Employee, co example.com, sw O, gt 2015-10-10T14:38:21.8617979-07:00): a compValue is a JSON value, a string in double quotes (RFC 7644 section 3.4.2.2's ABNF).",
    repair: "Those values are sent in double quotes.",
    apply: (collection) =>
      editEach(collection, (item) =>
        editUrl(item, (url) =>
          url.replace(/( (?:eq|ne|co|sw|ew|gt|ge|lt|le) )([^"\s()&][^\s()&]*)/g, (match, op: string, value: string) =>
            /^(true|false|null|-?\d+(\.\d+)?)$/.test(value) ? match : `${op}"${value}"`,
          ),
        ),
      ),
  },
  {
    id: "patch-status",
    deviation:
      "The PATCH assertions accept only 204; RFC 7644 section 3.5.2 lets the service answer 200 with the resource or 204.",
    repair: "They accept 200 or 204.",
    apply: (collection) =>
      editEach(collection, (item) => {
        if (item.request.method !== "PATCH") return;
        editTests(item, (script) =>
          script
            .replace('"Status code is 204"', '"Status code is 200 or 204"')
            .replace("pm.response.to.have.status(204)", "pm.expect(pm.response.code).to.be.oneOf([200, 204])"),
        );
      }),
  },
];

/** The vendored collection with every repair applied, and what each changed. */
export function repairedCollection(original: PostmanFolder): {
  collection: PostmanFolder;
  changes: { repair: Repair; requests: string[] }[];
} {
  const collection = structuredClone(original);
  const changes = REPAIRS.map((repair) => ({ repair, requests: repair.apply(collection) }));
  return { collection, changes };
}
