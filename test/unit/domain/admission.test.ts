import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { AdaptiveLimit } from "../../../src/domain/shared/adaptive-limit.js";
import { FairAdmission, type AdmissionConfig, type Party, type Release } from "../../../src/domain/shared/admission.js";
import { DomainError } from "../../../src/errors/domain-error.js";

const CONFIG: AdmissionConfig = {
  partyShare: 0.5,
  unauthenticatedShare: 0.3,
  queuePerParty: 2,
  queueWaitMs: 40,
  limitMax: 100,
};

const tmc = (id: string): Party => ({ kind: "tmc", id });
const server = (id: string): Party => ({ kind: "resource-server", id });
const anonymous: Party = { kind: "unauthenticated" };

/** What enter() came to: a slot (its release) or the refusal. */
async function outcome(entering: Promise<Release>): Promise<Release | DomainError> {
  return entering.catch((e: unknown) => {
    assert.ok(e instanceof DomainError, String(e));
    return e;
  });
}

function assertRefused(value: unknown, errorCode: string): void {
  assert.ok(value instanceof DomainError, `expected a refusal, got ${typeof value}`);
  assert.equal(value.code, errorCode);
  assert.equal(value.retryAfterSeconds, 1, "every refusal says Retry-After: 1");
}

describe("fair-share admission (one instance, pool of 10)", () => {
  test("a TMC runs at most its share (half the pool), queues `queuePerParty` more, then 429; another TMC and a resource server keep theirs", async () => {
    const admission = new FairAdmission(CONFIG, 10);
    const running = await Promise.all(Array.from({ length: 5 }, () => admission.enter(tmc("a"))));
    const queued = [outcome(admission.enter(tmc("a"))), outcome(admission.enter(tmc("a")))];
    assertRefused(await outcome(admission.enter(tmc("a"))), "TOO_MANY_CONCURRENT_REQUESTS");
    assert.deepEqual(
      { running: admission.state.running, waiting: admission.state.waiting },
      { running: 5, waiting: 2 },
    );
    const others = await Promise.all([admission.enter(tmc("b")), admission.enter(server("rs-1"))]);
    running[0]!();
    running[1]!();
    const granted = await Promise.all(queued);
    assert.ok(
      granted.every((g) => typeof g === "function"),
      "the queued calls took the freed slots",
    );
    assert.equal(admission.state.waiting, 0);
    for (const release of [...running, ...others, ...(granted as Release[])]) release();
    assert.equal(admission.state.running, 0);
    assert.equal(admission.state.parties, 0, "idle parties are forgotten");
  });

  test("unauthenticated work together has its own, smaller share", async () => {
    const admission = new FairAdmission({ ...CONFIG, queuePerParty: 0 }, 10);
    const held = await Promise.all(Array.from({ length: 3 }, () => admission.enter(anonymous)));
    assertRefused(await outcome(admission.enter(anonymous)), "TOO_MANY_CONCURRENT_REQUESTS");
    const tmcCall = await admission.enter(tmc("a"));
    for (const release of [...held, tmcCall]) release();
  });

  test("a queued call whose party's calls are churning gets 429 at the wait's end; one whose party's calls are stalled (none finished) gets 503 SERVICE_OVERLOADED", async () => {
    const admission = new FairAdmission({ ...CONFIG, queueWaitMs: 30 }, 2);
    // Share 1 of a pool of 2: one runs, the next waits.
    const stalled = await admission.enter(tmc("a"));
    const waiting = outcome(admission.enter(tmc("a")));
    assertRefused(await waiting, "SERVICE_OVERLOADED");
    stalled();

    const busy = await admission.enter(tmc("b"));
    const late = outcome(admission.enter(tmc("b")));
    const later = outcome(admission.enter(tmc("b")));
    // The running call finishes and hands its slot to the first waiter, which holds it past the second's wait.
    busy();
    const first = await late;
    assert.equal(typeof first, "function");
    assertRefused(await later, "TOO_MANY_CONCURRENT_REQUESTS");
    (first as Release)();
  });

  test("a caller that goes away leaves the queue with its own reason; no slot is lost", async () => {
    const admission = new FairAdmission({ ...CONFIG, queueWaitMs: 5_000 }, 2);
    const running = await admission.enter(tmc("a"));
    const gone = new AbortController();
    const abandoned = admission.enter(tmc("a"), gone.signal).catch((e: unknown) => e);
    assert.equal(admission.state.waiting, 1);
    gone.abort(new Error("client went away"));
    assert.equal(((await abandoned) as Error).message, "client went away");
    assert.equal(admission.state.waiting, 0, "it left the queue at once");
    running();
    const next = await admission.enter(tmc("a"));
    next();
    assert.deepEqual(
      { running: admission.state.running, parties: admission.state.parties },
      { running: 0, parties: 0 },
    );
  });

  test("a caller gone before it enters takes no slot, even with slots free", async () => {
    const admission = new FairAdmission(CONFIG, 10);
    const gone = new AbortController();
    gone.abort(new Error("client went away"));
    const refused = await admission.enter(tmc("a"), gone.signal).catch((e: unknown) => e);
    assert.equal((refused as Error).message, "client went away");
    assert.deepEqual(
      { running: admission.state.running, parties: admission.state.parties },
      { running: 0, parties: 0 },
    );
  });

  test("at the adaptive limit a party already running its fair part is shed at once with 503, while a party below it is still admitted", async () => {
    // limitMax 4 caps the limit below the sum of the shares (5 + 5).
    const admission = new FairAdmission({ ...CONFIG, limitMax: 4, queuePerParty: 0 }, 10);
    assert.equal(admission.state.limit, 4);
    const flood = await Promise.all(Array.from({ length: 3 }, () => admission.enter(server("rs-flood"))));
    const victim = await admission.enter(tmc("victim"));
    assert.equal(admission.state.running, 4, "at the limit");
    // The flood holds 3 of 4 with two parties running, within its share but over its fair part (2): shed with 503.
    assertRefused(await outcome(admission.enter(server("rs-flood"))), "SERVICE_OVERLOADED");
    // The victim runs 1, below its fair part: admitted over the limit.
    const victimAgain = await admission.enter(tmc("victim"));
    for (const release of [...flood, victim, victimAgain]) release();
  });
});

