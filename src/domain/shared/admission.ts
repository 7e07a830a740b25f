import { DomainError } from "../../errors/domain-error.js";
import { AdaptiveLimit } from "./adaptive-limit.js";

/**
 * Who a call's database work is for: the TMC of an API user or SCIM client, a resource server,
 * or nobody known yet (a token request before its client has authenticated).
 */
export type Party =
  | { readonly kind: "tmc"; readonly id: string }
  | { readonly kind: "resource-server"; readonly id: string }
  | { readonly kind: "unauthenticated" };

export const UNAUTHENTICATED: Party = { kind: "unauthenticated" };

/** Gives the slot back; calling it again does nothing. */
export type Release = () => void;

/** One instance's admission of calls that take a database connection (the port the domain and the RPC core use). */
export interface Admission {
  /** Waits for a running slot of the party's share, or refuses (429 over the share, 503 when the instance sheds). */
  enter(party: Party, signal?: AbortSignal): Promise<Release>;
}

/** Runs `work` inside a slot of `party`; without an admission, runs it as it is. */
export async function admitted<T>(
  admission: Admission | undefined,
  party: Party,
  work: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  if (!admission) return work();
  const release = await admission.enter(party, signal);
  try {
    return await work();
  } finally {
    release();
  }
}

/** The ADMISSION_* settings (src/config/config.ts reads them; docs/configuration.md says what each does). */
export interface AdmissionConfig {
  /** The share of DATABASE_POOL_MAX one TMC or resource server may run at once on an instance (0 < share ≤ 1). */
  readonly partyShare: number;
  /** The same for unauthenticated work (client lookups before the client is known), all callers together. */
  readonly unauthenticatedShare: number;
  /** Calls of one party waiting in memory (holding no connection) for a slot; beyond: 429. */
  readonly queuePerParty: number;
  /** Longest wait for a slot; then 429, or 503 when none of the party's running calls finished meanwhile (stalled). */
  readonly queueWaitMs: number;
  /** Ceiling of the adaptive instance-wide limit (calls running at once over all parties). */
  readonly limitMax: number;
}

/** What an instance's admission is doing now: its adaptive limit, the calls running and waiting, the parties they are for. */
export interface AdmissionState {
  readonly limit: number;
  readonly running: number;
  readonly waiting: number;
  readonly parties: number;
}

interface Waiter {
  readonly grant: () => void;
}

interface PartyState {
  running: number;
  waiting: Waiter[];
  /** When one of its calls last finished (a queued call that saw none during its wait met stalled slots). */
  lastReleaseAt: number;
}

const overloaded = (message: string) =>
  new DomainError("SERVICE_OVERLOADED", message, {
    params: [{ name: "retryAfterSeconds", value: "1" }],
    retryAfterSeconds: 1,
  });

const overShare = () =>
  new DomainError("TOO_MANY_CONCURRENT_REQUESTS", "Too many requests of this caller are in progress; retry shortly", {
    params: [{ name: "retryAfterSeconds", value: "1" }],
    retryAfterSeconds: 1,
  });

/**
 * Fair-share admission for one instance. Each party may run at most its share of the database
 * pool at once (`partyShare` × the pool, `unauthenticatedShare` for all unauthenticated work
 * together), and queue `queuePerParty` more in memory for up to `queueWaitMs`; beyond that 429
 * TOO_MANY_CONCURRENT_REQUESTS, or 503 SERVICE_OVERLOADED when none of its running calls finished
 * during the wait (its slots are stalled: a Postgres stall, not a busy caller). Over all parties,
 * an adaptive limit (AdaptiveLimit) of calls running at once: at it, a party already running its
 * fair part of the limit (the limit divided among the parties running) and no lighter than the
 * heaviest party is refused at once with 503 SERVICE_OVERLOADED, while a party below either is
 * still admitted (up to one party's share over the limit), so one party's flood never sheds
 * another's calls. Every refusal carries Retry-After: 1; nothing waits unbounded.
 */
export class FairAdmission implements Admission {
  readonly #parties = new Map<string, PartyState>();
  readonly #limit: AdaptiveLimit;
  readonly #partyMax: number;
  readonly #unauthenticatedMax: number;
  #running = 0;

