// The verifier's staleness bound is counted in the service's heartbeats (the package cannot import
// the server, so this test holds the two together).
import assert from "node:assert/strict";
import { test } from "node:test";
import { CHANGE_STREAM_HEARTBEAT_MS } from "../../../../src/domain/credential-changes/credential-change-stream.js";
import { DEFAULT_STALE_AFTER_MS, STREAM_HEARTBEAT_MS } from "../../src/index.js";

test("the default staleness bound is 3 of the service's heartbeats (1.5 s at 500 ms)", () => {
  assert.equal(STREAM_HEARTBEAT_MS, CHANGE_STREAM_HEARTBEAT_MS);
  assert.equal(DEFAULT_STALE_AFTER_MS, 3 * CHANGE_STREAM_HEARTBEAT_MS);
  assert.equal(DEFAULT_STALE_AFTER_MS, 1500);
});