describe("fair-share admission at the limit: the heaviest party is shed first", () => {
  test("a steady TMC at its even part of the limit is still admitted while a flood holds more; the flood is shed", async () => {
    // limitMax 6, three parties: the even part is 2. The finding (ssf-poll-flood in CI): the victim's
    // third read in flight got 503 although the flood, not it, held most of the limit.
    const admission = new FairAdmission({ ...CONFIG, limitMax: 6, queuePerParty: 0 }, 10);
    const flood = await Promise.all(Array.from({ length: 3 }, () => admission.enter(server("rs-flood"))));
    const rotator = await admission.enter(tmc("rotator"));
    const victim = await Promise.all([admission.enter(tmc("victim")), admission.enter(tmc("victim"))]);
    assert.equal(admission.state.running, 6, "at the limit");
    assertRefused(await outcome(admission.enter(server("rs-flood"))), "SERVICE_OVERLOADED");
    // The victim runs 2 (its even part), lighter than the flood (3): one more brings it level.
    const third = await admission.enter(tmc("victim"));
    // Now as heavy as the flood: both are shed.
    assertRefused(await outcome(admission.enter(tmc("victim"))), "SERVICE_OVERLOADED");
    assertRefused(await outcome(admission.enter(server("rs-flood"))), "SERVICE_OVERLOADED");
    for (const release of [...flood, rotator, ...victim, third]) release();
    assert.equal(admission.state.running, 0);
  });

  test("a lighter party's second call goes over the limit only while fewer than limit + one party's share run", async () => {
    const admission = new FairAdmission({ ...CONFIG, limitMax: 6, queuePerParty: 0 }, 10);
    const held: Release[] = [];
    for (let i = 0; i < 5; i++) held.push(await admission.enter(server("rs-flood")));
    held.push(await admission.enter(tmc("t0")));
    assert.equal(admission.state.running, 6, "at the limit");
    for (let i = 1; i <= 12; i++) {
      // A party running nothing is always admitted (its even part is at least 1).
      held.push(await admission.enter(tmc(`t${i}`)));
      const runningBefore: number = admission.state.running;
      const second = await outcome(admission.enter(tmc(`t${i}`)));
      if (runningBefore < 6 + 5)
        assert.equal(typeof second, "function", `t${i}'s second call at ${runningBefore} running`);
      else assertRefused(second, "SERVICE_OVERLOADED");
      if (typeof second === "function") held.push(second);
    }
    assert.ok(admission.state.running > 6 + 5, "the first calls went past");
    for (const release of held) release();
    assert.equal(admission.state.running, 0);
  });
});

describe("the adaptive limit's floor", () => {
  test("latency growth cuts the limit no lower than the pool: two parties at their shares (5 + 5 of 10) are both admitted", async () => {
    let now = 0;
    const admission = new FairAdmission({ ...CONFIG, queuePerParty: 0 }, 10, () => now);
    // Calls of 1 ms, then of 200 ms: the limit is cut to its floor (and grows back once the long-term latency follows).
    let lowest = admission.state.limit;
    for (let i = 0; i < 300 && !(i > 100 && admission.state.limit > lowest); i++) {
      const release = await admission.enter(tmc("a"));
      now += i < 100 ? 1 : 200;
      release();
      lowest = Math.min(lowest, admission.state.limit);
    }
    assert.equal(lowest, 10, "cut to the pool's size, not to one share + 1 (6)");
    const held = [
      ...(await Promise.all(Array.from({ length: 5 }, () => admission.enter(tmc("a"))))),
      ...(await Promise.all(Array.from({ length: 5 }, () => admission.enter(tmc("b"))))),
    ];
    assert.equal(admission.state.running, 10);
    for (const release of held) release();
  });
});

describe("the adaptive limit (Gradient2's rule)", () => {
  test("grows while latency holds and the limit is used, holds when it is not used, and is cut when latency grows", () => {
    const limit = new AdaptiveLimit({ initial: 20, min: 6, max: 40 });
    for (let i = 0; i < 200; i++) limit.sample(5, 20);
    assert.equal(limit.current, 40, "steady latency, limit in use: up to its ceiling");
    for (let i = 0; i < 50; i++) limit.sample(5, 2);
    assert.equal(limit.current, 40, "lightly used: unchanged");
    for (let i = 0; i < 30; i++) limit.sample(200, 30);
    assert.ok(limit.current < 20, `latency 40× its long-term value: cut (now ${limit.current})`);
    for (let i = 0; i < 100; i++) limit.sample(200, 30);
    assert.equal(limit.current, 6, "never below its floor");
  });
});
