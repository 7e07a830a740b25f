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
    assert.deepEqual(first.sources, {
      masterKey: path.join(dataDir, "master.key"),
      operatorToken: operatorTokenFile(dataDir),
    });
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
    const secrets = loadSecrets(
      loadConfig({ DATA_DIR: dataDir, OPERATOR_TOKEN: fromEnv, MASTER_KEY: master.toString("base64") }),
    );
    assert.equal(secrets.operatorToken, fromEnv);
    assert.deepEqual(secrets.masterKey, master);
    assert.deepEqual(secrets.sources, { masterKey: "environment", operatorToken: "environment" });
    assert.equal(fs.existsSync(operatorTokenFile(dataDir)), false);
    assert.throws(
      () => loadSecrets(loadConfig({ DATA_DIR: dataDir, MASTER_KEY: Buffer.alloc(16).toString("base64") })),
      /at least 32/,
    );
  });

  test("a short or repetitive OPERATOR_TOKEN is refused at start, naming the variable", () => {
    const dataDir = newDataDir();
    for (const weak of ["from-env-token", "a".repeat(64), "abcabcabcabcabcabcabcabcabcabcabcabc"]) {
      assert.throws(
        () => loadSecrets(loadConfig({ DATA_DIR: dataDir, OPERATOR_TOKEN: weak })),
        /^Error: OPERATOR_TOKEN must be at least 32|OPERATOR_TOKEN is not random enough/,
        weak,
      );
    }
  });
});

describe("secret settings from files (NAME_FILE)", () => {
  /** A secret file as Docker or Kubernetes mounts it: owner-only, with a trailing newline. */
  const secretFile = (content: string): string => {
    const file = path.join(newDataDir(), "..", `secret-${tempDirs.length}-${Math.random().toString(36).slice(2)}`);
    fs.writeFileSync(file, content, { mode: 0o600 });
    return file;
  };

  test("MASTER_KEY_FILE, OPERATOR_TOKEN_FILE, DATABASE_URL_FILE and REDIS_URL_FILE are read once at start; the start log names the files", () => {
    const dataDir = newDataDir();
    const master = Buffer.alloc(32, 9);
    const token = "Vb8Nq2Lx5Tz7Wr3Ks9Pm4Hj6Dg1Fc0Ya";
    const files = {
      MASTER_KEY_FILE: secretFile(`${master.toString("base64")}\n`),
      OPERATOR_TOKEN_FILE: secretFile(`${token}\n`),
      DATABASE_URL_FILE: secretFile("postgres://app:s3cret@db.internal:5432/auth\n"),
      REDIS_URL_FILE: secretFile("redis://:s3cret@cache.internal:6379\r\n"),
    };
    const config = loadConfig({ DATA_DIR: dataDir, ...files });
    assert.equal(config.storage.databaseUrl, "postgres://app:s3cret@db.internal:5432/auth");
    assert.equal(config.storage.redisUrl, "redis://:s3cret@cache.internal:6379");
    const secrets = loadSecrets(config);
    assert.deepEqual(secrets.masterKey, master);
    assert.equal(secrets.operatorToken, token);
    assert.deepEqual(secrets.sources, { masterKey: files.MASTER_KEY_FILE, operatorToken: files.OPERATOR_TOKEN_FILE });
    assert.equal(fs.existsSync(operatorTokenFile(dataDir)), false, "nothing generated");
    // Read once: changing the file later changes nothing for the running configuration.
    fs.writeFileSync(files.DATABASE_URL_FILE, "postgres://other/db");
    assert.equal(config.storage.databaseUrl, "postgres://app:s3cret@db.internal:5432/auth");
  });

  test("DATABASE_DIRECT_URL (migrations and LISTEN) comes from the environment or DATABASE_DIRECT_URL_FILE, and defaults to DATABASE_URL", () => {
    const dataDir = newDataDir();
    const pooled = "postgres://app:s3cret@pgbouncer.internal:6432/auth";
    const direct = "postgres://app:s3cret@db.internal:5432/auth";
    assert.equal(loadConfig({ DATA_DIR: dataDir, DATABASE_URL: pooled }).storage.databaseDirectUrl, pooled);
    const fromFile = loadConfig({
      DATA_DIR: dataDir,
      DATABASE_URL: pooled,
      DATABASE_DIRECT_URL_FILE: secretFile(`${direct}\n`),
    }).storage;
    assert.deepEqual([fromFile.databaseUrl, fromFile.databaseDirectUrl], [pooled, direct]);
    assert.throws(
      () =>
        loadConfig({
          DATA_DIR: dataDir,
          DATABASE_URL: pooled,
          DATABASE_DIRECT_URL: direct,
          DATABASE_DIRECT_URL_FILE: secretFile(direct),
        }),
      /^Error: Set DATABASE_DIRECT_URL or DATABASE_DIRECT_URL_FILE, not both$/,
    );
    // The embedded database has no direct connection; the message never quotes the URL (it may hold a password).
    assert.throws(
      () => loadConfig({ DATA_DIR: dataDir, DATABASE_DIRECT_URL: direct }),
      (error: Error) =>
        /^DATABASE_DIRECT_URL needs DATABASE_URL/.test(error.message) && !error.message.includes("s3cret"),
    );
    assert.equal(loadConfig({ DATA_DIR: dataDir }).storage.databaseDirectUrl, undefined);
  });

  test("both NAME and NAME_FILE, an unreadable file or an empty one is refused at start, naming the variable and never the content", () => {
    const dataDir = newDataDir();
    const url = secretFile("postgres://app:s3cret@db/auth");
    assert.throws(
      () => loadConfig({ DATA_DIR: dataDir, DATABASE_URL: "postgres://x/y", DATABASE_URL_FILE: url }),
      /^Error: Set DATABASE_URL or DATABASE_URL_FILE, not both$/,
    );
    assert.throws(
      () => loadConfig({ DATA_DIR: dataDir, REDIS_URL_FILE: "/nonexistent/redis-url" }),
      /^Error: REDIS_URL_FILE: cannot read \/nonexistent\/redis-url \(ENOENT\)$/,
    );
    assert.throws(
      () => loadConfig({ DATA_DIR: dataDir, MASTER_KEY_FILE: secretFile("\n") }),
      /MASTER_KEY_FILE: .* is empty$/,
    );
    const weak = secretFile("short-token\n");
    assert.throws(
      () => loadSecrets(loadConfig({ DATA_DIR: dataDir, OPERATOR_TOKEN_FILE: weak })),
      (error: Error) =>
        error.message.startsWith(`OPERATOR_TOKEN_FILE (${weak}) must be at least 32`) &&
        !error.message.includes("short-token"),
    );
  });
});
