// The credential-change stream of resource servers (AuthService.WatchCredentialChanges),
// through real protocols: grpc-js (a server-streaming call) and Connect (@connectrpc/connect-node),
// gRPC-Web once. Resuming from a cursor replays exactly the missed changes in order; an RFC 7009
// revocation is a token_revoked; heartbeats come at least every second; no or an expired cursor
// gets a snapshot; API users and wrong secrets are refused; a stream counts once against the
// budget; a cancel frees the server side; shutdown ends it with OK. Two instances on one Postgres:
// a rotation on A reaches a stream on B within a second; Redis flushed loses no event.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ConnectError, createClient, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  AuthService,
  WatchCredentialChangesResponseSchema,
  WatchCredentialChangesRequestSchema,
  type WatchCredentialChangesResponse,
} from "../../gen/travel/auth/v2/auth_pb.js";
import { internalsOf } from "../../src/app/test-access.js";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { dropStorage, operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  disposeService,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TestClock,
  type Client,
  type Tenant,
  registerResourceServer,
  type ResourceServerCredential,
} from "../helpers/token-kit.js";

const WATCH_PATH = "/travel.auth.v2.AuthService/WatchCredentialChanges";

/** One open stream as a test reads it: events as they arrive (with their arrival time), and how it ended. */
interface Watch {
  readonly events: Array<{ event: WatchCredentialChangesResponse; at: number }>;
  /** The next event (after those already taken) that satisfies `wanted`, within `timeoutMs`. */
  next(
    wanted?: (e: WatchCredentialChangesResponse) => boolean,
    timeoutMs?: number,
  ): Promise<WatchCredentialChangesResponse>;
  /** Resolves with the status code the stream ended with (0: OK). */
  readonly ended: Promise<{ code: number; details: string; metadata?: grpc.Metadata }>;
  cancel(): void;
}

function watchOver(
  subscribe: (push: (e: WatchCredentialChangesResponse) => void) => {
    ended: Promise<{ code: number; details: string; metadata?: grpc.Metadata }>;
    cancel(): void;
  },
): Watch {
  const events: Watch["events"] = [];
  let taken = 0;
  let notify: (() => void) | undefined;
  const subscription = subscribe((event) => {
    events.push({ event, at: performance.now() });
    notify?.();
  });
  const { ended } = subscription;
  let done = false;
  void ended.then(() => {
    done = true;
    notify?.();
  });
  return {
    events,
    ended,
    cancel: () => subscription.cancel(),
    async next(wanted = () => true, timeoutMs = 3000) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        while (taken < events.length) {
          const { event } = events[taken++]!;
          if (wanted(event)) return event;
        }
        if (done) throw new Error("the stream ended");
        const left = deadline - performance.now();
        if (left <= 0) throw new Error("no such event in time");
        await new Promise<void>((resolve) => {
          notify = resolve;
          setTimeout(resolve, left).unref();
        });
      }
    },
  };
}

/** A grpc-js server-streaming call (protobuf binary on the wire). */
function grpcJsWatch(
  baseUrl: string,
  request: { sinceCursor?: string; clientId?: string; clientSecret?: string },
): Watch & { close(): void } {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
  const watch = watchOver((push) => {
    const call = client.makeServerStreamRequest(
      WATCH_PATH,
      (r: Uint8Array) => Buffer.from(r),
      (b: Buffer) => fromBinary(WatchCredentialChangesResponseSchema, b),
      toBinary(WatchCredentialChangesRequestSchema, create(WatchCredentialChangesRequestSchema, request)),
    );
    call.on("data", push);
    call.on("error", () => {});
    const ended = new Promise<{ code: number; details: string; metadata?: grpc.Metadata }>((resolve) =>
      call.on("status", (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details, metadata: s.metadata })),
    );
    return { ended, cancel: () => call.cancel() };
  });
  return Object.assign(watch, { close: () => client.close() });
}

