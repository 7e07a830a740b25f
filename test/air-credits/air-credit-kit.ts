import assert from "node:assert/strict";
import crypto from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Ajv2020Module from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { decodeRpcStatus, errorResponseIn } from "../helpers/grpc-status.js";
import { operatorCall } from "../helpers/service.js";
import { accessTokenOf, postJson } from "../helpers/token-kit.js";

export const LIST_PATH = "/v3/air/company-transferable-unused-credits/list";
export const MIGRATE_PATH = "/v3/air/company-credits/migrations";

export type Face = "REST" | "gRPC";

/** One answer, whatever the face: an HTTP-like status and the JSON body (or the ErrorResponse). */
export interface Answer {
  status: number;
  body: Record<string, any>;
}

// ---- the reference's schemas over every answer -----------------------------------------------

/** The reference OpenAPI of the two v3 operations (/work/shared/reference, copied under test/). */
const REFERENCE = JSON.parse(readFileSync(new URL("./air-credits.openapi.json", import.meta.url), "utf8"));
const REFERENCE_ID = "https://reference.example/air-credits.openapi.json";

const Ajv2020 = ((Ajv2020Module as any).default ?? Ajv2020Module) as typeof import("ajv/dist/2020.js").default;
const addFormats = ((addFormatsModule as any).default ?? addFormatsModule) as typeof import("ajv-formats").default;
// OpenAPI 3.1 schemas are JSON Schema 2020-12; its own keywords (example, discriminator, x-*) are annotations.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addFormat("int32", {
  type: "number",
  validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31,
});
ajv.addFormat("double", { type: "number", validate: (n: number) => Number.isFinite(n) });
ajv.addSchema(REFERENCE, REFERENCE_ID);

const responseSchema = (path: string) => {
  const validate = ajv.getSchema(
    `${REFERENCE_ID}#/paths/${path.replaceAll("/", "~1")}/post/responses/200/content/application~1json/schema`,
  );
  assert.ok(validate, `the reference has a 200 schema for ${path}`);
  return validate;
};
const SUCCESS_SCHEMAS: Record<string, ReturnType<typeof responseSchema>> = {
  [LIST_PATH]: responseSchema(LIST_PATH),
  [MIGRATE_PATH]: responseSchema(MIGRATE_PATH),
};
const errorSchema = ajv.getSchema(`${REFERENCE_ID}#/components/schemas/ErrorResponse`)!;

/**
 * Every answer of the air-credit tests passes through here (rest() and the gRPC client below):
 * a 200 body must be valid against the reference's response schema of its operation, any other
 * against its ErrorResponse. What the validator reports is the assertion message.
 */
export function assertReferenceShape(path: string, answer: Answer): Answer {
  const validate = answer.status === 200 ? SUCCESS_SCHEMAS[path] : errorSchema;
  assert.ok(validate, `no reference schema for ${path}`);
  if (!validate(answer.body)) {
    const problems = (validate.errors ?? [])
      .slice(0, 10)
      .map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
    assert.fail(
      `${path} answered ${answer.status} with a body the reference's schema refuses:\n  ${problems.join("\n  ")}`,
    );
  }
  return answer;
}

const GRPC_TO_HTTP: Record<number, number> = { 0: 200, 3: 400, 5: 404, 7: 403, 16: 401 };

const root = fileURLToPath(new URL("../../", import.meta.url));
let pkg: any;

/** A grpc-js client for AirCreditService (an independent implementation of gRPC). */
export function airCreditGrpc(baseUrl: string) {
  pkg ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(["travel/aircredit/v3/air_credit.proto"], {
      includeDirs: [`${root}proto`],
      keepCase: false,
      longs: String,
      enums: String,
      defaults: false,
      oneofs: true,
    }),
  );
  const client = new pkg.travel.aircredit.v3.AirCreditService(
    new URL(baseUrl).host,
    grpc.credentials.createInsecure(),
  ) as grpc.Client & Record<string, any>;
  const call = (method: string, request: Record<string, unknown>, token?: string): Promise<Answer> => {
    const metadata = new grpc.Metadata();
    if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
    return new Promise((resolve) => {
      client[method](
        request,
        metadata,
        { deadline: Date.now() + 15_000 },
        (err: grpc.ServiceError | null, res: Record<string, any>) => {
          if (!err) return resolve({ status: 200, body: res });
          const [raw] = err.metadata?.get("grpc-status-details-bin") ?? [];
          const detail: ErrorResponse | undefined = Buffer.isBuffer(raw)
            ? errorResponseIn(decodeRpcStatus(new Uint8Array(raw)).details)
            : undefined;
          resolve({
            status: GRPC_TO_HTTP[err.code] ?? 1000 + err.code,
            body: detail ? JSON.parse(JSON.stringify(detail)) : { grpcMessage: err.message },
          });
        },
      );
    });
  };
  return {
    list: async (request: Record<string, unknown>, token?: string) =>
      assertReferenceShape(LIST_PATH, await call("listCompanyTransferableUnusedCredits", request, token)),
    migrate: async (request: Record<string, unknown>, token?: string) =>
      assertReferenceShape(MIGRATE_PATH, await call("migrateCompanyCredits", request, token)),
    close: () => client.close(),
  };
}

