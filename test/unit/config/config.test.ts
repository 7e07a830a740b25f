import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { ConfigError, isLoopbackHost, loadConfig } from "../../../src/config/config.js";

describe("configuration", () => {
  test("defaults give the embedded single-command start", () => {
    const config = loadConfig({});
    assert.equal(config.http.port, 8080);
    assert.equal(config.http.host, "0.0.0.0");
    assert.equal(config.storage.databaseUrl, undefined);
    assert.equal(config.storage.redisUrl, undefined);
    assert.equal(config.storage.dataDir, path.resolve("./data"));
    assert.equal(config.serverUrl, "http://127.0.0.1:8080");
    assert.equal(config.storage.databaseSchema, "public");
  });

  // Discovery through http://127.0.0.1:PORT failed RFC 8414's issuer comparison because
  // the issuer defaulted to localhost whatever HOST said.
  test("the issuer defaults to the address clients use: SERVER_URL, else HOST when it names one address, else localhost", () => {
    assert.equal(loadConfig({}).tokens.issuer, "http://localhost:8080");
    assert.equal(loadConfig({ HOST: "::", PORT: "9000" }).tokens.issuer, "http://localhost:9000");
    assert.equal(loadConfig({ HOST: "127.0.0.1", PORT: "9000" }).tokens.issuer, "http://127.0.0.1:9000");
    assert.equal(loadConfig({ HOST: "::1", PORT: "9000" }).tokens.issuer, "http://[::1]:9000");
    assert.equal(
      loadConfig({ HOST: "127.0.0.1", SERVER_URL: "https://auth.example.com/" }).tokens.issuer,
      "https://auth.example.com",
    );
    assert.equal(
      loadConfig({ HOST: "127.0.0.1", TOKEN_ISSUER: "https://iss.example.com" }).tokens.issuer,
      "https://iss.example.com",
    );
    assert.equal(loadConfig({ HOST: "127.0.0.1", PORT: "9000" }).tokens.audience, "http://127.0.0.1:9000/v2");
  });

  test("values are read and checked", () => {
    const config = loadConfig({
      PORT: "9090",
      HOST: "::1",
      DATABASE_URL: "postgres://x/y",
      REDIS_URL: " redis://r ",
      BODY_LIMIT_BYTES: "2048",
    });
    assert.equal(config.http.port, 9090);
    assert.equal(config.serverUrl, "http://[::1]:9090");
    assert.equal(config.storage.redisUrl, "redis://r");
    assert.equal(config.http.bodyLimitBytes, 2048);
    assert.throws(() => loadConfig({ PORT: "http" }), ConfigError);
    assert.throws(() => loadConfig({ PORT: "70000" }), ConfigError);
    assert.throws(() => loadConfig({ DATABASE_SCHEMA: "Robert'); drop" }), ConfigError);
    assert.throws(() => loadConfig({ BODY_LIMIT_BYTES: "1" }), ConfigError);
  });

  test("every timeout and interval is a setting with a default, checked like the rest", () => {
    const defaults = loadConfig({});
    assert.deepEqual(defaults.jobs, {
      signingKeyReloadIntervalMs: 60_000,
      credentialReconcileIntervalMs: 500,
      credentialLogPruneIntervalMs: 60_000,
      auditFlushIntervalMs: 250,
      auditPartitionIntervalMs: 3_600_000,
      healthWatchIntervalMs: 5_000,
    });
    // The drain (5 s), then in-flight requests (10 s), then 5 s of slack.
    assert.equal(defaults.http.shutdownDrainMs, 5_000);
    assert.equal(defaults.http.shutdownDeadlineMs, 20_000);
    assert.equal(loadConfig({ SHUTDOWN_TIMEOUT_MS: "500", SHUTDOWN_DRAIN_MS: "0" }).http.shutdownDeadlineMs, 5_500);
    assert.equal(defaults.http.readinessIntervalMs, 1_000);
    assert.equal(defaults.storage.databasePoolMin, 4);
    // The minimum follows a smaller maximum by default, and may not exceed one it is given.
    assert.equal(loadConfig({ DATABASE_POOL_MAX: "2" }).storage.databasePoolMin, 2);
    assert.throws(
      () => loadConfig({ DATABASE_POOL_MAX: "2", DATABASE_POOL_MIN: "3" }),
      /DATABASE_POOL_MIN must not exceed DATABASE_POOL_MAX/,
    );
    assert.equal(defaults.http.keepAliveTimeoutMs, 5_000);
    assert.equal(defaults.storage.databaseAcquireTimeoutMs, 500);
    assert.equal(defaults.tokens.credentialCacheSeconds, 300);
    const tuned = loadConfig({
      CREDENTIAL_RECONCILE_INTERVAL_MS: "50",
      HTTP_REQUEST_TIMEOUT_MS: "1500",
      AUDIT_BATCH_SIZE: "10",
    });
    assert.equal(tuned.jobs.credentialReconcileIntervalMs, 50);
    assert.equal(tuned.http.requestTimeoutMs, 1500);
    assert.equal(tuned.audit.batchSize, 10);
    assert.throws(
      () => loadConfig({ CREDENTIAL_RECONCILE_INTERVAL_MS: "soon" }),
      /CREDENTIAL_RECONCILE_INTERVAL_MS must be a whole number/,
    );
    assert.equal(loadConfig({ CREDENTIAL_LOG_PRUNE_INTERVAL_MS: "5000" }).jobs.credentialLogPruneIntervalMs, 5_000);
    assert.throws(
      () => loadConfig({ CREDENTIAL_LOG_PRUNE_INTERVAL_MS: "hourly" }),
      /CREDENTIAL_LOG_PRUNE_INTERVAL_MS must be a whole number/,
    );
    assert.throws(() => loadConfig({ DATABASE_POOL_MAX: "0" }), /DATABASE_POOL_MAX must be between 1/);
  });

  test("the signing-key pre-publication period: 15 minutes by default, and longer than the reload interval", () => {
    assert.equal(loadConfig({}).tokens.signingKeyPrepublishSeconds, 900);
    assert.equal(
      loadConfig({ SIGNING_KEY_PREPUBLISH_SECONDS: "2", SIGNING_KEY_RELOAD_INTERVAL_MS: "500" }).tokens
        .signingKeyPrepublishSeconds,
      2,
    );
    assert.throws(() => loadConfig({ SIGNING_KEY_PREPUBLISH_SECONDS: "60" }), {
      message:
        "SIGNING_KEY_PREPUBLISH_SECONDS (60 s) must be longer than SIGNING_KEY_RELOAD_INTERVAL_MS (60000 ms): an instance that missed the announcement must still load the next key before it signs",
    });
    assert.throws(
      () => loadConfig({ SIGNING_KEY_PREPUBLISH_SECONDS: "0" }),
      /SIGNING_KEY_PREPUBLISH_SECONDS must be between 1/,
    );
  });

  test("lock waits, the jobs pool and the per-principal budget have sane defaults; a lock timeout at or above the query timeout is refused", () => {
    const config = loadConfig({});
    assert.deepEqual(
      [
        config.storage.databaseLockWaitMs,
        config.storage.databaseLockTimeoutMs,
        config.storage.databaseQueryTimeoutMs,
        config.storage.databaseJobsPoolMax,
      ],
      [2_000, 500, 1_000, 2],
    );
    assert.deepEqual(config.principalBudget, { rate: { points: 5_000, durationSeconds: 10 } });
    assert.deepEqual(config.admission, {
      partyShare: 0.5,
      unauthenticatedShare: 0.5,
      queuePerParty: 64,
      queueWaitMs: 1_000,
      limitMax: 40,
    });
    assert.equal(loadConfig({ DATABASE_POOL_MAX: "20" }).admission.limitMax, 80, "four times the pool");
    assert.equal(loadConfig({ ADMISSION_PARTY_SHARE_PERCENT: "25" }).admission.partyShare, 0.25);
    assert.equal(
      loadConfig({ DATABASE_QUERY_TIMEOUT_MS: "3000" }).storage.databaseLockTimeoutMs,
      1_500,
      "half the query timeout",
    );
    assert.deepEqual(loadConfig({ RPC_RATE_LIMIT_PER_PRINCIPAL: "100/1" }).principalBudget.rate, {
      points: 100,
      durationSeconds: 1,
    });
    assert.throws(
      () => loadConfig({ DATABASE_LOCK_TIMEOUT_MS: "1000" }),
      /DATABASE_LOCK_TIMEOUT_MS must be below DATABASE_QUERY_TIMEOUT_MS/,
    );
    assert.throws(() => loadConfig({ ADMISSION_PARTY_SHARE_PERCENT: "0" }), ConfigError);
    assert.throws(
      () => loadConfig({ REQUEST_DEADLINE_MS: "1000", ADMISSION_QUEUE_WAIT_MS: "600" }),
      /ADMISSION_QUEUE_WAIT_MS must be at most half of REQUEST_DEADLINE_MS/,
    );
    assert.throws(() => loadConfig({ RPC_RATE_LIMIT_PER_PRINCIPAL: "lots" }), ConfigError);
  });

  test("migrations: on at start by default; MIGRATE_ON_START=false waits for a migration job, both waits bounded", () => {
    const defaults = loadConfig({}).storage;
    assert.deepEqual(
      [defaults.migrateOnStart, defaults.migrationWaitTimeoutMs, defaults.migrationLockTimeoutMs],
      [true, 600_000, 600_000],
    );
    const job = loadConfig({
      MIGRATE_ON_START: "false",
      MIGRATION_WAIT_TIMEOUT_MS: "30000",
      MIGRATION_LOCK_TIMEOUT_MS: "5000",
    }).storage;
    assert.deepEqual(
      [job.migrateOnStart, job.migrationWaitTimeoutMs, job.migrationLockTimeoutMs],
      [false, 30_000, 5_000],
    );
    assert.equal(loadConfig({ MIGRATE_ON_START: "true" }).storage.migrateOnStart, true);
    for (const wrong of ["no", "0", "FALSE", "yes"]) {
      assert.throws(() => loadConfig({ MIGRATE_ON_START: wrong }), /MIGRATE_ON_START must be true or false/, wrong);
    }
    assert.throws(() => loadConfig({ MIGRATION_WAIT_TIMEOUT_MS: "-1" }), ConfigError);
    assert.throws(() => loadConfig({ MIGRATION_LOCK_TIMEOUT_MS: "soon" }), ConfigError);
  });

  test("HTTP/2 stream budget: defaults as Go and nginx (100 concurrent streams), each setting checked", () => {
    const defaults = loadConfig({}).http;
    assert.deepEqual(
      {
        streams: defaults.h2MaxConcurrentStreams,
        burst: defaults.h2ResetBurst,
        rate: defaults.h2ResetsPerSecond,
        sessions: defaults.h2MaxSessionsPerAddress,
        instanceBurst: defaults.h2InstanceResetBurst,
        instanceRate: defaults.h2InstanceResetsPerSecond,
      },
      { streams: 100, burst: 200, rate: 20, sessions: 64, instanceBurst: 1000, instanceRate: 100 },
    );
    const instance = loadConfig({ HTTP2_INSTANCE_RESET_BURST: "300", HTTP2_INSTANCE_RESETS_PER_SECOND: "30" }).http;
    assert.deepEqual([instance.h2InstanceResetBurst, instance.h2InstanceResetsPerSecond], [300, 30]);
    assert.throws(
      () => loadConfig({ HTTP2_INSTANCE_RESET_BURST: "0" }),
      /HTTP2_INSTANCE_RESET_BURST must be between 1/,
    );
    const tuned = loadConfig({
      HTTP2_MAX_CONCURRENT_STREAMS: "250",
      HTTP2_RESET_BURST: "10",
      HTTP2_RESETS_PER_SECOND: "2",
      HTTP2_MAX_SESSIONS_PER_ADDRESS: "8",
    }).http;
    assert.deepEqual(
      [tuned.h2MaxConcurrentStreams, tuned.h2ResetBurst, tuned.h2ResetsPerSecond, tuned.h2MaxSessionsPerAddress],
      [250, 10, 2, 8],
    );
    // Fewer than 10 streams would queue a grpc-js client's ordinary multiplexing.
    assert.throws(
      () => loadConfig({ HTTP2_MAX_CONCURRENT_STREAMS: "5" }),
      /HTTP2_MAX_CONCURRENT_STREAMS must be between 10 and 10000/,
    );
    assert.throws(() => loadConfig({ HTTP2_RESET_BURST: "0" }), /HTTP2_RESET_BURST must be between 1/);
    assert.throws(
      () => loadConfig({ HTTP2_RESETS_PER_SECOND: "fast" }),
      /HTTP2_RESETS_PER_SECOND must be a whole number/,
    );
    assert.throws(
      () => loadConfig({ HTTP2_MAX_SESSIONS_PER_ADDRESS: "0" }),
      /HTTP2_MAX_SESSIONS_PER_ADDRESS must be between 1/,
    );
  });

  test("resource servers' budget is RESOURCE_SERVER_RATE_LIMIT (1000/s by default), per server and per address, with the token endpoint's failure limit", () => {
    const defaults = loadConfig({}).resourceServerRateLimits;
    assert.deepEqual(defaults.perClient, { points: 60_000, durationSeconds: 60 });
    assert.deepEqual(defaults.perAddress, defaults.perClient);
    assert.deepEqual(defaults.failures, loadConfig({}).rateLimits.failures);
    const set = loadConfig({
      RESOURCE_SERVER_RATE_LIMIT: "500/10",
      TOKEN_FAILURE_LIMIT: "3/60",
    }).resourceServerRateLimits;
    assert.deepEqual(set, {
      perClient: { points: 500, durationSeconds: 10 },
      perAddress: { points: 500, durationSeconds: 10 },
      failures: { points: 3, durationSeconds: 60 },
    });
    assert.throws(
      () => loadConfig({ RESOURCE_SERVER_RATE_LIMIT: "fast" }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.match(e.message, /^RESOURCE_SERVER_RATE_LIMIT must be "<points>\/<seconds>"/);
        return true;
      },
    );
  });

  test("DATABASE_POOL_MODE is session by default; transaction (a PgBouncer in transaction mode) needs DATABASE_DIRECT_URL", () => {
    assert.equal(loadConfig({ DATABASE_URL: "postgres://db/app" }).storage.databasePoolMode, "session");
    const pooled = loadConfig({
      DATABASE_URL: "postgres://u:secret@pooler:6432/app",
      DATABASE_DIRECT_URL: "postgres://u:secret@db:5432/app",
      DATABASE_POOL_MODE: "transaction",
    }).storage;
    assert.deepEqual(
      [pooled.databasePoolMode, pooled.databaseDirectUrl],
      ["transaction", "postgres://u:secret@db:5432/app"],
    );
    const refused: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [
        { DATABASE_URL: "postgres://db/app", DATABASE_POOL_MODE: "statement" },
        /DATABASE_POOL_MODE must be one of session, transaction/,
      ],
      [
        { DATABASE_URL: "postgres://u:secret@pooler/app", DATABASE_POOL_MODE: "transaction" },
        /DATABASE_POOL_MODE=transaction needs DATABASE_DIRECT_URL/,
      ],
    ];
    for (const [env, message] of refused) {
      assert.throws(
        () => loadConfig(env),
        (error: Error) =>
          error instanceof ConfigError && message.test(error.message) && !error.message.includes("secret"),
      );
    }
  });

  test("REDIS_MODE picks one server, a cluster (seed URLs) or Sentinel (sentinel URLs and the primary's name); mistakes refused without echoing a password", () => {
    assert.equal(loadConfig({ REDIS_URL: "redis://r:6379" }).storage.redisMode, "standalone");
    const cluster = loadConfig({ REDIS_MODE: "cluster", REDIS_URL: "redis://:pw@a:7000, redis://b:7001" }).storage;
    assert.deepEqual([cluster.redisMode, cluster.redisUrl], ["cluster", "redis://:pw@a:7000,redis://b:7001"]);
    const sentinel = loadConfig({ REDIS_MODE: "sentinel", REDIS_URL: "redis://s:26379", REDIS_SENTINEL_NAME: "main" });
    assert.deepEqual([sentinel.storage.redisMode, sentinel.storage.redisSentinelName], ["sentinel", "main"]);
    const refused: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [{ REDIS_MODE: "clustered", REDIS_URL: "redis://r" }, /REDIS_MODE must be one of standalone, cluster, sentinel/],
      [{ REDIS_MODE: "cluster" }, /REDIS_MODE=cluster needs REDIS_URL/],
      [{ REDIS_URL: "redis://a:1,redis://b:2" }, /set REDIS_MODE=cluster or REDIS_MODE=sentinel/],
      [{ REDIS_MODE: "sentinel", REDIS_URL: "redis://s" }, /needs REDIS_SENTINEL_NAME/],
      [
        { REDIS_MODE: "cluster", REDIS_URL: "redis://:secret@a:1,a:2" },
        /REDIS_URL must be redis:\/\/ or rediss:\/\/ URLs/,
      ],
      [{ REDIS_URL: "redis://r", REDIS_KEY_PREFIX: "{auth}:" }, /REDIS_KEY_PREFIX must not contain \{ or \}/],
    ];
    for (const [env, message] of refused) {
      assert.throws(
        () => loadConfig(env),
        (error: Error) => error instanceof ConfigError && message.test(error.message),
      );
      assert.throws(
        () => loadConfig(env),
        (error: Error) => !error.message.includes("secret"),
      );
    }
  });

  test("loopback hosts are told apart from the rest (the TRUSTED_PROXIES start-up warning)", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) assert.equal(isLoopbackHost(host), true, host);
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.org", "127.0.0.1.example.org"])
      assert.equal(isLoopbackHost(host), false, host);
  });
});