/** The same over the Connect protocol (HTTP/1.1, JSON), or gRPC-Web; `headers` such as HTTP Basic. */
function connectWatch(
  baseUrl: string,
  request: { sinceCursor?: string; clientId?: string; clientSecret?: string },
  options: { grpcWeb?: boolean; headers?: Record<string, string> } = {},
): Watch {
  const transport = options.grpcWeb
    ? createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })
    : createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false });
  const client = createClient(AuthService, transport);
  const abort = new AbortController();
  return watchOver((push) => {
    const ended = (async () => {
      try {
        for await (const event of client.watchCredentialChanges(request, {
          signal: abort.signal,
          ...(options.headers ? { headers: options.headers } : {}),
        }))
          push(event);
        return { code: 0, details: "" };
      } catch (error) {
        const e = ConnectError.from(error);
        return { code: e.code as number, details: e.rawMessage };
      }
    })();
    return { ended, cancel: () => abort.abort() };
  });
}

const isChange = (e: WatchCredentialChangesResponse) =>
  e.event.case === "credentialChanged" || e.event.case === "tokenRevoked";

async function rotate(baseUrl: string, admin: Client, clientId: string): Promise<void> {
  const response = await fetch(`${baseUrl}/v2/api-users/rotate`, {
    method: "POST",
    headers: { authorization: `Bearer ${await accessTokenOf(baseUrl, admin)}`, "content-type": "application/json" },
    body: JSON.stringify({ clientId }),
  });
  assert.equal(response.status, 200, await response.text());
}

