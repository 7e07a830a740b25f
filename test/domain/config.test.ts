import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { ConfigError, loadConfig } from "../../src/config/config.js";

describe("configuration", () => {
  test("defaults give the embedded single-command start", () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, "0.0.0.0");
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.redisUrl, undefined);
    assert.equal(config.dataDir, path.resolve("./data"));
    assert.equal(config.serverUrl, "http://127.0.0.1:8080");
    assert.equal(config.databaseSchema, "public");
  });

  test("values are read and checked", () => {
    const config = loadConfig({ PORT: "9090", HOST: "::1", DATABASE_URL: "postgres://x/y", REDIS_URL: " redis://r ", BODY_LIMIT_BYTES: "2048" });
    assert.equal(config.port, 9090);
    assert.equal(config.serverUrl, "http://[::1]:9090");
    assert.equal(config.redisUrl, "redis://r");
    assert.equal(config.bodyLimitBytes, 2048);
    assert.throws(() => loadConfig({ PORT: "http" }), ConfigError);
    assert.throws(() => loadConfig({ PORT: "70000" }), ConfigError);
    assert.throws(() => loadConfig({ DATABASE_SCHEMA: "Robert'); drop" }), ConfigError);
    assert.throws(() => loadConfig({ BODY_LIMIT_BYTES: "1" }), ConfigError);
  });
});
