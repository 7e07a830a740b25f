import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createContextValues, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { DomainError } from "../../../src/errors/domain-error.js";
import type { Principal } from "../../../src/domain/tokens/model.js";
import { principalKey } from "../../../src/rpc/interceptors/authentication-interceptor.js";
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
    concurrency: 2,
    queue: 1,
    rate: { points: 1000, durationSeconds: 10 },
    maxQueueWaitMs: 5_000,
    ...budget,
  });
  let started = 0;
  const call = (clientId: string | undefined, signal = new AbortController().signal): HeldCall => {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const next = async () => {
      started++;
      await done;
      return {} as UnaryResponse;
    };
    const contextValues = createContextValues();
    if (clientId) contextValues.set(principalKey, { clientId } as Principal);
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

describe("per-principal budget on bearer-authenticated RPCs (issue 18, finding 2)", () => {
  test("at most `concurrency` run at once; `queue` more wait and run in turn; beyond that 429 with Retry-After: 1", async () => {
    const { call, started } = budgeted({ concurrency: 2, queue: 1 });
    const a = call("alice");
    const b = call("alice");
    const c = call("alice");
    const d = call("alice");
    await tick();
    assert.equal(started(), 2, "two run");
    assertRefused(await d.answer, "TOO_MANY_CONCURRENT_REQUESTS", 1);
    a.finish();
    assert.equal(await a.answer, "ok");
    await tick();
    assert.equal(started(), 3, "the waiting call took the freed slot");
    b.finish();
    c.finish();
    assert.deepEqual(await Promise.all([b.answer, c.answer]), ["ok", "ok"]);
  });

  test("one principal's full budget does not touch another's, nor calls without a bearer principal", async () => {
    const { call, started } = budgeted({ concurrency: 1, queue: 0 });
    const held = call("alice");
    assertRefused(await call("alice").answer, "TOO_MANY_CONCURRENT_REQUESTS", 1);
    const bob = call("bob");
    const anonymous = [call(undefined), call(undefined)];
    await tick();
    assert.equal(started(), 4);
    for (const c of [held, bob, ...anonymous]) c.finish();
    assert.deepEqual(await Promise.all([held, bob, ...anonymous].map((c) => c.answer)), ["ok", "ok", "ok", "ok"]);
  });

  test("a queued call gives up its place when the caller goes away or waits past the deadline; the slot is not lost", async () => {
    const { call, started } = budgeted({ concurrency: 1, queue: 2, maxQueueWaitMs: 50 });
    const running = call("alice");
    const gone = new AbortController();
    const abandoned = call("alice", gone.signal);
    const late = call("alice");
    gone.abort(new Error("client went away"));
    assert.equal(((await abandoned.answer) as Error).message, "client went away");
    assertRefused(await late.answer, "TOO_MANY_CONCURRENT_REQUESTS", 1);
    running.finish();
    await running.answer;
    const after = call("alice");
    await tick();
    assert.equal(started(), 2, "neither refused call ever ran; the next one runs at once");
    after.finish();
    assert.equal(await after.answer, "ok");
  });

  test("at most `points` per window: then 429 TOO_MANY_REQUESTS with Retry-After to the window's end, and a new window allows again", async () => {
    let now = 1_000_000;
    const { call } = budgeted({ concurrency: 100, queue: 0, rate: { points: 3, durationSeconds: 10 }, now: () => now });
    for (let i = 0; i < 3; i++) {
      const c = call("alice");
      c.finish();
      assert.equal(await c.answer, "ok");
    }
    now += 2_500;
    assertRefused(await call("alice").answer, "TOO_MANY_REQUESTS", 8);
    const bob = call("bob");
    bob.finish();
    assert.equal(await bob.answer, "ok", "budgets are per principal");
    now += 7_500;
    const again = call("alice");
    again.finish();
    assert.equal(await again.answer, "ok");
  });
});
