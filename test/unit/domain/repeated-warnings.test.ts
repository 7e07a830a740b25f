import assert from "node:assert/strict";
import { test } from "node:test";
import { RepeatedWarnings } from "../../../src/domain/shared/repeated-warnings.js";
import { RecordingLogger } from "../../fakes/observability.js";

test("one line per cause per interval; the next carries the count held back", () => {
  let now = 0;
  const warnings = new RepeatedWarnings(10_000, () => now);
  const logger = new RecordingLogger();
  for (let i = 0; i < 823; i++) {
    now = i * 10; // 823 requests in 8.2 s
    warnings.warn(logger, "read: breaker open", { operation: "read" }, "the cache cannot be used");
  }
  warnings.warn(logger, "write: READONLY", { operation: "write" }, "the cache cannot be used");
  assert.deepEqual(
    logger.lines.map((l) => l.object),
    [{ operation: "read" }, { operation: "write" }],
  );
  now = 10_000;
  warnings.warn(logger, "read: breaker open", { operation: "read" }, "the cache cannot be used");
  assert.deepEqual(logger.lines.at(-1)?.object, { operation: "read", suppressed: 822 });
  now = 30_000;
  warnings.warn(logger, "read: breaker open", { operation: "read" }, "the cache cannot be used");
  assert.deepEqual(logger.lines.at(-1)?.object, { operation: "read" }, "nothing held back since the last line");
});
