import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { restRoutesOf } from "../../../src/gateway/http-rules.js";
import { dialectPathSpaces, pathSpaceOf } from "../../../src/gateway/path-dialects.js";
import { ErrorDialect } from "../../../src/rpc/contract.js";
import { contractServices } from "../../../src/rpc/areas.js";

/** Which paths answer in a dialect even where no route matched (SCIM's 404/405/501, refusals before routing). */
describe("dialect path spaces, derived from the contract", () => {
  const routes = restRoutesOf(contractServices);
  const spaces = dialectPathSpaces(routes);

  test("SCIM owns /v2/scim/ and nothing else; OAuth (routes spread over /) owns no path space", () => {
    assert.deepEqual(
      spaces.map((s) => [ErrorDialect[s.dialect], s.prefix]),
      [["SCIM", "/v2/scim/"]],
    );
    for (const url of ["/v2/scim", "/v2/scim/", "/v2/scim/v2/Groups?x=1", "/v2/scim/Bulk", "/v2/scim/v2/Users/abc"]) {
      assert.equal(pathSpaceOf(spaces, url)?.dialect, ErrorDialect.SCIM, url);
    }
    for (const url of [
      "/v2/scimx",
      "/v2/api-users",
      "/v2/auth/oauth2-token",
      "/get-auth-token",
      "/",
      "/v2/users/v2/scim/",
    ]) {
      assert.equal(pathSpaceOf(spaces, url), undefined, url);
    }
  });

  test("a concrete path matches the routes of its template, with or without a trailing slash, variables one segment", () => {
    const scim = spaces[0]!;
    const verbsOf = (path: string) =>
      [...new Set(scim.routes.filter((r) => r.matches(path)).map((r) => r.route.verb))].sort();
    assert.deepEqual(verbsOf("/v2/scim/v2/Users"), ["GET", "POST"]);
    assert.deepEqual(verbsOf("/v2/scim/Users/"), ["GET", "POST"]);
    assert.deepEqual(verbsOf("/v2/scim/v2/Users/4b1c"), ["DELETE", "GET", "PATCH", "PUT"]);
    assert.deepEqual(verbsOf("/v2/scim/v2/Users/a/b"), []);
    assert.deepEqual(verbsOf("/v2/scim/v2/Groups"), []);
  });
});
