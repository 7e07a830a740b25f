import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { RandomBytePool } from "../../../src/domain/shared/random-pool.js";

describe("RandomBytePool", () => {
  /** A pool of `size` filled with a running counter, so every byte handed out is identifiable. */
  function countingPool(size: number) {
    let next = 0;
    let fills = 0;
    const pool = new RandomBytePool(size, (buffer) => {
      fills++;
      for (let i = 0; i < buffer.length; i++) buffer[i] = next++ % 256;
    });
    return { pool, fills: () => fills };
  }

  test("hands out every byte of a fill once, in order, and refills only when the next request does not fit", () => {
    const { pool, fills } = countingPool(64);
    const out: number[] = [];
    for (let i = 0; i < 4; i++) out.push(...Buffer.from(pool.base64url(16), "base64url"));
    assert.equal(fills(), 1, "four ids of 16 bytes from one fill of 64");
    assert.deepEqual(
      out,
      Array.from({ length: 64 }, (_, i) => i),
    );
    const fifth = [...Buffer.from(pool.base64url(16), "base64url")];
    assert.equal(fills(), 2);
    assert.deepEqual(
      fifth,
      Array.from({ length: 16 }, (_, i) => 64 + i),
    );
  });

  test("a tail too short for the request is dropped, never reused", () => {
    const { pool, fills } = countingPool(40);
    const first = [...Buffer.from(pool.base64url(16), "base64url")];
    const second = [...Buffer.from(pool.base64url(16), "base64url")];
    const third = [...Buffer.from(pool.base64url(16), "base64url")];
    assert.equal(fills(), 2);
    assert.deepEqual(
      first,
      Array.from({ length: 16 }, (_, i) => i),
    );
    assert.deepEqual(
      second,
      Array.from({ length: 16 }, (_, i) => 16 + i),
    );
    assert.deepEqual(
      third,
      Array.from({ length: 16 }, (_, i) => 40 + i),
      "bytes 32-39 are skipped",
    );
  });

  test("refuses a request larger than the pool", () => {
    assert.throws(() => new RandomBytePool(8).base64url(16), RangeError);
  });

  test("the CSPRNG-filled default: 16 bytes as 22 base64url characters, no repeats", () => {
    const pool = new RandomBytePool();
    const ids = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const id = pool.base64url(16);
      assert.match(id, /^[A-Za-z0-9_-]{22}$/);
      ids.add(id);
    }
    assert.equal(ids.size, 10_000);
  });
});
