import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { loadConfig } from "../../../src/config/config.js";
import { loadSecrets, operatorTokenFile } from "../../../src/config/secret-files.js";
import { OperatorCredential } from "../../../src/domain/operator/operator-credential.js";

const tempDirs: string[] = [];
function newDataDir(): string {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), "auth-svc-secrets-"));
  tempDirs.push(parent);
  return path.join(parent, "data");
}
process.on("exit", () => tempDirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

describe("secrets generated on first start", () => {
  test("the operator token and master key are created once, owner-only, and stable across restarts", () => {
    const dataDir = newDataDir();
    const config = loadConfig({ DATA_DIR: dataDir });
    const first = loadSecrets(config);
    assert.equal(fs.statSync(dataDir).mode & 0o777, 0o700);
    for (const file of [operatorTokenFile(dataDir), path.join(dataDir, "master.key")]) {
      assert.equal(fs.statSync(file).mode & 0o777, 0o600, file);
    }
    assert.ok(first.operatorToken.length >= 43, "256 bits");
    assert.equal(first.masterKey.length, 32);
    assert.deepEqual(first.sources, { masterKey: path.join(dataDir, "master.key"), operatorToken: operatorTokenFile(dataDir) });
    const again = loadSecrets(config);
    assert.equal(again.operatorToken, first.operatorToken);
    assert.deepEqual(again.masterKey, first.masterKey);
    const credential = new OperatorCredential(first.operatorToken);
    assert.equal(credential.matches(first.operatorToken), true);
    assert.equal(credential.matches(first.operatorToken + "x"), false);
    assert.equal(credential.matches(""), false);
  });

  test("OPERATOR_TOKEN and MASTER_KEY from the environment win, and no file is written", () => {
    const dataDir = newDataDir();
    const master = Buffer.alloc(32, 7);
    const fromEnv = "Kq3vX9pLm2Rt8Wz5Yb7Nc4Hd6Gf1Js0Ae";
    const secrets = loadSecrets(loadConfig({ DATA_DIR: dataDir, OPERATOR_TOKEN: fromEnv, MASTER_KEY: master.toString("base64") }));
    assert.equal(secrets.operatorToken, fromEnv);
    assert.deepEqual(secrets.masterKey, master);
    assert.deepEqual(secrets.sources, { masterKey: "environment", operatorToken: "environment" });
    assert.equal(fs.existsSync(operatorTokenFile(dataDir)), false);
    assert.throws(() => loadSecrets(loadConfig({ DATA_DIR: dataDir, MASTER_KEY: Buffer.alloc(16).toString("base64") })), /at least 32/);
  });

  test("a short or repetitive OPERATOR_TOKEN is refused at start, naming the variable", () => {
    const dataDir = newDataDir();
    for (const weak of ["from-env-token", "a".repeat(64), "abcabcabcabcabcabcabcabcabcabcabcabc"]) {
      assert.throws(() => loadSecrets(loadConfig({ DATA_DIR: dataDir, OPERATOR_TOKEN: weak })), /^Error: OPERATOR_TOKEN must be at least 32|OPERATOR_TOKEN is not random enough/, weak);
    }
  });
});
