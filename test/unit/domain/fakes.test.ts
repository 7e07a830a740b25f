import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { CredentialState } from "../../../src/domain/tokens/model.js";
import type { WatermarkRaise } from "../../../src/domain/tokens/ports.js";
import { MemoryGenerationCache } from "../../../src/store/memory/generation-cache.js";
import { FakeChangeFeed, type NotificationSource } from "../../fakes/change-feed.js";
import { FakeGenerationCache } from "../../fakes/generation-cache.js";

/** A database's NOTIFY as the feed hears it (PGlite's, in the domain tests), sent by hand. */
class Notifier implements NotificationSource {
  private readonly listeners = new Set<(payload: string) => void>();

  listen(listener: (payload: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(payload: string): void {
    for (const listener of this.listeners) listener(payload);
  }
}

/** The small fakes the domain tests stand on must keep the rules of what they replace, or those tests prove nothing. */
describe("test fakes", () => {
  describe("fake change feed", () => {
    async function started(options: { autoConnect?: boolean } = {}) {
      const db = new Notifier();
      const feed = new FakeChangeFeed(db, options);
      const seen: number[] = [];
      const log: string[] = [];
      let gate: Promise<void> = Promise.resolve();
      feed.start(
        (seq) => seen.push(seq),
        async () => {
          log.push(`catching up (connected: ${feed.connected})`);
          await gate;
        },
      );
      return { db, feed, seen, log, setGate: (g: Promise<void>) => void (gate = g) };
    }

    test("connected only once onConnected has finished; notifications are delivered, held, or lost while disconnected", async () => {
      const { db, feed, seen, log, setGate } = await started({ autoConnect: false });
      assert.equal(feed.connected, false);
      db.notify("1");
      assert.deepEqual(feed.dropped, [1], "nothing is heard before LISTEN");
      let open!: () => void;
      setGate(new Promise<void>((resolve) => (open = resolve)));
      const connecting = feed.connect();
      db.notify("2");
      assert.deepEqual([feed.connected, seen], [false, [2]], "LISTEN is in place while catching up; not connected yet");
      open();
      await connecting;
      assert.deepEqual([feed.connected, feed.connections, log], [true, 1, ["catching up (connected: false)"]]);

      feed.withhold();
      db.notify("3");
      assert.deepEqual([seen, feed.held], [[2], [3]]);
      feed.deliverHeld();
      assert.deepEqual([seen, feed.held], [[2, 3], []]);

      feed.withhold();
      db.notify("4");
      feed.disconnect();
      db.notify("5");
      assert.deepEqual(
        [feed.connected, feed.dropped, seen],
        [false, [1, 4, 5], [2, 3]],
        "in flight and later ones are lost with the connection",
      );
      await feed.connect();
      assert.deepEqual([feed.connected, feed.connections], [true, 2]);
      await feed.stop();
      db.notify("6");
      assert.deepEqual([feed.connected, seen], [false, [2, 3]]);
    });
  });

  describe("fake generation cache", () => {
    const state = (generation: number | undefined, changeSeq: number): CredentialState => ({ generation, changeSeq });

    test("keeps the rules of the src twin: a state never replaces a higher change number; the watermark rises only from at least `ifAtLeast`", async () => {
      const fake = new FakeGenerationCache();
      const twin = new MemoryGenerationCache();
      const ids = ["a", "b", "c", "d"];
      const script: Array<[string, Map<string, CredentialState>, WatermarkRaise | undefined, number]> = [
        [
          "a fill never moves the watermark",
          new Map([
            ["a", state(1, 0)],
            ["b", state(1, 0)],
          ]),
          undefined,
          0,
        ],
        ["change 1 over change 0: rises", new Map([["a", state(2, 1)]]), { to: 1, ifAtLeast: 0 }, 1],
        [
          "change 5 after a missed change 3: states land, the watermark stays",
          new Map([["a", state(undefined, 5)]]),
          { to: 5, ifAtLeast: 3 },
          1,
        ],
        [
          "an older state never replaces a newer one; a fill",
          new Map([
            ["a", state(1, 0)],
            ["b", state(undefined, 3)],
          ]),
          undefined,
          1,
        ],
        ["reconcile from 1 up to 3: rises", new Map([["b", state(undefined, 3)]]), { to: 3, ifAtLeast: 1 }, 3],
        [
          "a raise to below the watermark never lowers it",
          new Map([["c", state(undefined, 2)]]),
          { to: 2, ifAtLeast: 1 },
          3,
        ],
        [
          "change 5's publication again, now that 3 is covered: rises",
          new Map([["a", state(undefined, 5)]]),
          { to: 5, ifAtLeast: 3 },
          5,
        ],
        ["ifAtLeast below the watermark is covered too", new Map(), { to: 7, ifAtLeast: 4 }, 7],
        ["ifAtLeast above the watermark: refused even with no states", new Map(), { to: 9, ifAtLeast: 8 }, 7],
      ];
      for (const [step, states, raise, expected] of script) {
        await fake.write(states, raise);
        await twin.write(states, raise);
        assert.deepEqual(await fake.read(ids), await twin.read(ids), step);
        assert.equal(fake.watermark, expected, step);
      }
      assert.deepEqual(await fake.read(ids), {
        states: [state(undefined, 5), state(undefined, 3), state(undefined, 2), undefined],
        watermark: 7,
      });
      assert.deepEqual(
        fake.writes.map((w) => w.raised),
        [false, true, false, false, true, false, true, true, false],
        "each write records whether its raise happened",
      );
    });

    test("fails, loses writes, rolls back to a snapshot, and records every call", async () => {
      const cache = new FakeGenerationCache();
      await cache.write(new Map([["a", state(1, 0)]]), { to: 1, ifAtLeast: 0 });
      const before = cache.snapshot();
      await cache.write(new Map([["a", state(undefined, 2)]]), { to: 2, ifAtLeast: 1 });
      cache.restore(before);
      assert.deepEqual(await cache.read(["a"]), { states: [state(1, 0)], watermark: 1 });
      cache.loseWrites = true;
      await cache.write(new Map([["a", state(2, 3)]]), { to: 3, ifAtLeast: 2 });
      assert.deepEqual([cache.generationOf("a"), cache.watermark], [1, 1]);
      cache.loseWrites = false;
      cache.writeFailure = new Error("READONLY");
      await assert.rejects(cache.write(new Map([["a", state(2, 3)]]), { to: 3, ifAtLeast: 1 }), {
        message: "READONLY",
      });
      assert.equal(cache.watermark, 1);
      cache.writeFailure = undefined;
      await cache.write(new Map([["b", state(1, 0)]]));
      cache.readFailure = new Error("ECONNREFUSED");
      await assert.rejects(cache.read(["a"]), { message: "ECONNREFUSED" });
      assert.deepEqual(
        cache.writes.map((w) => [w.watermark, w.failed, w.lost, w.raised]),
        [
          [{ to: 1, ifAtLeast: 0 }, false, false, true],
          [{ to: 2, ifAtLeast: 1 }, false, false, true],
          [{ to: 3, ifAtLeast: 2 }, false, true, false],
          [{ to: 3, ifAtLeast: 1 }, true, false, false],
          [undefined, false, false, false],
        ],
      );
      assert.deepEqual(cache.reads, [
        { clientIds: ["a"], failed: false },
        { clientIds: ["a"], failed: true },
      ]);
    });
  });
});
