// The SCIM edge as IdPs meet it (SCIM routing and dialect):
// filters that used to reach Postgres as 500s, query parameters in the case Entra and
// Okta send them, the trailing slash, every answer on a SCIM path in the SCIM error format
// (unknown resources, unsupported endpoints, wrong methods, refusals before routing), and the
// SCIM token taken only as issued. Through REST on a real port, on both backends.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config/config.js";
import { backend } from "../helpers/backend.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import {
  LIST_RESPONSE,
  newScimCompany,
  newTmc,
  newUser,
  scim,
  scimError,
  type ScimAnswer,
  type ScimTenant,
} from "./scim-kit.js";

const USERS = "/v2/scim/v2/Users";
const q = (filter: string) => `${USERS}?filter=${encodeURIComponent(filter)}`;

describe(`SCIM edge: filters, query parameters, routing, error dialect, token form (${backend})`, () => {
  let running: RunningService;
  let a: ScimTenant;
  let adaId: string;
  before(async () => {
    running = await startService();
    a = await newScimCompany(running.baseUrl, await newTmc(running.baseUrl, "SCIM edge TMC"), "Edge Co");
    for (const name of ["ada@edge.example", "bob@edge.example", "cy@edge.example"]) {
      const created = await scim(running, a.scimToken, "POST", USERS, newUser(name));
      assert.equal(created.status, 201, JSON.stringify(created.body));
      if (name.startsWith("ada")) adaId = created.body.id;
    }
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  const get = (path: string) => scim(running, a.scimToken, "GET", path);
  const userNames = (answer: ScimAnswer) =>
    (answer.body.Resources as Array<{ userName: string }>).map((u) => u.userName).sort();

  test("attribute names that are Object.prototype keys are 400 invalidFilter, not 500", async () => {
    for (const filter of [
      '__proto__ eq "x"',
      "constructor pr",
      'toString eq "x"',
      "hasOwnProperty pr",
      'valueOf gt "x"',
      '__defineGetter__ co "x"',
      'urn:ietf:params:scim:schemas:core:2.0:User:constructor eq "x"',
      "not (isPrototypeOf pr)",
      'userName eq "ada@edge.example" or propertyIsEnumerable pr',
    ]) {
      const body = scimError(await get(q(filter)), 400, "invalidFilter");
      assert.match(body.detail, /is not supported/, filter);
    }
  });

  test("id with any operator and a value that is not a UUID: eq matches none, ne matches all", async () => {
    const all = await get(q('id ne "x"'));
    assert.equal(all.status, 200, JSON.stringify(all.body));
    assert.deepEqual(userNames(all), ["ada@edge.example", "bob@edge.example", "cy@edge.example"]);
    assert.equal((await get(q('id ne "not-a-uuid" and userName sw "ada"'))).body.totalResults, 1);
    assert.equal((await get(q('id eq "x"'))).body.totalResults, 0);
    assert.equal((await get(q('not (id ne "x")'))).body.totalResults, 0);
    assert.deepEqual(userNames(await get(q(`id ne "${adaId}"`))), ["bob@edge.example", "cy@edge.example"]);
    assert.deepEqual(userNames(await get(q(`id eq "${adaId.toUpperCase()}"`))), ["ada@edge.example"]);
  });

  test("date-times are limited to the years 0001–9999 (UTC); the bounds themselves work", async () => {
    for (const date of [
      "0000-01-01T00:00:00Z",
      "0001-01-01T00:00:00+01:00",
      "9999-12-31T23:59:59-01:00",
      "0000-12-31T23:59:59.999Z",
    ]) {
      for (const op of ["gt", "ge", "lt", "le", "eq"]) {
        for (const attribute of ["meta.created", "meta.lastModified"]) {
          const body = scimError(await get(q(`${attribute} ${op} "${date}"`)), 400, "invalidFilter");
          assert.match(body.detail, /years 0001 to 9999/);
        }
      }
    }
    assert.equal((await get(q('meta.created gt "0001-01-01T00:00:00Z"'))).body.totalResults, 3);
    assert.equal((await get(q('meta.lastModified lt "9999-12-31T23:59:59Z"'))).body.totalResults, 3);
    assert.equal((await get(q('meta.created lt "0001-01-01T00:00:00+00:00"'))).body.totalResults, 0);
  });

  test("JSON escapes in filter strings are held to the text rule once decoded: every string attribute × eq/ne/co/sw/ew with a control character or a lone surrogate is 400 invalidFilter", async () => {
    const attributes = [
      "userName",
      "emails",
      "emails.value",
      "externalId",
      "name.givenName",
      "name.familyName",
      "displayName",
      "urn:ietf:params:scim:schemas:core:2.0:User:userName",
    ];
    // As a client writes them in the filter: JSON escapes, not the characters themselves.
    const escapes = [
      "\\u0000",
      "a\\u0000b",
      "\\u001f",
      "\\u001F",
      "\\u0008",
      "\\u007f",
      "\\ud800",
      "x\\udc00",
      "\\ud83d",
    ];
    const filters: string[] = [];
    for (const escape of escapes) {
      for (const attribute of attributes)
        for (const op of ["eq", "ne", "co", "sw", "ew"]) filters.push(`${attribute} ${op} "${escape}"`);
      filters.push(
        `id eq "${escape}"`,
        `id ne "${escape}"`,
        `emails[value co "${escape}"]`,
        `emails[type eq "${escape}"]`,
        `active eq "${escape}"`,
        `meta.created gt "${escape}"`,
        `userName pr and not (externalId sw "${escape}")`,
      );
    }
    const wrong: string[] = [];
    for (const filter of filters) {
      const answer = await get(q(filter));
      try {
        const body = scimError(answer, 400, "invalidFilter");
        assert.match(body.detail, /control characters or invalid Unicode/);
      } catch (error) {
        wrong.push(`${filter}: ${(error as Error).message.slice(0, 160)}`);
      }
    }
    assert.deepEqual(wrong, [], `${wrong.length} of ${filters.length} filters not answered 400 invalidFilter`);
    // Escapes of allowed text still work: a quote, a backslash, a surrogate pair, tab, é.
    for (const [i, [escape, name]] of [
      ['a\\"b', 'a"b'],
      ["a\\\\b", "a\\b"],
      ["\\ud83d\\ude00", "\u{1F600}"],
      ["t\\tt", "t\tt"],
      ["\\u00e9", "é"],
    ].entries()) {
      const created = await scim(
        running,
        a.scimToken,
        "POST",
        USERS,
        newUser(`escape${i}@edge.example`, { displayName: name }),
      );
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const found = await get(q(`displayName eq "${escape}"`));
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.equal(found.body.totalResults, 1, `displayName eq "${escape}"`);
      assert.equal((await scim(running, a.scimToken, "DELETE", `${USERS}/${created.body.id}`)).status, 204);
    }
  });

  test("query parameter names in any case (Entra, Okta, DeltaSync); startIndex 0 means 1; unknown ones ignored", async () => {
    const filter = encodeURIComponent('userName sw "b" or userName sw "c"');
    for (const query of [
      `startindex=1&count=1&filter=${filter}`,
      `StartIndex=1&Count=1&Filter=${filter}`,
      `STARTINDEX=0&COUNT=1&FILTER=${filter}`,
      `startIndex=-3&count=1&filter=${filter}`,
    ]) {
      const page = await get(`${USERS}?${query}`);
      assert.equal(page.status, 200, `${query}: ${JSON.stringify(page.body)}`);
      assert.deepEqual(
        [page.body.schemas, page.body.totalResults, page.body.startIndex, page.body.itemsPerPage],
        [[LIST_RESPONSE], 2, 1, 1],
        query,
      );
      assert.equal(page.body.Resources[0].userName, "bob@edge.example", query);
    }
    // Entra's existence check (form-encoded spaces) and Okta's import page, as they send them.
    const entra = await get(`${USERS}?filter=userName+eq+%22ada%40edge.example%22`);
    assert.deepEqual([entra.status, entra.body.totalResults], [200, 1], JSON.stringify(entra.body));
    const okta = await get(`${USERS}?filter=userName%20eq%20%22ADA@edge.example%22&startIndex=1&count=100`);
    assert.deepEqual(
      [okta.status, okta.body.totalResults, okta.body.Resources[0]?.userName],
      [200, 1, "ada@edge.example"],
      JSON.stringify(okta.body),
    );
    // Microsoft's DeltaSync sample: startindex=0&count=100 with excludedAttributes in lower case.
    const delta = await get(`${USERS}?startindex=0&count=100&excludedattributes=name`);
    assert.equal(delta.status, 200, JSON.stringify(delta.body));
    assert.equal(delta.body.startIndex, 1);
    assert.equal(delta.body.Resources.length, 3);
    assert.ok(
      delta.body.Resources.every(
        (u: Record<string, unknown>) => u.name === undefined && typeof u.userName === "string",
      ),
      JSON.stringify(delta.body.Resources[0]),
    );
    // One user, in any case too.
    const one = await get(`${USERS}/${adaId}?ATTRIBUTES=userName`);
    assert.equal(one.body.userName, "ada@edge.example");
    assert.equal(one.body.name, undefined);
    // Parameters SCIM does not define here are ignored (decision: docs/scim.md).
    const unknown = await get(
      `${USERS}?filter=${encodeURIComponent('userName eq "ada@edge.example"')}&api-version=2&aadOptscim062020=1`,
    );
    assert.equal(unknown.status, 200, JSON.stringify(unknown.body));
    assert.equal(unknown.body.totalResults, 1);
    // One parameter named twice, in whatever case, is refused in the SCIM dialect.
    scimError(await get(`${USERS}?count=1&Count=2`), 400, "invalidSyntax");
    scimError(await get(`${USERS}?filter=a&filter=b`), 400, "invalidSyntax");
  });

  test("the collection with a trailing slash is the collection (GET with a filter, POST), not a user id", async () => {
    const list = await get(`${USERS}/?filter=${encodeURIComponent('userName eq "ada@edge.example"')}`);
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual([list.body.schemas, list.body.totalResults], [[LIST_RESPONSE], 1]);
    assert.equal((await get("/v2/scim/Users/?count=1")).body.itemsPerPage, 1);
    const created = await scim(running, a.scimToken, "POST", `${USERS}/`, newUser("dee@edge.example"));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await get(`${USERS}/${created.body.id}/`)).body.userName, "dee@edge.example");
    assert.equal((await scim(running, a.scimToken, "DELETE", `${USERS}/${created.body.id}`)).status, 204);
  });

  test("unknown SCIM resources are 404, unsupported SCIM endpoints 501, wrong methods 405 with Allow — all SCIM errors", async () => {
    for (const base of ["/v2/scim/v2", "/v2/scim"]) {
      // Okta and Entra probe /Groups; this service serves Users only (ResourceTypes lists User).
      scimError(await get(`${base}/Groups`), 404);
      scimError(
        await get(`${base}/Groups?filter=${encodeURIComponent('displayName eq "Admins"')}&excludedAttributes=members`),
        404,
      );
      scimError(
        await scim(running, a.scimToken, "POST", `${base}/Groups`, {
          schemas: ["urn:ietf:params:scim:schemas:core:2.0:Group"],
          displayName: "x",
        }),
        404,
      );
      scimError(await scim(running, a.scimToken, "PATCH", `${base}/Groups/abc`, {}), 404);
      scimError(await get(`${base}/Nothing`), 404);
      scimError(await get(base), 404);
      // RFC 7644 3.7, 3.4.3, 3.11: endpoints SCIM defines that this service does not offer.
      scimError(
        await scim(running, a.scimToken, "POST", `${base}/Bulk`, {
          schemas: ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"],
          Operations: [],
        }),
        501,
      );
      scimError(
        await scim(running, a.scimToken, "POST", `${base}/.search`, {
          schemas: ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
        }),
        501,
      );
      scimError(
        await scim(running, a.scimToken, "POST", `${base}/Users/.search`, {
          schemas: ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
        }),
        501,
      );
      scimError(await get(`${base}/Me`), 501);
      scimError(await scim(running, a.scimToken, "PATCH", `${base}/Me`, {}), 501);
      // "Me" as a user id is just an id.
      scimError(await get(`${base}/Users/Me`), 404);
      scimError(await scim(running, a.scimToken, "POST", `${base}/Users/Me`, newUser("me@edge.example")), 405);
      // A SCIM resource, another method.
      const wrong = await scim(running, a.scimToken, "DELETE", `${base}/Users`);
      scimError(wrong, 405);
      const allow = await fetch(`${running.baseUrl}${base}/Users`, {
        method: "PUT",
        headers: { authorization: `Bearer ${a.scimToken}` },
      });
      assert.equal(allow.status, 405);
      assert.deepEqual(allow.headers.get("allow")?.split(", ").sort(), ["GET", "HEAD", "POST"]);
      scimError(await scim(running, a.scimToken, "POST", `${base}/Users/${adaId}`, newUser("x@edge.example")), 405);
      scimError(await scim(running, a.scimToken, "DELETE", `${base}/ServiceProviderConfig`), 405);
    }
    // Outside the SCIM base URL the platform's ErrorResponse is unchanged.
    const other = await fetch(`${running.baseUrl}/v2/nothing-here`);
    assert.equal(other.status, 404);
    assert.match(other.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(
      ((await other.json()) as { errorMessages: Array<{ errorCode: string }> }).errorMessages[0]?.errorCode,
      "ROUTE_NOT_FOUND",
    );
  });

  /** A body over the default BODY_LIMIT_BYTES (the service here runs with the default). */
  const BIGGER_THAN_THE_BODY_LIMIT = loadConfig({}).http.bodyLimitBytes + 1;

  test("refusals before routing on SCIM paths are SCIM errors: 431 (fresh and reused connections), 414, 413, a URL not percent-encoded", async () => {
    // fetch: one write, usually a reused keep-alive connection.
    scimError(await scim(running, a.scimToken, "GET", `${USERS}?filter=x`, undefined), 400, "invalidFilter");
    const big = await fetch(`${running.baseUrl}${USERS}`, {
      headers: { authorization: `Bearer ${a.scimToken}`, "x-padding": "a".repeat(20_000) },
    });
    scimError(
      {
        status: big.status,
        contentType: big.headers.get("content-type") ?? "",
        location: null,
        body: await big.json(),
      },
      431,
    );
    // A raw connection whose headers arrive in several pieces: the request line is in the first.
    const split = await rawExchange([
      `GET ${USERS} HTTP/1.1\r\nhost: x\r\n`,
      ...Array.from({ length: 8 }, (_, i) => `x-h${i}: ${"b".repeat(3000)}\r\n`),
      "\r\n",
    ]);
    assertRawScimError(split, 431);
    // Outside SCIM the same refusal keeps the platform shape.
    const platform = await rawExchange([
      `GET /v2/api-users HTTP/1.1\r\nhost: x\r\nx-big: ${"c".repeat(20_000)}\r\n\r\n`,
    ]);
    assert.match(platform, /^HTTP\/1\.1 431 .*\r\ncontent-type: application\/json/s);

    scimError(await get(`${USERS}?filter=${"x".repeat(9_000)}`), 414);
    scimError(await get(`${USERS}/%FF`), 400, "invalidSyntax");
    scimError(
      await scim(
        running,
        a.scimToken,
        "POST",
        USERS,
        newUser("big@edge.example", { externalId: "e".repeat(BIGGER_THAN_THE_BODY_LIMIT) }),
      ),
      413,
    );
  });

  test("the SCIM token is taken only as issued: padding cut or added, other trailing bits, an extra space are 401", async () => {
    const token = a.scimToken;
    const ok = (header: string) => fetch(`${running.baseUrl}${USERS}?count=0`, { headers: { authorization: header } });
    assert.equal((await ok(`Bearer ${token}`)).status, 200);
    assert.equal((await ok(`bearer ${token}`)).status, 200, "the scheme is case-insensitive (RFC 9110 11.1)");
    const unpadded = token.replace(/=+$/, "");
    const variants = [
      `Bearer  ${token}`,
      `Bearer ${unpadded}${"=".repeat(Math.max(0, token.length - unpadded.length - 1))}`,
      `Bearer ${token}=`,
      `Bearer\t${token}`,
    ];
    if (unpadded !== token) variants.push(`Bearer ${unpadded}`);
    // Another last character that decodes to the same bytes (its unused low bits differ).
    const last = unpadded.at(-1)!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const padding = token.length - unpadded.length;
    if (padding > 0) {
      // With padding, the last character's lowest bit is unused: flipping it keeps the bytes.
      const sibling = alphabet[alphabet.indexOf(last) ^ 1]!;
      assert.ok(Buffer.from(unpadded.slice(0, -1) + sibling, "base64").equals(Buffer.from(token, "base64")));
      variants.push(`Bearer ${unpadded.slice(0, -1)}${sibling}${"=".repeat(padding)}`);
    }
    for (const header of variants) {
      const response = await ok(header);
      const body = scimError(
        {
          status: response.status,
          contentType: response.headers.get("content-type") ?? "",
          location: null,
          body: await response.json(),
        },
        401,
      );
      assert.match(body.detail, /SCIM token/, JSON.stringify(header.slice(0, 12)));
    }
  });

  /** Sends `pieces` on a new connection, 20 ms apart, and returns everything the server wrote. */
  function rawExchange(pieces: readonly string[]): Promise<string> {
    const { port } = new URL(running.baseUrl);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), "127.0.0.1", () => {
        (async () => {
          for (const piece of pieces) {
            if (socket.destroyed) break;
            socket.write(piece);
            await new Promise((r) => setTimeout(r, 20));
          }
        })().catch(reject);
      });
      let received = "";
      socket.on("data", (chunk) => (received += chunk.toString("latin1")));
      socket.on("close", () => resolve(received));
      socket.on("error", (error: NodeJS.ErrnoException) =>
        error.code === "ECONNRESET" || error.code === "EPIPE" ? resolve(received) : reject(error),
      );
    });
  }

  function assertRawScimError(raw: string, status: number) {
    assert.match(raw, new RegExp(`^HTTP/1\\.1 ${status} `), raw.slice(0, 200));
    const head = raw.slice(0, raw.indexOf("\r\n\r\n"));
    const contentType = /\r\ncontent-type: ([^\r]*)/i.exec(head)?.[1] ?? "";
    scimError(
      { status, contentType, location: null, body: JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4)) },
      status,
    );
  }
});
