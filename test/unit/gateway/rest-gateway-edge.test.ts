import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createRouterTransport, type Transport } from "@connectrpc/connect";
import formBody from "@fastify/formbody";
import Fastify, { type FastifyInstance } from "fastify";
import { UserService } from "../../../gen/travel/user/v2/user_pb.js";
import { restRoutesOf } from "../../../src/gateway/http-rules.js";
import { jsonDepthExceeds, MAX_JSON_DEPTH } from "../../../src/gateway/json-depth.js";
import { registerRestRoutes } from "../../../src/gateway/rest-gateway.js";
import { contractServices } from "../../../src/rpc/areas.js";

/*
 * The REST gateway's own edge, without the RPC core: the depth limit on JSON bodies (a
 * google.protobuf.Struct nested 49..97 levels used to decode as JSON and then fail protobuf
 * binary's recursion limit in the in-process transport: a 500), and the log line every
 * unexpected failure leaves. Fastify's inject, the real router transport, no port.
 */

const updateUser = restRoutesOf(contractServices).filter(
  (r) => r.method.parent.typeName === UserService.typeName && r.method.name === "UpdateUser",
);
const USER_ID = "0b5e7c1e-7a0c-4f36-9d7e-3c1f5a2b9d10";
const REF = { id: "5f0e4a6b-2c1d-4e8f-9a7b-6c5d4e3f2a1b" };

interface Gateway {
  app: FastifyInstance;
  logs: Array<Record<string, unknown>>;
  calls: () => number;
}

async function gateway(transport?: Transport): Promise<Gateway> {
  let calls = 0;
  const logs: Array<Record<string, unknown>> = [];
  const router = createRouterTransport(({ service }) => {
    service(UserService, {
      updateUser: () => {
        calls++;
        return {};
      },
    });
  });
  const app = Fastify({
    logger: {
      level: "info",
      stream: { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) },
    },
  });
  await app.register(formBody);
  registerRestRoutes(app, updateUser, transport ?? router);
  await app.ready();
  return { app, logs, calls: () => calls };
}

/** An UpdateUser body whose travelPreferences Struct makes the whole body `depth` levels deep. */
function body(depth: number): string {
  // The body is level 1, travelPreferences level 2, and each array inside `deep` one more.
  const deep = `${"[".repeat(depth - 2)}${"]".repeat(depth - 2)}`;
  return `{"persona":"EMPLOYEE","businessInfo":${JSON.stringify({ legalEntityRef: REF, organizationRef: REF })},"travelPreferences":{"deep":${deep}}}`;
}

const put = (g: Gateway, payload: string) =>
  g.app.inject({
    method: "PUT",
    url: `/v2/users/${USER_ID}`,
    headers: { "content-type": "application/json" },
    payload,
  });

describe("jsonDepthExceeds", () => {
  test("counts arrays and objects from the value itself, scalars not at all", () => {
    assert.equal(jsonDepthExceeds("x", 0), false);
    assert.equal(jsonDepthExceeds(null, 0), false);
    assert.equal(jsonDepthExceeds({}, 1), false);
    assert.equal(jsonDepthExceeds({}, 0), true);
    assert.equal(jsonDepthExceeds({ a: [1, { b: "c" }] }, 3), false);
    assert.equal(jsonDepthExceeds({ a: [1, { b: "c" }] }, 2), true);
    const wide = { wide: Array.from({ length: 10_000 }, () => ({ x: [1] })) };
    assert.equal(jsonDepthExceeds(wide, 4), false);
    assert.equal(jsonDepthExceeds(wide, 3), true);
  });

  test("walks without recursion: 100 000 levels are answered, not a stack overflow", () => {
    const deep = JSON.parse(`${"[".repeat(100_000)}${"]".repeat(100_000)}`) as unknown;
    assert.equal(jsonDepthExceeds(deep, MAX_JSON_DEPTH), true);
    assert.equal(jsonDepthExceeds(deep, 100_000), false);
  });
});

describe("REST gateway edge", () => {
  test(`a body ${MAX_JSON_DEPTH} levels deep reaches the RPC; one level more is 400 API_VALIDATION_FAILED and never does`, async () => {
    const g = await gateway();
    try {
      const atLimit = await put(g, body(MAX_JSON_DEPTH));
      assert.equal(atLimit.statusCode, 200, atLimit.body);
      assert.equal(g.calls(), 1);
      for (const depth of [MAX_JSON_DEPTH + 1, 49, 50, 97, 98, 101, 5000]) {
        const response = await put(g, body(depth));
        assert.equal(response.statusCode, 400, `depth ${depth}: ${response.body}`);
        const json = JSON.parse(response.body) as {
          debugIdentifier: string;
          errorMessages: Array<{ errorCode: string; message: string }>;
        };
        assert.equal(json.debugIdentifier, response.headers["x-request-id"]);
        assert.equal(json.errorMessages[0]?.errorCode, "API_VALIDATION_FAILED");
        assert.equal(json.errorMessages[0]?.message, `The request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
      }
      assert.equal(g.calls(), 1, "no refused body reached the RPC");
      assert.deepEqual(
        g.logs.filter((l) => Number(l.level) >= 50),
        [],
        "a refusal is no error",
      );
    } finally {
      await g.app.close();
    }
  });

  test("an unexpected failure answers 500 INTERNAL_ERROR that reveals nothing, and logs its cause under the request id", async () => {
    const failing = {
      unary: () => Promise.reject(new Error("boom: the transport broke")),
      stream: () => Promise.reject(new Error("unused")),
    } as unknown as Transport;
    const g = await gateway(failing);
    try {
      const response = await put(g, body(3));
      assert.equal(response.statusCode, 500, response.body);
      const json = JSON.parse(response.body) as {
        debugIdentifier: string;
        errorMessages: Array<{ errorCode: string; message: string }>;
      };
      assert.equal(json.errorMessages[0]?.errorCode, "INTERNAL_ERROR");
      assert.doesNotMatch(response.body, /boom/);
      const logged = g.logs.filter((l) => Number(l.level) >= 50);
      assert.equal(logged.length, 1, JSON.stringify(g.logs));
      assert.equal(logged[0]!.reqId, json.debugIdentifier);
      assert.equal(logged[0]!.rpc, "travel.user.v2.UserService/UpdateUser");
      assert.match(String((logged[0]!.err as { message?: unknown }).message), /boom: the transport broke/);
    } finally {
      await g.app.close();
    }
  });
});
