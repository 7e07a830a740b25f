// The verifier's idea of an access token is the service's: same algorithm, same typ, same set of
// required claims (the package cannot import the server, so this test holds the two together).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ACCESS_TOKEN_RULES } from "../../../../src/domain/tokens/access-tokens.js";
import { SIGNING_ALG, VERIFICATION_CLOCK_TOLERANCE_SECONDS } from "../../../../src/domain/tokens/signing-key-ring.js";
import { ALGORITHM, hasRequiredClaims, REQUIRED_CLAIMS, TOKEN_TYPE } from "../../src/token-format.js";

test("the algorithm, typ and required claims are the service's own", () => {
  assert.equal(ALGORITHM, SIGNING_ALG);
  assert.deepEqual([...ACCESS_TOKEN_RULES.algorithms], [ALGORITHM]);
  assert.equal(TOKEN_TYPE, ACCESS_TOKEN_RULES.typ);
  assert.deepEqual(
    Object.keys(REQUIRED_CLAIMS)
      .filter((c) => c !== "iss")
      .sort(),
    [...ACCESS_TOKEN_RULES.requiredClaims].sort(),
  );
  assert.equal(VERIFICATION_CLOCK_TOLERANCE_SECONDS, 5, "the verifier's default tolerance (README) is the service's");
});

test("hasRequiredClaims: each required claim missing or of another type fails; nbf and creds are checked when present", () => {
  const good = {
    iss: "i",
    sub: "s",
    jti: "j",
    client_id: "c",
    tmc_id: "t",
    role: "TMC_ADMIN",
    exp: 2,
    iat: 1,
    gen: 1,
    aud: ["a", "b"],
  };
  assert.equal(hasRequiredClaims(good), true);
  assert.equal(hasRequiredClaims({ ...good, aud: "a", creds: [["c2", 3]], nbf: 1 }), true);
  for (const name of Object.keys(REQUIRED_CLAIMS)) {
    const { [name]: _dropped, ...missing } = good as Record<string, unknown>;
    assert.equal(hasRequiredClaims(missing), false, `${name} missing`);
    assert.equal(hasRequiredClaims({ ...good, [name]: { wrong: true } }), false, `${name} an object`);
  }
  assert.equal(hasRequiredClaims({ ...good, gen: 1.5 }), false, "gen not an integer");
  assert.equal(hasRequiredClaims({ ...good, aud: ["a", 1] }), false, "aud with a number");
  assert.equal(hasRequiredClaims({ ...good, nbf: "1" }), false, "nbf a string");
  assert.equal(hasRequiredClaims({ ...good, creds: [["c2", "3"]] }), false, "creds generation a string");
  assert.equal(hasRequiredClaims({ ...good, creds: "c2" }), false, "creds not an array");
});
