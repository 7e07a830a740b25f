import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { createLocalJWKSet, jwtVerify } from "jose";
import type { ApiUserAdminCaller } from "../../../src/domain/api-users/model.js";
import { CredentialChangeReader, type LoggedChange } from "../../../src/domain/tokens/credential-change-reader.js";
import { credentialStateSource } from "../../../src/domain/tokens/credential-state-source.js";
import { longPollBoundMs, SecurityEventPoll } from "../../../src/domain/tokens/security-event-poll.js";
import {
  CAEP_CREDENTIAL_CHANGE,
  CAEP_SESSION_REVOKED,
  eventTimestampOf,
  securityEventOf,
  seqOfSetId,
} from "../../../src/domain/tokens/security-event-tokens.js";
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
    const states = credentialStateSource(
      { apiUsers: f.repos.apiUsers, resourceServers: f.repos.resourceServers, revokedTokens: f.repos.revokedTokens },
      f.clock.now,
    );
    poll = new SecurityEventPoll(
      f.uow,
      f.repos.credentialChanges,
      new CredentialChangeReader(f.repos.credentialChanges, states, f.repos.revokedTokens),
      f.repos.securityEventPositions,
      f.generations,
      f.signingKeys,
      f.clock.now,
      { issuer: ISSUER, longPollMs: 0 },
    );
  });

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
});
