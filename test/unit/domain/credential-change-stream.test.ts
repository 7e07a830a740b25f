import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { ApiUserAdminCaller } from "../../../src/domain/api-users/model.js";
import {
  CredentialChangeStream,
  type ChangeStreamEvent,
} from "../../../src/domain/credential-changes/credential-change-stream.js";
import { credentialStateSource } from "../../../src/domain/tokens/credential-state-source.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  createPgliteFixture,
  newApiUser,
  newTenant,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

/*
 * CredentialChangeStream over the real repositories on PGlite, the fixture's CredentialGenerations
 * and its controllable change feed: snapshot pages at a small page size, and heartbeats only while
 * the feed can vouch for every change. The protocols (gRPC, Connect), two instances and shutdown
 * are in test/tokens/credential-change-stream.test.ts.
 */

const HEARTBEAT_MS = 50;

describe("CredentialChangeStream", () => {
  let f: PgliteDomainFixture;
  let caller: ApiUserAdminCaller;
  let users: ProvisionedApiUser[];
  let abort: AbortController;
  let stream: CredentialChangeStream;
  /** What the metrics would see: the open count after each change, and the events sent by kind. */
  let observed: { open: number[]; sent: Map<string, number> };
  const observer = {
    streamsOpen: (count: number) => observed.open.push(count),
    eventSent: (kind: string) => observed.sent.set(kind, (observed.sent.get(kind) ?? 0) + 1),
  };

  beforeEach(async () => {
    f = await createPgliteFixture();
    const { tmcId } = await newTenant(f, 20);
    const admin = await newApiUser(f, tmcId);
    caller = { clientId: admin.clientId, tmcId };
    users = [admin];
    for (let i = 0; i < 4; i++) users.push(await newApiUser(f, tmcId));
    abort = new AbortController();
    observed = { open: [], sent: new Map() };
    stream = new CredentialChangeStream(
      {
        uow: f.uow,
        changes: f.repos.credentialChanges,
        states: credentialStateSource(
          {
            apiUsers: f.repos.apiUsers,
            resourceServers: f.repos.resourceServers,
            revokedTokens: f.repos.revokedTokens,
          },
          f.clock.now,
        ),
        revokedTokens: f.repos.revokedTokens,
        snapshots: f.repos.credentialSnapshots,
        committed: f.generations,
        keys: f.signingKeys,
        clock: f.clock.now,
      },
      { logRetentionSeconds: 360, heartbeatMs: HEARTBEAT_MS, pageSize: 2, maxOpen: 3, maxOpenPerWatcher: 2, observer },
    );
  });
  afterEach(() => abort.abort());

  /** The next `count` events, each within a second. */
  async function take(events: AsyncIterator<ChangeStreamEvent>, count: number): Promise<ChangeStreamEvent[]> {
    const taken: ChangeStreamEvent[] = [];
    for (let i = 0; i < count; i++) {
      const next = await Promise.race([
        events.next(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no event within 1 s")), 1000).unref()),
      ]);
      assert.equal(next.done, false);
      taken.push(next.value as ChangeStreamEvent);
    }
    return taken;
  }

  test("a snapshot in pages of at most pageSize, the last marked: active users with their generation, the revoked one at none, then a heartbeat", async () => {
    await f.admin.rotate(caller, users[1]!.clientId, "r");
    await f.admin.revoke(caller, users[2]!.clientId, "r");
    const events = (await stream.watch("", abort.signal, "rs-a"))[Symbol.asyncIterator]();
    const pages = await take(events, 3);
    assert.deepEqual(
      pages.map((p) => (p.kind === "snapshot" ? [p.credentials.length, p.lastPage] : p.kind)),
      [
        [2, false],
        [2, false],
        [1, true],
      ],
    );
    const all = pages.flatMap((p) => (p.kind === "snapshot" ? p.credentials : []));
    const expected = users
      .map((u, i) => ({ clientId: u.clientId, generation: i === 1 ? 2 : i === 2 ? undefined : 1 }))
      .sort((a, b) => (a.clientId < b.clientId ? -1 : 1));
    assert.deepEqual(all, expected);
    const latest = await f.repos.credentialChanges.latest(f.uow.direct);
    assert.ok(pages.every((p) => p.cursor === latest));
    const [beat] = await take(events, 1);
    assert.equal(beat!.kind, "heartbeat");
    assert.equal(beat!.cursor, latest);
    assert.deepEqual(
      beat!.kind === "heartbeat" && beat.sent,
      { count: 3, lastCursor: latest },
      "the 3 pages before it",
    );
  });

  test("no heartbeat while the feed is down (nothing vouches for the changes); after it is back, the missed change, then heartbeats", async () => {
    const latest = await f.repos.credentialChanges.latest(f.uow.direct);
    const events = (await stream.watch(String(latest), abort.signal, "rs-a"))[Symbol.asyncIterator]();
    const [quietBeat] = await take(events, 1);
    assert.equal(quietBeat!.kind, "heartbeat");
    assert.deepEqual(quietBeat!.kind === "heartbeat" && quietBeat.sent, { count: 0, lastCursor: undefined });
    f.feed.disconnect();
    const pending = events.next();
    const quiet = await Promise.race([
      pending.then(() => "event"),
      new Promise((r) => setTimeout(() => r("quiet"), HEARTBEAT_MS * 6)),
    ]);
    assert.equal(quiet, "quiet", "no heartbeat while disconnected");
    // A change made by another instance while this one hears nothing.
    await f.repos.credentialChanges.record(f.uow.direct, users[3]!.clientId);
    await f.feed.connect();
    const first = await Promise.race([
      pending,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("nothing after reconnection")), 1000)),
    ]);
    assert.deepEqual(first.value, {
      kind: "credential_changed",
      cursor: latest + 1,
      clientId: users[3]!.clientId,
      generation: 1,
    });
    const [beat] = await take(events, 1);
    assert.equal(beat!.kind, "heartbeat");
    assert.equal(beat!.cursor, latest + 1);
    assert.deepEqual(beat!.kind === "heartbeat" && beat.sent, { count: 1, lastCursor: latest + 1 }, "what it sent");
  });

  test("stop() and the caller's abort end the stream and free its listeners", async () => {
    const latest = String(await f.repos.credentialChanges.latest(f.uow.direct));
    const events = (await stream.watch(latest, abort.signal, "rs-a"))[Symbol.asyncIterator]();
    await take(events, 1);
    assert.equal(stream.watching, 1);
    const second = new AbortController();
    const other = (await stream.watch(latest, second.signal, "rs-a"))[Symbol.asyncIterator]();
    await take(other, 1);
    assert.equal(stream.watching, 2);
    second.abort();
    assert.equal((await other.next()).done, true);
    assert.equal(stream.watching, 1);
    stream.stop();
    assert.equal((await events.next()).done, true);
    assert.equal(stream.watching, 0);
  });

  const full = {
    code: "TOO_MANY_OPEN_STREAMS",
    message: "This instance holds as many change streams as it may; retry shortly",
    params: [{ name: "retryAfterSeconds", value: "5" }],
  } as const;

  test("at most maxOpen streams at once and maxOpenPerWatcher per watcher: one more is 429 TOO_MANY_OPEN_STREAMS; a slot frees when a stream ends, even one never read", async () => {
    const latest = String(await f.repos.credentialChanges.latest(f.uow.direct));
    const a1 = (await stream.watch(latest, abort.signal, "rs-a"))[Symbol.asyncIterator]();
    const a2 = new AbortController();
    const second = (await stream.watch(latest, a2.signal, "rs-a"))[Symbol.asyncIterator]();
    await rejectsWith(stream.watch(latest, abort.signal, "rs-a"), full);
    // Another watcher still has room, up to the instance's limit.
    const b = new AbortController();
    await stream.watch(latest, b.signal, "rs-b");
    await rejectsWith(stream.watch(latest, abort.signal, "rs-c"), full);
    assert.equal(stream.watching, 3);
    // rs-b's stream was never read: its call ending (the signal) frees the slot.
    b.abort();
    assert.equal(stream.watching, 2);
    await take(second, 1);
    a2.abort();
    assert.equal((await second.next()).done, true);
    assert.equal(stream.watching, 1);
    await take(a1, 1);
    await stream.watch(latest, abort.signal, "rs-a");
    assert.deepEqual(observed.open, [1, 2, 3, 2, 1, 2]);
    assert.equal(observed.sent.get("heartbeat"), 2);
  });
});