  constructor(
    private readonly config: AdmissionConfig,
    poolMax: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#partyMax = Math.max(1, Math.floor(poolMax * config.partyShare));
    this.#unauthenticatedMax = Math.max(1, Math.floor(poolMax * config.unauthenticatedShare));
    // Never below the pool: calls up to its size each get a connection at once, so shedding there
    // refuses work the database could start now (a Redis stall's slow samples cut the limit to one
    // share + 1, and a TMC and the unauthenticated lookups, 3 each, got 503 with nothing queued).
    const min = Math.min(config.limitMax, Math.max(this.#partyMax + 1, poolMax));
    const initial = Math.min(config.limitMax, Math.max(min, poolMax * 2));
    this.#limit = new AdaptiveLimit({ initial, min, max: config.limitMax });
  }

  /** The adaptive limit now, how many calls run and wait, and for how many parties (metrics, tests). */
  get state(): AdmissionState {
    let waiting = 0;
    for (const party of this.#parties.values()) waiting += party.waiting.length;
    return { limit: this.#limit.current, running: this.#running, waiting, parties: this.#parties.size };
  }

  async enter(party: Party, signal?: AbortSignal): Promise<Release> {
    // The caller is gone already: nothing to start for it.
    if (signal?.aborted) throw signal.reason;
    const key = keyOf(party);
    let entry = this.#parties.get(key);
    if (!entry) this.#parties.set(key, (entry = { running: 0, waiting: [], lastReleaseAt: this.now() }));
    const state = entry;
    if (state.running >= this.#maxOf(party)) {
      if (state.waiting.length >= this.config.queuePerParty) {
        this.#forgetIfIdle(key, state);
        throw overShare();
      }
      await this.#wait(key, state, signal);
    } else {
      this.#checkInstanceLimit(key, state);
      state.running++;
      this.#running++;
    }
    return this.#releaseOf(key, state);
  }

  /**
   * At the instance's limit, a party below its even part of the limit is admitted, and so is one
   * lighter than the heaviest party (max-min fairness: the heaviest is shed first), up to one
   * party's share over the limit. The even part alone shed a steady neighbour of a flood: with 3
   * parties at a limit of 6, a TMC with 2 reads in flight got 503 while the flood held 5.
   */
  #checkInstanceLimit(key: string, state: PartyState): void {
    const limit = this.#limit.current;
    if (this.#running < limit) return;
    const active = Math.max(1, this.#parties.size);
    if (state.running < Math.max(1, Math.floor(limit / active))) return;
    if (this.#running < limit + this.#partyMax && state.running < this.#heaviestRunning()) return;
    this.#forgetIfIdle(key, state);
    throw overloaded("This instance is at its concurrency limit; retry after Retry-After seconds");
  }

  #releaseOf(key: string, state: PartyState): Release {
    const startedAt = this.now();
    const inFlightAtStart = this.#running;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const now = this.now();
      this.#limit.sample(now - startedAt, inFlightAtStart);
      state.lastReleaseAt = now;
      // The slot passes to the party's first waiter as it is: the counts stay the same.
      const next = state.waiting.shift();
      if (next) return next.grant();
      state.running--;
      this.#running--;
      this.#forgetIfIdle(key, state);
    };
  }

  #wait(key: string, state: PartyState, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const since = this.now();
      const giveUp = (error: unknown) => {
        const at = state.waiting.indexOf(waiter);
        if (at < 0) return;
        state.waiting.splice(at, 1);
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#forgetIfIdle(key, state);
        // An aborted call rejects with the signal's own reason, whatever its caller aborted with.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject(error);
      };
      const onAbort = () => giveUp(signal?.reason ?? overShare());
      // Stalled: none of the party's running calls finished while this one waited (the database
      // does not answer): 503, as the calls holding the slots will answer; otherwise the caller is over its share.
      const onTimeout = () =>
        giveUp(
          state.lastReleaseAt < since
            ? overloaded("The calls ahead of this one are not finishing; retry after Retry-After seconds")
            : overShare(),
        );
      const waiter: Waiter = {
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const timer = setTimeout(onTimeout, this.config.queueWaitMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      state.waiting.push(waiter);
    });
  }

  /** The most calls any one party runs now (only when at the limit; the active parties are few). */
  #heaviestRunning(): number {
    let heaviest = 0;
    for (const party of this.#parties.values()) heaviest = Math.max(heaviest, party.running);
    return heaviest;
  }

  #maxOf(party: Party): number {
    return party.kind === "unauthenticated" ? this.#unauthenticatedMax : this.#partyMax;
  }

  #forgetIfIdle(key: string, state: PartyState): void {
    if (state.running === 0 && state.waiting.length === 0) this.#parties.delete(key);
  }
}

function keyOf(party: Party): string {
  return party.kind === "unauthenticated" ? "unauthenticated" : `${party.kind}:${party.id}`;
}
