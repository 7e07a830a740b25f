import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { createLocalJWKSet, jwtVerify } from "jose";
import type { ApiUserAdminCaller } from "../../../src/domain/api-users/model.js";
import type { DomainError } from "../../../src/errors/domain-error.js";
import {
  CredentialChangeReader,
  type LoggedChange,
} from "../../../src/domain/credential-changes/credential-change-reader.js";
import { credentialStateSource } from "../../../src/domain/tokens/credential-state-source.js";
import type { UnitOfWork } from "../../../src/domain/shared/unit-of-work.js";
import {
  longPollBoundMs,
  SecurityEventPoll,
  type SecurityEventPollOptions,
} from "../../../src/domain/credential-changes/security-event-poll.js";
import {
  CAEP_CREDENTIAL_CHANGE,
  CAEP_SESSION_REVOKED,
  eventTimestampOf,
  securityEventOf,
  seqOfSetId,
} from "../../../src/domain/credential-changes/security-event-tokens.js";
import {
  createPgliteFixture,
  ISSUER,
  newApiUser,
  newTenant,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

/*
 * SET building (pure) and SecurityEventPoll over the real repositories on PGlite: acknowledgement
 * one by one, redelivery, maxEvents, and a position older than the retained log. The HTTP face,
 * long polls and two instances are in test/tokens/ssf-poll.test.ts.
 */

describe("security event tokens", () => {
  const at = new Date("2026-11-26T10:00:00.250Z");
  test("a rotation is credential-change update with the generation; a revoked API user is revoke without one", () => {
    const rotated: LoggedChange = { kind: "credential_changed", seq: 7, changedAt: at, clientId: "abc", generation: 3 };
    assert.deepEqual(securityEventOf(ISSUER, rotated), {
      subId: { format: "opaque", id: "abc" },
      events: {
        [CAEP_CREDENTIAL_CHANGE]: {
          credential_type: "client_secret",
          change_type: "update",
          event_timestamp: Date.parse("2026-11-26T10:00:01Z") / 1000,
          credential_generation: 3,
        },
      },
    });
    const revoked: LoggedChange = { ...rotated, generation: undefined };
    assert.deepEqual(securityEventOf(ISSUER, revoked).events[CAEP_CREDENTIAL_CHANGE], {
      credential_type: "client_secret",
      change_type: "revoke",
      event_timestamp: Date.parse("2026-11-26T10:00:01Z") / 1000,
    });
  });

  test("a single token's revocation is session-revoked about a jwt_id subject, with the token's expiry", () => {
    const change: LoggedChange = {
      kind: "token_revoked",
      seq: 8,
      changedAt: at,
      jti: "j-1",
      expiresAt: new Date("2026-11-26T11:00:00Z"),
    };
    assert.deepEqual(securityEventOf(ISSUER, change), {
      subId: { format: "jwt_id", iss: ISSUER, jti: "j-1" },
      events: {
        [CAEP_SESSION_REVOKED]: {
          event_timestamp: Date.parse("2026-11-26T10:00:01Z") / 1000,
          token_expires_at: Date.parse("2026-11-26T11:00:00Z") / 1000,
        },
      },
    });
  });

  test("event_timestamp rounds up to the second (tokens of the change's second are refused by iat); a whole second stays", () => {
    assert.equal(eventTimestampOf(new Date(1_000_000_001)), 1_000_001);
    assert.equal(eventTimestampOf(new Date(1_000_000_000)), 1_000_000);
  });

  test("only positive decimal jtis name changes; the long poll stays a second under the request deadline, at most 25 s", () => {
    assert.deepEqual(["1", "42", "0", "01", "-1", "1e3", "abc", "9".repeat(17)].map(seqOfSetId), [
      1,
      42,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    assert.deepEqual([longPollBoundMs(5000), longPollBoundMs(60_000), longPollBoundMs(500)], [4000, 25_000, 0]);
  });
});

describe("SecurityEventPoll", () => {
  let f: PgliteDomainFixture;
  let caller: ApiUserAdminCaller;
  let users: ProvisionedApiUser[];
  let poll: SecurityEventPoll;
  /** Transactions `poll` opened (each takes a pooled connection). */
  let transactions: number;
  /** The fixture's unit of work, counting transactions. */
  let counted: UnitOfWork;
  const RECEIVER = "rs-receiver";
  const once = (request: Partial<Parameters<SecurityEventPoll["poll"]>[1]> = {}) =>
    poll.poll(
      RECEIVER,
      { maxEvents: undefined, returnImmediately: true, ack: [], setErrs: [], ...request },
      new AbortController().signal,
    );
  /** The subjects of the SETs of a poll, in jti order, after verifying each against the key ring's JWKS. */
  async function subjectsOf(result: Awaited<ReturnType<typeof once>>): Promise<Array<[string, string]>> {
    const jwks = createLocalJWKSet(f.signingKeys.jwks);
    const out: Array<[string, string]> = [];
    for (const [jti, set] of [...result.sets].sort((x, y) => Number(x[0]) - Number(y[0]))) {
      const { payload } = await jwtVerify(set, jwks, { issuer: ISSUER, audience: RECEIVER, typ: "secevent+jwt" });
      assert.equal(payload.jti, jti);
      out.push([jti, (payload.sub_id as { id: string }).id]);
    }
    return out;
  }

  beforeEach(async () => {
    f = await createPgliteFixture();
    const { tmcId } = await newTenant(f, 20);
    const admin = await newApiUser(f, tmcId);
    caller = { clientId: admin.clientId, tmcId };
    users = [];
    for (let i = 0; i < 3; i++) users.push(await newApiUser(f, tmcId));
    await f.uow.transaction((tx) =>
      f.repos.resourceServers.insert(tx, {
        clientId: RECEIVER,
        name: "Receiver",
        secretHash: Buffer.alloc(32),
        createdBy: "operator",
      }),
    );
    transactions = 0;
    counted = {
      direct: f.uow.direct,
      transaction: (work) => {
        transactions++;
        return f.uow.transaction(work);
      },
    };
    poll = pollOver(counted, { issuer: ISSUER, longPollMs: 0 });
  });

  /** A SecurityEventPoll over the fixture's repositories and `uow`. */
  function pollOver(uow: UnitOfWork, options: SecurityEventPollOptions): SecurityEventPoll {
    const states = credentialStateSource(
      { apiUsers: f.repos.apiUsers, resourceServers: f.repos.resourceServers, revokedTokens: f.repos.revokedTokens },
      f.clock.now,
    );
    return new SecurityEventPoll(
      {
        uow,
        changes: f.repos.credentialChanges,
        reader: new CredentialChangeReader({
          changes: f.repos.credentialChanges,
          states,
          revokedTokens: f.repos.revokedTokens,
        }),
        positions: f.repos.securityEventPositions,
        committed: f.generations,
        keys: f.signingKeys,
        clock: f.clock.now,
      },
      options,
    );
  }

  test("acknowledging one SET leaves the older one due (same jti); maxEvents bounds a poll; acknowledged SETs never come again", async () => {
    for (const user of users) await f.admin.rotate(caller, user.clientId, "r");
    const all = await subjectsOf(await once());
    assert.deepEqual(
      all.map(([, id]) => id),
      users.map((u) => u.clientId),
    );
    const [first, second, third] = all.map(([jti]) => jti) as [string, string, string];
    const bounded = await once({ maxEvents: 1, ack: [second] });
    assert.deepEqual([[...bounded.sets.keys()], bounded.moreAvailable], [[first], true]);
    assert.deepEqual(
      (await subjectsOf(await once())).map(([jti]) => jti),
      [first, third],
      "the acknowledged second is not delivered again",
    );
    const acknowledged = await once({ ack: [first], setErrs: [third] });
    assert.deepEqual([acknowledged.sets.size, acknowledged.moreAvailable], [0, false]);
    const position = await f.uow.transaction((tx) => f.repos.securityEventPositions.lock(tx, RECEIVER, 0));
    assert.deepEqual([position.through, [...position.acknowledged]], [Number(third), []], "folded into the position");
  });

  test("a position older than the retained log resumes at the oldest change kept: the pruned ones concern only expired tokens", async () => {
    await f.admin.rotate(caller, users[0]!.clientId, "r");
    await f.admin.rotate(caller, users[1]!.clientId, "r");
    // An hour past the database's now() (which stamps the changes), far past the retention.
    f.clock.advanceSeconds((Date.now() - f.clock.now().getTime()) / 1000 + 3600);
    assert.equal(await f.generations.pruneLog(), 1, "the first rotation is pruned; the newest is always kept");
    await f.admin.rotate(caller, users[2]!.clientId, "r");
    assert.deepEqual(
      (await subjectsOf(await once())).map(([, id]) => id),
      [users[1]!.clientId, users[2]!.clientId],
    );
  });

  test("a jti this feed never issues is refused; one of a change still to come acknowledges nothing", async () => {
    await assert.rejects(once({ ack: ["x"] }), { message: "ack and setErrs take jtis of SETs this feed delivered" });
    await once({ ack: ["999"] });
    await f.admin.rotate(caller, users[0]!.clientId, "r");
    assert.equal((await once()).sets.size, 1);
  });
  test("nothing new past the position: a poll is answered from memory, no transaction; a new change (or an acknowledgement past it) reads again", async () => {
    await f.admin.rotate(caller, users[0]!.clientId, "r");
    const [jti] = [...(await once()).sets.keys()];
    assert.equal((await once({ ack: [jti!] })).sets.size, 0);
    const before = transactions;
    for (let i = 0; i < 5; i++)
      assert.deepEqual([(await once()).sets.size, (await once({ ack: [jti!] })).sets.size], [0, 0]);
    assert.equal(transactions, before, "no transaction while nothing is new");
    await f.admin.rotate(caller, users[1]!.clientId, "r");
    assert.equal((await once()).sets.size, 1, "the new change is read");
    assert.equal(transactions, before + 1);
  });

  test("concurrent polls of one receiver share one transaction at a time: each gets its own maxEvents, every acknowledgement is recorded", async () => {
    for (const user of users) await f.admin.rotate(caller, user.clientId, "r");
    const due = [...(await once()).sets.keys()];
    assert.equal(due.length, 3);
    const roomy = pollOver(counted, { issuer: ISSUER, longPollMs: 0, maxOpenPerReceiver: 100 });
    const polled = (request: Partial<Parameters<SecurityEventPoll["poll"]>[1]>) =>
      roomy.poll(
        RECEIVER,
        { maxEvents: undefined, returnImmediately: true, ack: [], setErrs: [], ...request },
        new AbortController().signal,
      );
    const before = transactions;
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, () => polled({ maxEvents: 1 })),
      polled({ ack: [due[1]!] }),
      polled({ maxEvents: 0, setErrs: [due[2]!] }),
    ]);
    assert.ok(transactions - before <= 2, `${transactions - before} transactions for 22 concurrent polls`);
    for (const answer of answers.slice(0, 20))
      assert.deepEqual([...answer.sets.keys()], [due[0]], "maxEvents 1 each: the oldest due SET");
    assert.deepEqual(
      [...(await once()).sets.keys()],
      [due[0]],
      "both acknowledgements recorded; the unacknowledged first is due again",
    );
  });

  test("waiting long polls hold no transaction while they wait; a change wakes them all, read by one transaction; over maxOpenPerReceiver one more is 429 TOO_MANY_OPEN_POLLS", async () => {
    const waiting = pollOver(counted, { issuer: ISSUER, longPollMs: 10_000, maxOpenPerReceiver: 8 });
    const long = () =>
      waiting.poll(
        RECEIVER,
        { maxEvents: undefined, returnImmediately: false, ack: [], setErrs: [] },
        new AbortController().signal,
      );
    const quiet = await waiting.poll(
      RECEIVER,
      { maxEvents: undefined, returnImmediately: true, ack: [], setErrs: [] },
      new AbortController().signal,
    );
    assert.equal(quiet.sets.size, 0);
    const before = transactions;
    const polls = Array.from({ length: 8 }, long);
    await assert.rejects(long(), (error: DomainError) => {
      assert.deepEqual([error.code, error.retryAfterSeconds], ["TOO_MANY_OPEN_POLLS", 5]);
      return true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(transactions, before, "8 waiting polls, no transaction");
    await f.admin.rotate(caller, users[0]!.clientId, "r");
    const answers = await Promise.all(polls);
    assert.deepEqual(
      answers.map((a) => a.sets.size),
      Array(8).fill(1),
    );
    assert.ok(transactions - before <= 2, `${transactions - before} transactions to wake 8 polls`);
    const again = long();
    waiting.stop();
    assert.equal((await again).sets.size, 1, "a slot is free again once the polls answered");
  });
});
