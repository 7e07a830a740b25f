import assert from "node:assert/strict";
import { test } from "node:test";
import { LruMap } from "../../../src/domain/shared/lru-map.js";

test("LruMap holds at most its capacity; the least recently set or touched leaves first", () => {
  const map = new LruMap<string, number>(2);
  map.set("a", 1);
  map.set("b", 2);
  assert.equal(map.touch("a"), 1, "touch returns the value and makes it the newest");
  map.set("c", 3);
  assert.deepEqual([map.get("a"), map.get("b"), map.get("c"), map.size], [1, undefined, 3, 2]);
  map.get("a"); // get does not refresh
  map.set("d", 4);
  assert.deepEqual([map.get("a"), map.get("c"), map.get("d")], [undefined, 3, 4]);
  map.delete("c");
  assert.equal(map.size, 1);
  assert.equal(map.touch("missing"), undefined);
});
