import type { Clock } from "../../src/domain/shared/clock.js";

/** The instant every fast test starts at, unless it picks another. */
export const FIXED_INSTANT = "2026-11-22T10:00:00.000Z";

/**
 * A frozen clock for the domain: it moves only when a test moves it (jose's `currentDate`, token
 * `iat`/`exp`, refresh-token expiry, audit times and signing-key retirement all read it).
 */
export class FakeClock {
  private ms: number;

  constructor(start: string | Date = FIXED_INSTANT) {
    this.ms = new Date(start).getTime();
  }

  /** Pass this where the domain takes a Clock. */
  readonly now: Clock = () => new Date(this.ms);

  /** Whole seconds since the epoch, as JWTs count them. */
  get epochSeconds(): number {
    return Math.floor(this.ms / 1000);
  }

  advanceSeconds(seconds: number): void {
    this.ms += seconds * 1000;
  }

  set(instant: string | Date): void {
    this.ms = new Date(instant).getTime();
  }
}