async function waitFor(condition: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the credential-change stream (WatchCredentialChanges)", () => {
  let running: RunningService;
  let baseUrl: string;
  let tenant: Tenant;
  let server: ResourceServerCredential;
  const open: Array<Watch & { close?(): void }> = [];
  const track = <W extends Watch & { close?(): void }>(w: W): W => (open.push(w), w);
  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    baseUrl = running.baseUrl;
    tenant = await newTenant(baseUrl);
    server = await registerResourceServer(baseUrl, "Bookings");
  });
  after(async () => {
    for (const w of open) {
      w.cancel();
      w.close?.();
    }
    await disposeService(running);
  });
  const as = (since = "") => ({ sinceCursor: since, clientId: server.clientId, clientSecret: server.clientSecret });

  test("no cursor: a snapshot of every API user's generation first, then heartbeats at least every second with increasing server_time (Connect)", async () => {
    const user = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    const watch = track(connectWatch(baseUrl, as()));
    const first = await watch.next();
    assert.equal(first.event.case, "snapshot");
    assert.ok(first.event.case === "snapshot" && first.event.value.lastPage, "one page");
    const credentials = first.event.value.credentials;
    assert.deepEqual(
      credentials.find((c) => c.clientId === user.clientId),
      { $typeName: "travel.auth.v2.CredentialChanged", clientId: user.clientId, generation: 1 },
    );
    assert.equal(
      credentials.some((c) => c.clientId.startsWith("rs-")),
      false,
      "resource servers are not in it",
    );
    const beats: Array<{ at: number; time: number; cursor: string }> = [];
    for (let i = 0; i < 4; i++) {
      const beat = await watch.next((e) => e.event.case === "heartbeat", 1500);
      const entry = watch.events.find((x) => x.event === beat)!;
      assert.ok(beat.event.case === "heartbeat");
      beats.push({ at: entry.at, time: timestampDate(beat.event.value.serverTime!).getTime(), cursor: beat.cursor });
    }
    for (let i = 1; i < beats.length; i++) {
      assert.ok(beats[i]!.at - beats[i - 1]!.at <= 1000, `heartbeat gap ${beats[i]!.at - beats[i - 1]!.at} ms`);
      assert.ok(beats[i]!.time > beats[i - 1]!.time, "server_time increases");
      assert.equal(beats[i]!.cursor, first.cursor, "nothing changed: the snapshot's cursor");
    }
  });

  test("resume from a cursor replays exactly the missed changes in order (a rotation, an RFC 7009 revocation, a rotation), then live ones (grpc-js)", async () => {
    const [one, two] = await Promise.all([
      newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
      newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ]);
    const probe = track(grpcJsWatch(baseUrl, as()));
    const cursor = (await probe.next((e) => e.event.case === "heartbeat")).cursor;
    probe.cancel();

    await rotate(baseUrl, tenant.admin, one.clientId);
    const token = await accessTokenOf(baseUrl, two);
    const revoked = await postForm(baseUrl, "/v2/auth/revoke", {
      token,
      client_id: two.clientId,
      client_secret: two.clientSecret,
    });
    assert.equal(revoked.status, 200);
    await registerResourceServer(baseUrl, "Invoices"); // a resource server's own change: not sent
    await rotate(baseUrl, tenant.admin, two.clientId);

    const watch = track(grpcJsWatch(baseUrl, as(cursor)));
    const replayed = [await watch.next(isChange), await watch.next(isChange), await watch.next(isChange)];
    assert.deepEqual(
      replayed.map((e) => e.event.value),
      [
        { $typeName: "travel.auth.v2.CredentialChanged", clientId: one.clientId, generation: 2 },
        {
          $typeName: "travel.auth.v2.TokenRevoked",
          jti: partsOf(token).payload.jti,
          expiresAt: replayed[1]!.event.case === "tokenRevoked" ? replayed[1]!.event.value.expiresAt : undefined,
        },
        { $typeName: "travel.auth.v2.CredentialChanged", clientId: two.clientId, generation: 2 },
      ],
    );
    assert.ok(replayed[1]!.event.case === "tokenRevoked");
    assert.equal(
      timestampDate(replayed[1]!.event.value.expiresAt!).getTime(),
      partsOf(token).payload.exp * 1000,
      "expires_at is the token's exp",
    );
    const cursors = [cursor, ...replayed.map((e) => e.cursor)].map(Number);
    for (let i = 1; i < cursors.length; i++) assert.ok(cursors[i]! > cursors[i - 1]!, `cursors increase: ${cursors}`);
    assert.equal(watch.events[0]!.event.event.case, "credentialChanged", "no snapshot before a replay");
    const beat = await watch.next((e) => e.event.case === "heartbeat");
    assert.ok(Number(beat.cursor) >= cursors.at(-1)!, "the heartbeat's cursor covers every change sent");
    assert.equal(watch.events.filter((x) => isChange(x.event)).length, 3, "exactly the missed changes, nothing more");

    await rotate(baseUrl, tenant.admin, one.clientId);
    const live = await watch.next(isChange);
    assert.deepEqual(live.event.value, {
      $typeName: "travel.auth.v2.CredentialChanged",
      clientId: one.clientId,
      generation: 3,
    });
    assert.ok(Number(live.cursor) > cursors.at(-1)!);
  });

  test("a cursor that is not a number, or is ahead of the latest change, is refused (INVALID_ARGUMENT naming since_cursor)", async () => {
    for (const since of ["abc", "-1", "1e3", "99999999999"]) {
      const watch = track(grpcJsWatch(baseUrl, as(since)));
      const ended = await watch.ended;
      assert.equal(ended.code, grpc.status.INVALID_ARGUMENT, `${since}: ${ended.details}`);
      const status = decodeRpcStatus(ended.metadata!.get("grpc-status-details-bin")[0] as Buffer);
      const body = errorResponseIn(status.details);
      const params = body?.errorMessages.flatMap((m) => m.errorParameters.map((p) => p.name)) ?? [];
      assert.ok(params.includes("since_cursor"), `${since}: names since_cursor (${JSON.stringify(params)})`);
      assert.equal(watch.events.length, 0);
    }
    const overConnect = await connectWatch(baseUrl, as("abc")).ended;
    assert.equal(overConnect.code, Code.InvalidArgument);
  });

  test("an API user is refused (PERMISSION_DENIED, unauthorized_client); a wrong secret or none is UNAUTHENTICATED", async () => {
    const user = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    const byUser = await track(grpcJsWatch(baseUrl, { clientId: user.clientId, clientSecret: user.clientSecret }))
      .ended;
    assert.equal(byUser.code, grpc.status.PERMISSION_DENIED, byUser.details);
    const wrong = await track(grpcJsWatch(baseUrl, { clientId: server.clientId, clientSecret: "not-it" })).ended;
    assert.equal(wrong.code, grpc.status.UNAUTHENTICATED, wrong.details);
    const none = await track(grpcJsWatch(baseUrl, {})).ended;
    assert.equal(none.code, grpc.status.UNAUTHENTICATED, none.details);
    const overConnect = await connectWatch(baseUrl, { clientId: user.clientId, clientSecret: user.clientSecret }).ended;
    assert.equal(overConnect.code, Code.PermissionDenied);
  });

  test("over gRPC-Web too, and with HTTP Basic instead of the request's fields", async () => {
    const basic = `Basic ${Buffer.from(`${server.clientId}:${server.clientSecret}`).toString("base64")}`;
    for (const grpcWeb of [true, false]) {
      const watch = track(connectWatch(baseUrl, {}, { grpcWeb, headers: { authorization: basic } }));
      const last = await watch.next((e) => e.event.case === "snapshot" && e.event.value.lastPage);
      assert.ok(
        watch.events.every((x) => x.event.event.case === "snapshot"),
        grpcWeb ? "gRPC-Web" : "Connect",
      );
      const beat = await watch.next();
      assert.equal(beat.event.case, "heartbeat");
      assert.equal(beat.cursor, last.cursor);
      watch.cancel();
    }
  });

  test("a client's cancel frees the server side: no stream, no listener left", async () => {
    const stream = internalsOf(running.service).domain.changeStream;
    for (const w of open) w.cancel();
    await waitFor(() => stream.watching === 0, "the earlier tests' streams closed");
    const before = stream.watching;
    const overGrpc = track(grpcJsWatch(baseUrl, as()));
    const overConnect = track(connectWatch(baseUrl, as()));
    await overGrpc.next((e) => e.event.case === "heartbeat");
    await overConnect.next((e) => e.event.case === "heartbeat");
    assert.equal(stream.watching, before + 2);
    overGrpc.cancel();
    overConnect.cancel();
    await waitFor(() => stream.watching === before, "both streams closed on the server");
  });
});

