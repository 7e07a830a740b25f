import assert from "node:assert/strict";
import { test } from "node:test";
import { withoutTypeNames } from "../../../src/rpc/errors/protocol-errors.js";

test("decoder complaints lose their protobuf type names", () => {
  assert.equal(
    withoutTypeNames('cannot decode field travel.apiuser.v2.ListApiUsersRequest.limit from JSON: "0x1z"'),
    'cannot decode field limit from JSON: "0x1z"',
  );
  assert.equal(
    withoutTypeNames("cannot decode message travel.auth.v2.FetchOauth2TokenRequest from JSON: [1]"),
    "cannot decode message from JSON: [1]",
  );
  assert.equal(
    withoutTypeNames('cannot decode enum travel.apiuser.v2.ApiUserRole from JSON: "X"'),
    'cannot decode message from JSON: "X"',
  );
  assert.equal(withoutTypeNames('key "x" is unknown for google.protobuf.Struct'), 'key "x" is unknown for message');
  assert.equal(withoutTypeNames("unexpected end of JSON input"), "unexpected end of JSON input");
});
