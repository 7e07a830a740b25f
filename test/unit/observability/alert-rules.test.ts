import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { Code } from "@connectrpc/connect";
import { createMetrics } from "../../../src/observability/metrics.js";
import { codeLabel } from "../../../src/rpc/interceptors/metrics-interceptor.js";

/**
 * deploy/prometheus-alerts.yml names metrics and label values by hand; a renamed metric would
 * silently turn its alert off. Every selector in every `expr` must name a metric this service
 * exports, with label names it has, and `code` values the RPC metric can take.
 */
const rulesText = fs.readFileSync(new URL("../../../deploy/prometheus-alerts.yml", import.meta.url), "utf8");

/** The PromQL expressions of the rule file (single-line and `|` blocks). */
function expressions(text: string): string[] {
  const out: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const match = /^\s*expr:\s*(.*)$/.exec(lines[i]!);
    if (!match) continue;
    if (match[1] !== "|") {
      out.push(match[1]!);
      continue;
    }
    const block: string[] = [];
    while (i + 1 < lines.length && /^\s{10,}\S/.test(lines[i + 1]!)) block.push(lines[++i]!.trim());
    out.push(block.join(" "));
  }
  return out;
}

/** Metric selectors: `name{labels}` or `name[range]` or a bare name inside a function call. */
function selectors(expr: string): Array<{ metric: string; labels: Array<[string, string]> }> {
  const found: Array<{ metric: string; labels: Array<[string, string]> }> = [];
  const pattern = /\b([a-z_][a-z0-9_]*)\s*(\{([^}]*)\})?\s*(\[[^\]]+\])?/g;
  const promql = new Set([
    "max",
    "min",
    "sum",
    "rate",
    "increase",
    "by",
    "without",
    "clamp_min",
    "histogram_quantile",
    "le",
    "instance",
    "and",
    "or",
    "unless",
    "time",
  ]);
  for (const m of expr.matchAll(pattern)) {
    const name = m[1]!;
    if (promql.has(name)) continue;
    // Identifiers inside `by (...)` are label names, not metrics.
    const before = expr.slice(0, m.index).trimEnd();
    if (/by\s*\([^)]*$/.test(before)) continue;
    const labels = [...(m[3] ?? "").matchAll(/([a-z_]+)\s*=~?\s*"([^"]*)"/g)].map(
      (l) => [l[1]!, l[2]!] as [string, string],
    );
    found.push({ metric: name, labels });
  }
  return found;
}

/** Throws naming the first selector of `text` that /metrics cannot satisfy; returns how many were checked. */
async function checkRules(text: string): Promise<number> {
  const metrics = createMetrics();
  const exported = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
  // The values the metrics interceptor emits: "ok", then every Connect code as it labels it.
  const rpcCodes = new Set([
    "ok",
    ...Object.values(Code)
      .filter((v): v is Code => typeof v === "number")
      .map(codeLabel),
  ]);
  let checked = 0;
  for (const expr of expressions(text)) {
    for (const { metric, labels } of selectors(expr)) {
      const base = metric.replace(/_(bucket|sum|count)$/, "");
      assert.ok(
        exported.has(metric) || exported.has(base),
        `alert expression names ${metric}, which /metrics does not export: ${expr}`,
      );
      for (const [label, value] of labels) {
        assert.ok(hasLabel(metrics, base, label), `${metric} has no label ${label}`);
        if (label === "code")
          for (const code of value.split("|"))
            assert.ok(rpcCodes.has(code), `rpc code label value ${code} is never emitted`);
      }
      checked++;
    }
  }
  return checked;
}

test("every metric an alert rule names is exported, with the labels and code values it uses", async () => {
  assert.ok(expressions(rulesText).length >= 8);
  assert.ok((await checkRules(rulesText)) >= 10);
});

test("the check fails for a metric, a label or a code value that does not exist", async () => {
  await assert.rejects(checkRules("        expr: sum(rate(auth_tokens_made_up_total[5m])) > 0"), /does not export/);
  await assert.rejects(
    checkRules('        expr: sum(rate(rpc_requests_total{grant="x"}[5m])) > 0'),
    /has no label grant/,
  );
  await assert.rejects(
    checkRules('        expr: sum(rate(rpc_requests_total{code=~"PermissionDenied"}[5m])) > 0'),
    /never emitted/,
  );
});

/** prom-client keeps label names on the metric objects, not in the JSON dump. */
function hasLabel(metrics: ReturnType<typeof createMetrics>, metric: string, label: string): boolean {
  if (label === "le" || label === "instance") return true;
  for (const value of Object.values(metrics)) {
    const m = value as { name?: string; labelNames?: readonly string[] };
    if (m.name === metric && m.labelNames?.includes(label)) return true;
  }
  return false;
}

/*
 * Prometheus's own checker and unit tester (promtool, from Debian's prometheus package; .ci/run
 * installs it): the rule file parses as Prometheus parses it, and the alerts of
 * deploy/prometheus-alerts.test.yml fire on the series a failure leaves, with their labels and
 * summaries, and stay silent on a healthy instance.
 */
const deployDir = fileURLToPath(new URL("../../../deploy/", import.meta.url));

function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync("promtool", args, { cwd: deployDir, encoding: "utf8" });
  if (run.error) throw new Error(`promtool is needed (apt-get install prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

test("promtool: the rule file passes `promtool check rules`, and its unit tests pass", () => {
  const check = promtool("check", "rules", "prometheus-alerts.yml");
  assert.equal(check.status, 0, check.output);
  const tests = promtool("test", "rules", "prometheus-alerts.test.yml");
  assert.equal(tests.status, 0, tests.output);
});

test("promtool: a unit test that expects the wrong alert fails (the check can fail)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "alert-rules-"));
  try {
    fs.copyFileSync(path.join(deployDir, "prometheus-alerts.yml"), path.join(dir, "prometheus-alerts.yml"));
    const wrong = fs
      .readFileSync(path.join(deployDir, "prometheus-alerts.test.yml"), "utf8")
      .replace("Redis circuit breaker open on a:", "Redis circuit breaker open on b:");
    fs.writeFileSync(path.join(dir, "wrong.test.yml"), wrong);
    const run = spawnSync("promtool", ["test", "rules", "wrong.test.yml"], { cwd: dir, encoding: "utf8" });
    assert.notEqual(run.status, 0, `${run.stdout}${run.stderr}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