describe("the resource server's budget counts a stream once per call, not per event", () => {
  let running: RunningService;
  after(() => disposeService(running));

  test("RESOURCE_SERVER_RATE_LIMIT 3/60: three streams each well past three events, the fourth call is RESOURCE_EXHAUSTED", async () => {
    running = await startTokenService({ env: { RESOURCE_SERVER_RATE_LIMIT: "3/60" } });
    const server = await registerResourceServer(running.baseUrl, "Budgeted");
    const as = { clientId: server.clientId, clientSecret: server.clientSecret };
    const watches = [0, 1, 2].map(() => grpcJsWatch(running.baseUrl, as));
    try {
      for (const watch of watches) for (let i = 0; i < 4; i++) await watch.next();
      const fourth = grpcJsWatch(running.baseUrl, as);
      const ended = await fourth.ended;
      fourth.close();
      assert.equal(ended.code, grpc.status.RESOURCE_EXHAUSTED, ended.details);
    } finally {
      for (const watch of watches) {
        watch.cancel();
        watch.close();
      }
    }
  });
});

describe("open streams are bounded per resource server and per instance, and counted in the metrics", () => {
  let running: RunningService;
  after(() => disposeService(running));

  test("CHANGE_STREAM_MAX_OPEN_PER_RESOURCE_SERVER 2: a third stream of one server is RESOURCE_EXHAUSTED TOO_MANY_OPEN_STREAMS with Retry-After, another server still gets one; a cancel frees the slot", async () => {
    running = await startTokenService({
      env: { ...ROOMY_RATE_LIMITS, CHANGE_STREAM_MAX_OPEN_PER_RESOURCE_SERVER: "2", CHANGE_STREAM_MAX_OPEN: "3" },
    });
    const [busy, other, third] = await Promise.all(
      ["Busy", "Other", "Third"].map((name) => registerResourceServer(running.baseUrl, name)),
    );
    const open = [grpcJsWatch(running.baseUrl, busy!), grpcJsWatch(running.baseUrl, busy!)];
    try {
      for (const watch of open) await watch.next();
      const refused = grpcJsWatch(running.baseUrl, busy!);
      const ended = await refused.ended;
      refused.close();
      assert.equal(ended.code, grpc.status.RESOURCE_EXHAUSTED, ended.details);
      const status = decodeRpcStatus(ended.metadata!.get("grpc-status-details-bin")[0] as Buffer);
      assert.equal(errorResponseIn(status.details)?.errorMessages[0]?.errorCode, "TOO_MANY_OPEN_STREAMS");
      assert.equal(ended.metadata!.get("retry-after")[0], "5");
      const theirs = grpcJsWatch(running.baseUrl, other!);
      open.push(theirs);
      await theirs.next();
      // The instance's limit (3) is reached: a third server is refused too.
      const overInstance = connectWatch(running.baseUrl, third!);
      assert.equal((await overInstance.ended).code, Code.ResourceExhausted);
      const metrics = await (await fetch(`${running.baseUrl}/metrics`)).text();
      assert.match(metrics, /^credential_change_streams_open 3$/m);
      assert.match(metrics, /^credential_change_stream_events_total\{kind="snapshot"\} 3$/m);
      open.shift()!.cancel();
      await waitFor(
        () => internalsOf(running.service).domain.changeStream.watching === 2,
        "the cancelled stream freed",
      );
      const again = grpcJsWatch(running.baseUrl, busy!);
      open.push(again);
      await again.next();
    } finally {
      for (const watch of open) {
        watch.cancel();
        watch.close();
      }
    }
  });
});