export async function rest(baseUrl: string, path: string, body: unknown, token?: string): Promise<Answer> {
  const reply = await postJson(baseUrl, path, body, token === undefined ? {} : { authorization: `Bearer ${token}` });
  return assertReferenceShape(path, { status: reply.status, body: reply.body });
}

export function assertErrorAnswer(answer: Answer, status: number, errorCode: string, parameterName?: string): void {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  const first = answer.body.errorMessages?.[0];
  assert.equal(first?.errorCode, errorCode, JSON.stringify(answer.body));
  if (parameterName !== undefined) {
    const names = (answer.body.errorMessages as any[]).flatMap((m) =>
      (m.errorParameters ?? []).map((p: any) => p.name),
    );
    assert.ok(
      names.includes(parameterName),
      `expected a parameter named ${parameterName}, got ${JSON.stringify(names)}`,
    );
  }
}

/** YYYY-MM-DD, `days` from today (UTC). */
export function day(days: number): string {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + days))
    .toISOString()
    .slice(0, 10);
}

export interface CreditSpec {
  ticket: string;
  airline: string;
  source: string;
  pcc: string;
  fop: string;
  access: string;
  entity: string;
  expiresIn: number;
  status?: string;
  usage?: string;
  paymentSourceId?: string;
}

/** A credit with the usual test values (AA, SABRE, PCC P1, Visa, central card access, entity E1, expiring in 30 days), overridden by `extra`. */
export function creditSpec(ticket: string, extra: Partial<CreditSpec> = {}): CreditSpec {
  return {
    ticket,
    airline: "AA",
    source: "SABRE",
    pcc: "P1",
    fop: "Visa",
    access: "CARD_ACCESS_CENTRAL",
    entity: "E1",
    expiresIn: 30,
    ...extra,
  };
}

/** A reference-shaped UnusedCreditInfo for the import. */
export function creditJson(s: CreditSpec): Record<string, unknown> {
  return {
    ticketNumber: s.ticket,
    sourcePnr: "MC5ONS",
    spotnanaPnr: "2345678",
    airlineCode: s.airline,
    airlineInfo: { airlineCode: s.airline, airlineName: `${s.airline} Airlines` },
    totalFare: { amount: 412.3, currencyCode: "USD" },
    issueDate: { iso8601: day(-60) },
    expiryDate: { iso8601: day(s.expiresIn) },
    departureDate: { iso8601: `${day(-30)}T17:32Z` },
    passengerName: { given: "Ada", family1: "Lovelace" },
    email: "ada@example.com",
    pcc: s.pcc,
    status: s.status ?? "OPEN",
    source: s.source,
    creditUsageType: s.usage ?? "PERSONAL",
    fopLabel: s.fop,
    fopCardAccessType: s.access,
    legalEntityName: s.entity,
    ticketType: "ETICKET",
    fopInfo: { paymentMethod: "CREDIT_CARD", card: { company: "VISA", number: "4111111111111111", cvv: "123" } },
    ...(s.paymentSourceId ? { paymentSourceId: s.paymentSourceId } : {}),
  };
}

export async function importCredits(
  baseUrl: string,
  companyId: string,
  credits: unknown[],
): Promise<{ created: number; updated: number }> {
  return operatorCall(baseUrl, "ImportAirCredits", { companyId, credits });
}

export async function tokenFor(
  baseUrl: string,
  client: { clientId: string; clientSecret: string },
  scope?: string,
): Promise<string> {
  return accessTokenOf(baseUrl, client as never, scope ? { scope } : {});
}

export const uuid = () => crypto.randomUUID();
