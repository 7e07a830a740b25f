import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { loadMasterKey } from "../../src/config/key-material.js";
import { OperatorCredential, operatorTokenFile } from "../../src/domain/operator/operator-credential.js";

describe("secrets generated on first start", () => {
  test("the operator token and master key are created once, owner-only, and stable across restarts", () => {
    const dataDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-secrets-")), "data");
    const first = OperatorCredential.load(undefined, dataDir);
    const key = loadMasterKey(undefined, dataDir);
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o700);
    for (const file of [operatorTokenFile(dataDir), path.join(dataDir, "master.key")]) {
      assert.equal(fs.statSync(file).mode & 0o777, 0o600, file);
    }
    assert.ok(first.token.length >= 43, "256 bits");
    const again = OperatorCredential.load(undefined, dataDir);
    assert.equal(again.token, first.token);
    assert.deepEqual(loadMasterKey(undefined, dataDir), key);
    assert.equal(first.credential.matches(first.token), true);
    assert.equal(first.credential.matches(first.token + "x"), false);
    assert.equal(first.credential.matches(""), false);
  });

  test("OPERATOR_TOKEN and MASTER_KEY from the environment win, and no file is written", () => {
    const dataDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-secrets-")), "data");
    const { credential, token } = OperatorCredential.load("from-env-token", dataDir);
    assert.equal(token, "from-env-token");
    assert.equal(credential.matches("from-env-token"), true);
    assert.equal(fs.existsSync(operatorTokenFile(dataDir)), false);
    const master = Buffer.alloc(32, 7);
    assert.deepEqual(loadMasterKey(master.toString("base64"), dataDir), master);
    assert.throws(() => loadMasterKey(Buffer.alloc(16).toString("base64"), dataDir), /at least 32/);
  });
});