describe("a snapshot when the cursor is older than the retained log", () => {
  let running: RunningService;
  const clock = new TestClock();
  after(() => disposeService(running));

  test("changes pruned past the cursor: a snapshot with the current generations, then heartbeats (nothing to replay)", async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS, now: clock.now });
    const { baseUrl } = running;
    const tenant = await newTenant(baseUrl);
    const server = await registerResourceServer(baseUrl, "Pruned");
    const user = await newApiUser(baseUrl, tenant.tmcId, "TMC_ADMIN");
    for (let i = 0; i < 3; i++) await rotate(baseUrl, tenant.admin, user.clientId);
    // Two days later (past every token lifetime), the log keeps only its newest change.
    clock.advanceSeconds(2 * 24 * 3600);
    const pruned = await internalsOf(running.service).domain.generations.pruneLog();
    assert.ok(pruned >= 2, `pruned ${pruned}`);
    const watch = grpcJsWatch(baseUrl, {
      sinceCursor: "1",
      clientId: server.clientId,
      clientSecret: server.clientSecret,
    });
    try {
      const first = await watch.next();
      assert.equal(first.event.case, "snapshot", "a resynchronization, not a replay");
      assert.ok(first.event.case === "snapshot" && first.event.value.lastPage);
      assert.equal(first.event.value.credentials.find((c) => c.clientId === user.clientId)?.generation, 4);
      const next = await watch.next();
      assert.equal(next.event.case, "heartbeat", "the snapshot is current: nothing to replay after it");
    } finally {
      watch.cancel();
      watch.close();
    }
  });
});

