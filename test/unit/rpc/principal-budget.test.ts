import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createContextValues, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { DomainError } from "../../../src/errors/domain-error.js";
import type { Principal } from "../../../src/domain/tokens/model.js";
import { principalKey } from "../../../src/rpc/interceptors/authentication-interceptor.js";
import { FairAdmission } from "../../../src/domain/shared/admission.js";
import {
  principalBudgetInterceptor,
  type PrincipalBudget,
} from "../../../src/rpc/interceptors/principal-budget-interceptor.js";

/** A call the test finishes when it wants: it holds its running slot until then. */
interface HeldCall {
  readonly answer: Promise<unknown>;
  finish(): void;
}

function budgeted(budget: Partial<PrincipalBudget> & { now?: () => number }) {
  const interceptor = principalBudgetInterceptor({
    rate: { points: 1000, durationSeconds: 10 },
    ...budget,
  });
  let started = 0;
  const call = (
    caller: { clientId: string; tmcId: string } | undefined,
    signal = new AbortController().signal,
  ): HeldCall => {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const next = async () => {
      started++;
      await done;
      return {} as UnaryResponse;
    };
    const contextValues = createContextValues();
    if (caller) contextValues.set(principalKey, caller as Principal);
    const answer = interceptor(next as never)({ contextValues, signal } as unknown as UnaryRequest).then(
      () => "ok",
      (e: unknown) => e,
    );
    return { answer, finish };
  };
  return { call, started: () => started };
}

const tick = () => new Promise((r) => setImmediate(r));

function assertRefused(value: unknown, errorCode: string, retryAfterSeconds: number): void {
  assert.ok(value instanceof DomainError, `expected a refusal, got ${String(value)}`);
  assert.equal(value.code, errorCode);
  assert.equal(value.kind, "RESOURCE_EXHAUSTED");
  assert.equal(value.retryAfterSeconds, retryAfterSeconds);
}

const alice = { clientId: "alice", tmcId: "tmc-a" };
const amy = { clientId: "amy", tmcId: "tmc-a" };
const bob = { clientId: "bob", tmcId: "tmc-b" };

describe("bearer-authenticated RPCs: the principal's rate, the TMC's admission", () => {
  test("the share is the TMC's: two principals of one TMC share it, another TMC keeps its own; calls without a bearer principal pass", async () => {
    // A pool of 4 at half: 2 running per TMC, no queue.
    const admission = new FairAdmission(
      { partyShare: 0.5, unauthenticatedShare: 0.5, queuePerParty: 0, queueWaitMs: 1_000, limitMax: 100 },
      4,
    );
    const { call, started } = budgeted({ admission });
    const held = [call(alice), call(amy)];
    assertRefused(await call(amy).answer, "TOO_MANY_CONCURRENT_REQUESTS", 1);
    assertRefused(await call(alice).answer, "TOO_MANY_CONCURRENT_REQUESTS", 1);
    const others = [call(bob), call(bob), call(undefined), call(undefined)];
    await tick();
    assert.equal(started(), 6);
    for (const c of [...held, ...others]) c.finish();
    assert.deepEqual(await Promise.all([...held, ...others].map((c) => c.answer)), [
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
    ]);
    const again = call(alice);
    again.finish();
    assert.equal(await again.answer, "ok", "the slots came back");
  });

  test("at most `points` per window: then 429 TOO_MANY_REQUESTS with Retry-After to the window's end, and a new window allows again", async () => {
    let now = 1_000_000;
    const { call } = budgeted({ rate: { points: 3, durationSeconds: 10 }, now: () => now });
    for (let i = 0; i < 3; i++) {
      const c = call(alice);
      c.finish();
      assert.equal(await c.answer, "ok");
    }
    now += 2_500;
    assertRefused(await call(alice).answer, "TOO_MANY_REQUESTS", 8);
    const other = call(amy);
    other.finish();
    assert.equal(await other.answer, "ok", "rate budgets are per principal");
    now += 7_500;
    const again = call(alice);
    again.finish();
    assert.equal(await again.answer, "ok");
  });
});
