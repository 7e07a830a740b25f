import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, ConnectError, createContextValues, type UnaryRequest } from "@connectrpc/connect";
import { ApiUserService } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import { errorInterceptor } from "../../../src/rpc/interceptors/error-interceptor.js";
import { classifyDatabaseError } from "../../../src/store/postgres/unavailable.js";
import { RecordingLogger } from "../../fakes/observability.js";

/** One call of GetApiUsers through the interceptor, failing with `thrown`; the Connect error it answers. */
async function failingCall(logger: RecordingLogger, interceptor: ReturnType<typeof errorInterceptor>, thrown: Error) {
  const method = ApiUserService.method.getApiUsers;
  const req = {
    stream: false,
    service: ApiUserService,
    method,
    header: new Headers({ "content-type": "application/json" }),
    contextValues: createContextValues(),
  } as unknown as UnaryRequest;
  try {
    await interceptor(() => Promise.reject(thrown))(req);
  } catch (error) {
    return ConnectError.from(error);
  }
  assert.fail("the call was answered");
}

/** What the pool says when no connection came within DATABASE_ACQUIRE_TIMEOUT_MS. */
function acquireTimeout(): Error {
  const error = new Error("Knex: Timeout acquiring a connection. The pool is probably full.");
  error.name = "KnexTimeoutError";
  return error;
}

describe("the error interceptor's log", () => {
  test("a dependency failure is answered 503 each time, and logged once per RPC and code per interval, at warn, with the driver's error", async () => {
    const logger = new RecordingLogger();
    const interceptor = errorInterceptor(logger, classifyDatabaseError);
    const answers = [];
    for (let i = 0; i < 50; i++) answers.push(await failingCall(logger, interceptor, acquireTimeout()));
    assert.deepEqual(new Set(answers.map((a) => a.code)), new Set([Code.Unavailable]), "every call answered 503");
    assert.deepEqual(logger.messages("error"), [], "not an internal error: nothing at error");
    const warnings = logger.lines.filter((l) => l.level === "warn");
    assert.equal(warnings.length, 1, "one line for 50 requests (an outage logged one per request)");
    const line = warnings[0]!.object as { rpc: string; errorCode: string; err: Error };
    assert.equal(line.rpc, "travel.apiuser.v2.ApiUserService/GetApiUsers");
    assert.equal(line.errorCode, "DEPENDENCY_UNAVAILABLE");
    assert.equal(line.err.name, "KnexTimeoutError", "the driver's error, for the operator");
  });

  test("an internal failure is logged at error every time", async () => {
    const logger = new RecordingLogger();
    const interceptor = errorInterceptor(logger, classifyDatabaseError);
    for (let i = 0; i < 3; i++) {
      const answer = await failingCall(logger, interceptor, new TypeError("undefined is not a function"));
      assert.equal(answer.code, Code.Internal);
      assert.doesNotMatch(answer.rawMessage, /undefined is not a function/, "the cause is not sent");
    }
    assert.deepEqual(logger.messages("error"), ["rpc failed", "rpc failed", "rpc failed"]);
  });
});