describe("shutdown ends open streams cleanly", () => {
  test("the service stops: the stream completes with OK (grpc-js)", async () => {
    const running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    let watch: ReturnType<typeof grpcJsWatch> | undefined;
    try {
      const server = await registerResourceServer(running.baseUrl, "Stopping");
      watch = grpcJsWatch(running.baseUrl, { clientId: server.clientId, clientSecret: server.clientSecret });
      await watch.next((e) => e.event.case === "heartbeat");
      const stopping = performance.now();
      const stopped = running.stop();
      const ended = await watch.ended;
      const tookMs = performance.now() - stopping;
      assert.equal(ended.code, grpc.status.OK, ended.details);
      // Ended by the service, not by the drain timeout (SHUTDOWN_TIMEOUT_MS, 500 ms here) that aborts what is left.
      assert.ok(tookMs < 300, `ended ${Math.round(tookMs)} ms after stop began`);
      await stopped;
    } finally {
      watch?.close();
      await dropStorage(running.storage);
    }
  });
});

describe(
  "the credential-change stream across two instances",
  { skip: !isPostgres && "needs a shared Postgres" },
  () => {
    let storage: Storage;
    let redis: PrivateRedis;
    let a: RunningService;
    let b: RunningService;
    before(async () => {
      storage = newStorage();
      // A Redis of their own: one test flushes it.
      redis = await startPrivateRedis();
      const env = { ...ROOMY_RATE_LIMITS, REDIS_URL: redis.url };
      a = await startTokenService({ storage, env });
      b = await startTokenService({ storage, env });
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await redis?.stop();
      if (storage) await dropStorage(storage);
    });

    test("a rotation on A reaches a stream on B within a second; a signing-key rotation on A is signing_keys_changed on B", async () => {
      const tenant = await newTenant(a.baseUrl);
      const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
      const server = await registerResourceServer(a.baseUrl, "Watcher");
      const watch = grpcJsWatch(b.baseUrl, { clientId: server.clientId, clientSecret: server.clientSecret });
      try {
        await watch.next((e) => e.event.case === "heartbeat");
        const adminToken = await accessTokenOf(a.baseUrl, tenant.admin);
        const started = performance.now();
        const response = await fetch(`${a.baseUrl}/v2/api-users/rotate`, {
          method: "POST",
          headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
          body: JSON.stringify({ clientId: user.clientId }),
        });
        assert.equal(response.status, 200);
        const event = await watch.next(isChange, 1000);
        const arrived = watch.events.find((x) => x.event === event)!.at;
        assert.ok(arrived - started <= 1000, `arrived ${Math.round(arrived - started)} ms after the rotate call began`);
        assert.deepEqual(event.event.value, {
          $typeName: "travel.auth.v2.CredentialChanged",
          clientId: user.clientId,
          generation: 2,
        });

        await operatorCall(a.baseUrl, "RotateSigningKey", {});
        const keys = await watch.next((e) => e.event.case === "signingKeysChanged", 2000);
        assert.equal(keys.cursor, event.cursor, "a key change repeats the latest cursor");
      } finally {
        watch.cancel();
        watch.close();
      }
    });

    test("Redis losing everything loses no event: a resume on B after FLUSHALL replays the changes made on A, in order", async () => {
      const tenant = await newTenant(a.baseUrl);
      const [one, two] = [
        await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
        await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      ];
      const server = await registerResourceServer(a.baseUrl, "Flushed");
      const as = { clientId: server.clientId, clientSecret: server.clientSecret };
      const probe = grpcJsWatch(b.baseUrl, as);
      const cursor = (await probe.next((e) => e.event.case === "heartbeat")).cursor;
      probe.cancel();
      probe.close();
      await rotate(a.baseUrl, tenant.admin, one.clientId);
      await rotate(a.baseUrl, tenant.admin, two.clientId);
      await redis.command(["FLUSHALL"]);
      const watch = grpcJsWatch(b.baseUrl, { ...as, sinceCursor: cursor });
      try {
        const replayed = [await watch.next(isChange), await watch.next(isChange)];
        assert.deepEqual(
          replayed.map((e) =>
            e.event.case === "credentialChanged" ? [e.event.value.clientId, e.event.value.generation] : [],
          ),
          [
            [one.clientId, 2],
            [two.clientId, 2],
          ],
        );
      } finally {
        watch.cancel();
        watch.close();
      }
    });
  },
);
