// Deep pages of the air-credit list: p50/p95 of POST
// /v3/air/company-transferable-unused-credits/list at a few offsets over one company with
// CREDITS transferable credits (inserted with one SQL statement, not through the import, so
// seeding takes seconds). Runs on the backend TEST_BACKEND names (postgres: DATABASE_URL of
// the test helpers). Usage: TEST_BACKEND=postgres npx tsx bench/air-credits-deep-offset.ts [offsets...]
import { internalsOf } from "../src/app/test-access.js";
import {
  accessTokenOf,
  disposeService,
  newTenant,
  ROOMY_RATE_LIMITS,
  startTokenService,
} from "../test/helpers/token-kit.js";

const CREDITS = Number(process.env.CREDITS ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 30);
const offsets = process.argv.slice(2).map(Number);
if (offsets.length === 0) offsets.push(0, 9_900, 90_000);

// A long query timeout for the seeding statements (the default is 1 s).
const running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, DATABASE_QUERY_TIMEOUT_MS: "120000" } });
try {
  const tenant = await newTenant(running.baseUrl);
  const db = internalsOf(running.service).db;
  const source = crypto.randomUUID();
  await db("payment_sources").insert({
    id: source,
    company_id: tenant.orgId,
    fop_label: "Corporate Visa",
    credit_usage_type: "PERSONAL",
  });
  const started = Date.now();
  // In slices: one statement per slice stays within the pool's query timeout.
  for (let from = 1; from <= CREDITS; from += 10_000)
    await db.raw(
      `INSERT INTO air_credits (id, company_id, payment_source_id, supplier, airline_code, ticket_number, total_fare_amount, currency_code, issue_date, expiry_date, pcc, fop_label)
     SELECT gen_random_uuid(), ?, ?, 'SABRE', (ARRAY['AA','UA','DL','BA','LH','AF'])[1 + i % 6], lpad(i::text, 13, '0'), 100 + i % 500, 'USD',
            current_date - 30, current_date + 1 + (i * 37) % 700, 'PCC' || (i % 7), 'Corporate Visa'
       FROM generate_series(?::int, ?::int) AS i`,
      [tenant.orgId, source, from, Math.min(CREDITS, from + 9_999)],
    );
  await db.raw("ANALYZE air_credits");
  console.log(`seeded ${CREDITS} credits in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const token = await accessTokenOf(running.baseUrl, tenant.admin);
  for (const offset of offsets) {
    const times: number[] = [];
    let status = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = performance.now();
      const reply = await fetch(`${running.baseUrl}/v3/air/company-transferable-unused-credits/list`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ companyId: { id: tenant.orgId }, offset }),
      });
      await reply.arrayBuffer();
      times.push(performance.now() - t0);
      status = reply.status;
    }
    times.sort((x, y) => x - y);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(1);
    console.log(`offset ${offset}: status ${status}, p50 ${at(0.5)} ms, p95 ${at(0.95)} ms (${ROUNDS} requests)`);
  }
  await db("air_credits").where({ company_id: tenant.orgId }).delete();
} finally {
  await disposeService(running);
}
