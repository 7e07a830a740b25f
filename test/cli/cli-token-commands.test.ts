import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, describe, test } from "node:test";
import { newStorage, serviceEnv } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";

const storage = newStorage();
// No server answers at SERVER_URL: the CLI runs the RPCs in-process on the storage.
const env = { ...process.env, ...serviceEnv(storage), SERVER_URL: "http://127.0.0.1:1", LOG_LEVEL: "warn" };

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], { env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("CLI: signing keys and trusted issuers", { timeout: 120_000 }, () => {
  after(() => dropStorage(storage));

  test("keys rotate starts a new signing key and keeps the previous ones published", async () => {
    // The first command on this fresh storage: --init creates the store (issue 19).
    const first = await cli("keys", "rotate", "--init");
    assert.equal(first.code, 0, first.stderr);
    const one = JSON.parse(first.stdout);
    const second = JSON.parse((await cli("keys", "rotate")).stdout);
    assert.notEqual(second.kid, one.kid);
    assert.deepEqual(second.publishedKids.slice(0, 2), [second.kid, one.kid]);
  });

  test("trusted-issuer add takes exactly one of --jwks-uri and --jwks, a real JWKS, and an --audience", async () => {
    const tmc = JSON.parse((await cli("tmc", "create", "--name", "IdP TMC")).stdout);
    // README: an issuer is registered with the audience its tokens carry for this platform.
    const audience = ["--audience", "https://travel.test/token-exchange"];
    const added = await cli("trusted-issuer", "add", "--tmc-id", tmc.tmcId, "--issuer", "https://idp.example", "--jwks-uri", "https://idp.example/jwks.json", ...audience);
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
      const refused = await cli("trusted-issuer", "add", "--tmc-id", tmc.tmcId, "--issuer", "https://idp2.example", ...args);
      assert.equal(refused.code, 2, `${args.join(" ")}: ${refused.stderr}`);
      assert.equal(refused.stdout, "");
    }
  });
});
