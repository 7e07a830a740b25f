import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { cliAgainstServer, type Run } from "./cli-against-server.js";

let cli: (...args: string[]) => Promise<Run>;

describe("CLI: signing keys and trusted issuers", { timeout: 600_000 }, () => {
  cli = cliAgainstServer();

  test("keys rotate publishes the next key, keys rotate --now signs at once and withdraws the rest, keys list shows states", async () => {
    const first = await cli("keys", "rotate");
    assert.equal(first.code, 0, first.stderr);
    const next = JSON.parse(first.stdout);
    assert.equal(next.publishedKids[0], next.kid);
    assert.ok(
      Date.parse(next.activatesAt) > Date.now() + 800_000,
      "activates after SIGNING_KEY_PREPUBLISH_SECONDS (900 s)",
    );
    const listed = JSON.parse((await cli("keys", "list")).stdout);
    assert.deepEqual(
      listed.keys.map((k: { state: string }) => k.state),
      ["NEXT", "ACTIVE"],
    );
    assert.equal(listed.keys[0].kid, next.kid);

    // A second planned rotation while this one waits is refused (test/tokens/legacy-introspection-keys.test.ts).
    const emergency = JSON.parse((await cli("keys", "rotate", "--now")).stdout);
    assert.deepEqual(emergency.publishedKids, [emergency.kid]);
    assert.ok(emergency.withdrawnKids.includes(next.kid) && emergency.withdrawnKids.includes(listed.keys[1].kid));
  });

  test("trusted-issuer add takes exactly one of --jwks-uri and --jwks, a real JWKS, and an --audience", async () => {
    const tmc = JSON.parse((await cli("tmc", "create", "--name", "IdP TMC")).stdout);
    // docs/tokens.md: an issuer is registered with the audience its tokens carry for this platform.
    const audience = ["--audience", "https://travel.test/token-exchange"];
    const added = await cli(
      "trusted-issuer",
      "add",
      "--tmc-id",
      tmc.tmcId,
      "--issuer",
      "https://idp.example",
      "--jwks-uri",
      "https://idp.example/jwks.json",
      ...audience,
    );
    assert.equal(added.code, 0, added.stderr);
    assert.deepEqual(JSON.parse(added.stdout), { tmcId: tmc.tmcId, issuer: "https://idp.example" });
    for (const args of [
      [...audience],
      ["--jwks-uri", "https://a.example/j", "--jwks", '{"keys":[]}', ...audience],
      ["--jwks", '{"keys":[]}', ...audience],
      ["--jwks", "not json", ...audience],
      ["--jwks-uri", "not a url", ...audience],
      ["--jwks-uri", "https://idp2.example/jwks.json"],
    ]) {
      const refused = await cli(
        "trusted-issuer",
        "add",
        "--tmc-id",
        tmc.tmcId,
        "--issuer",
        "https://idp2.example",
        ...args,
      );
      assert.equal(refused.code, 2, `${args.join(" ")}: ${refused.stderr}`);
      assert.equal(refused.stdout, "");
    }
  });
});
