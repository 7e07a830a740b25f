import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { internalsOf } from "../../src/app/test-access.js";
import { clientCredentialsOf } from "../../src/domain/shared/client-credentials.js";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, operatorHeaders, startService, type RunningService } from "../helpers/service.js";

interface Created {
  clientId: string;
  clientSecret: string;
}

const basic = (clientId: string, secret: string) =>
  clientCredentialsOf({
    formClientId: "",
    formClientSecret: "",
    authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString("base64")}`,
  });

/** Resource-server authentication on `running` (what introspection by a resource server runs first). */
async function authenticates(running: RunningService, clientId: string, secret: string): Promise<boolean> {
  const authenticator = internalsOf(running.service).domain.resourceServerAuthenticator;
  return authenticator.authenticate(basic(clientId, secret)).then(
    (server) => server.clientId === clientId,
    (error: { code?: string }) => {
      assert.equal(error.code, "RESOURCE_SERVER_AUTHENTICATION_FAILED");
      return false;
    },
  );
}

/** An OperatorService call with Connect's JSON: the HTTP status and the body, refused or not. */
async function operatorAnswer(baseUrl: string, method: string, body: object) {
  const response = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/${method}`, {
    method: "POST",
    headers: { ...operatorHeaders, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

// Several instances share state only through Postgres and Redis: the embedded default is one instance.
describe(
  "resource servers across two instances on one Postgres and Redis",
  { skip: !isPostgres && "needs a shared Postgres and Redis" },
  () => {
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    before(async () => {
      storage = newStorage();
      [a, b] = await Promise.all([startService({ storage }), startService({ storage })]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      if (storage) await dropStorage(storage);
    });

    test("created on A, it authenticates on B; rotated on A, B refuses the old secret as soon as A answers; removed on B, both refuse it", async () => {
      const server = await operatorCall<Created>(a.baseUrl, "CreateResourceServer", {
        name: "Trips",
        audiences: ["https://trips.example/api"],
      });
      assert.equal(await authenticates(b, server.clientId, server.clientSecret), true, "B holds the record now");
      assert.equal(await authenticates(b, server.clientId, server.clientSecret), true);

      const rotated = await operatorCall<Created>(a.baseUrl, "RotateResourceServerSecret", {
        clientId: server.clientId,
      });
      assert.equal(await authenticates(b, server.clientId, server.clientSecret), false, "the old secret on B");
      assert.equal(await authenticates(a, server.clientId, server.clientSecret), false, "the old secret on A");
      assert.equal(await authenticates(b, server.clientId, rotated.clientSecret), true, "the new one everywhere");
      assert.equal(await authenticates(a, server.clientId, rotated.clientSecret), true);

      await operatorCall(b.baseUrl, "RemoveResourceServer", { clientId: server.clientId });
      assert.equal(await authenticates(a, server.clientId, rotated.clientSecret), false, "removed, on A");
      assert.equal(await authenticates(b, server.clientId, rotated.clientSecret), false, "removed, on B");
      const gone = await operatorAnswer(a.baseUrl, "GetResourceServer", { clientId: server.clientId });
      assert.deepEqual([gone.status, gone.body.code], [404, "not_found"]);

      // The secrets are in the create and rotate answers only: not in either instance's log.
      for (const running of [a, b])
        for (const secret of [server.clientSecret, rotated.clientSecret])
          assert.equal(running.logs().includes(secret), false, "a secret in the log");
    });

    test("six registrations of one audience at once over both instances: exactly one wins, the others are 409 naming it", async () => {
      const audience = `https://race-${Date.now()}.example/api`;
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          operatorAnswer((i % 2 === 0 ? a : b).baseUrl, "CreateResourceServer", {
            name: `Racer ${i}`,
            audiences: [audience],
          }),
        ),
      );
      assert.deepEqual(answers.map((x) => x.status).sort(), [200, 409, 409, 409, 409, 409], JSON.stringify(answers));
      for (const refused of answers.filter((x) => x.status === 409)) {
        assert.equal(refused.body.code, "already_exists");
        assert.equal(refused.body.message, "An audience is already served by another resource server");
      }
      const listed = await operatorCall<{ resourceServers: Array<{ audiences: string[] }> }>(
        b.baseUrl,
        "ListResourceServers",
        { limit: 1000 },
      );
      assert.equal(listed.resourceServers.filter((s) => s.audiences.includes(audience)).length, 1);
    });
  },
);
