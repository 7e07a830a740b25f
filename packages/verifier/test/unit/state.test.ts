// The verifier's revocation state and its cache, with no server: what the stream's events do to
// the tokens a resource server accepts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Lru } from "../../src/lru.js";
import { RevocationState, type BoundClaims } from "../../src/state.js";

const token = (client_id: string, gen: number, jti = "j-1", creds?: Array<[string, number]>): BoundClaims => ({
  client_id,
  gen,
  jti,
  ...(creds ? { creds } : {}),
});

const snapshot = (
  state: RevocationState,
  credentials: Array<[string, number]>,
  revoked: Array<[string, number]> = [],
  lastPage = true,
) =>
  state.snapshotPage({
    credentials: credentials.map(([clientId, generation]) => ({ clientId, generation })),
    revokedTokens: revoked.map(([jti, expiresAtMs]) => ({ jti, expiresAtMs })),
    lastPage,
  });

describe("RevocationState", () => {
  test("a client not known is accepted (a new API user's first generation); a known one only at its current generation", () => {
    const state = new RevocationState();
    assert.equal(state.isRevoked(token("api-new", 1)), false);
    snapshot(state, [["api-a", 2]]);
    assert.equal(state.isRevoked(token("api-a", 2)), false);
    assert.equal(state.isRevoked(token("api-a", 1)), true, "an older generation");
    assert.equal(state.isRevoked(token("api-a", 3)), true, "any other generation");
    assert.equal(state.isRevoked(token("api-b", 1)), false);
  });

  test("credential_changed moves the generation; generation 0 revokes every token of the client", () => {
    const state = new RevocationState();
    snapshot(state, [["api-a", 1]]);
    state.credentialChanged("api-a", 2);
    assert.equal(state.isRevoked(token("api-a", 1)), true);
    assert.equal(state.isRevoked(token("api-a", 2)), false);
    state.credentialChanged("api-a", 0);
    assert.equal(state.isRevoked(token("api-a", 2)), true);
    assert.equal(state.isRevoked(token("api-a", 0)), true, "a token claiming generation 0 is no exception");
    assert.equal(state.cursor, "", "events never move the cursor: only a heartbeat that vouched for them");
  });

  test("an exchanged token is refused when any credential it depends on (creds) has moved", () => {
    const state = new RevocationState();
    snapshot(state, [
      ["api-a", 1],
      ["api-b", 4],
    ]);
    const exchanged = token("api-a", 1, "j-x", [["api-b", 4]]);
    assert.equal(state.isRevoked(exchanged), false);
    state.credentialChanged("api-b", 5);
    assert.equal(state.isRevoked(exchanged), true);
  });

  test("token_revoked refuses that jti only, until it is pruned after its expiry", () => {
    const state = new RevocationState();
    snapshot(state, []);
    state.tokenRevoked("j-1", 10_000);
    assert.equal(state.isRevoked(token("api-a", 1, "j-1")), true);
    assert.equal(state.isRevoked(token("api-a", 1, "j-2")), false);
    assert.equal(state.prune(9_999), 0, "not before its expiry");
    assert.equal(state.isRevoked(token("api-a", 1, "j-1")), true);
    assert.equal(state.prune(10_001), 1);
    assert.equal(state.revokedTokens, 0);
  });

  test("a snapshot replaces everything, but only on its last page; the cursor does not move until a heartbeat vouches for it", () => {
    const state = new RevocationState();
    snapshot(state, [["api-a", 1]], [["j-old", Number.MAX_SAFE_INTEGER]]);
    state.credentialChanged("api-z", 7);
    snapshot(state, [["api-a", 2]], [], false);
    assert.equal(state.isRevoked(token("api-a", 1)), false, "a page before the last changes nothing yet");
    state.caughtUpTo("4");
    snapshot(state, [["api-b", 3]], [["j-new", Number.MAX_SAFE_INTEGER]], true);
    assert.equal(state.cursor, "4");
    assert.equal(state.isRevoked(token("api-a", 1)), true, "the first page's generation applies");
    assert.equal(state.isRevoked(token("api-b", 2)), true, "the last page's too");
    assert.equal(state.isRevoked(token("api-z", 1)), false, "a client only the old state knew is forgotten");
    assert.equal(state.isRevoked(token("api-c", 1, "j-old")), false, "the old revoked jtis are forgotten");
    assert.equal(state.isRevoked(token("api-c", 1, "j-new")), true);
  });

  test("a snapshot cut short by a disconnection is dropped: the next one starts from nothing", () => {
    const state = new RevocationState();
    snapshot(state, [["api-a", 1]]);
    snapshot(state, [["api-stale", 9]], [], false);
    state.abandonSnapshot();
    snapshot(state, [["api-a", 3]]);
    assert.equal(state.isRevoked(token("api-stale", 1)), false, "the abandoned page did not leak in");
    assert.equal(state.isRevoked(token("api-a", 1)), true);
  });

  test("the cursor only moves forward, numerically (heartbeats repeat the latest)", () => {
    const state = new RevocationState();
    state.caughtUpTo("9");
    state.caughtUpTo("10");
    assert.equal(state.cursor, "10", "10 after 9, not a string comparison");
    state.caughtUpTo("8");
    state.caughtUpTo("");
    assert.equal(state.cursor, "10");
  });
});

test("a forgotten cursor (the service refused it) asks for a snapshot, whose lower cursor then stands", () => {
  const state = new RevocationState();
  snapshot(state, [["api-a", 2]]);
  state.caughtUpTo("900");
  state.forgetCursor();
  assert.equal(state.cursor, "");
  assert.equal(state.isRevoked(token("api-a", 1)), true, "what it knew still holds until the snapshot");
  snapshot(state, [["api-a", 3]]);
  state.caughtUpTo("12");
  assert.equal(state.cursor, "12");
  state.credentialChanged("api-a", 4);
  state.caughtUpTo("13");
  assert.equal(state.cursor, "13");
});

describe("Lru", () => {
  test("bounded: the entry not read since it was added (or last spared) goes first; a read spares an entry once", () => {
    const lru = new Lru<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    assert.equal(lru.get("a"), 1);
    lru.set("c", 3);
    assert.equal(lru.get("b"), undefined, "b was the least recent");
    assert.equal(lru.get("a"), 1);
    assert.equal(lru.get("c"), 3);
    assert.equal(lru.size, 2);
  });
});
