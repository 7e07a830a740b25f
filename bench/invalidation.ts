// The invalidation delay: two service instances over the same Postgres + Redis. Get a token for
// an API user, poll an authenticated read with it on instance B in a tight loop (two probes in
// flight, keep-alive), rotate that API user's secret on instance A, and look at the probes:
//
//   refusedWhenAnswered  every probe sent after the rotate answer arrived was refused (401)
//   delayMs              when B started refusing, relative to the arrival of the rotate answer
//                        (0 or negative = before the rotate call returned)
//
// The same measure, with the probe aimed at the sample protected service (examples/) that
// follows B's change stream, is the propagation delay: there a refusal after the
// answer is expected (the event travels after the commit) and what must never happen is an
// accept after the first refusal (acceptedAfterRefusal).
//
// A probe is decided by B somewhere between its send and its answer, so B switched after the
// last accepted probe was sent and before the first refused probe was answered: delayBoundsMs
// is that interval, delayMs its midpoint. "Every probe sent after the answer was refused" is the
// direct check; probeGapMs (the largest send-time gap between probes around the answer) is its
// resolution.
import { performance } from "node:perf_hooks";
import { FORM, JSON_TYPE, form, request } from "./http.js";

export interface InvalidationSample {
  readonly refusedWhenAnswered: boolean;
  /** Midpoint of delayBoundsMs; null: B never refused within the timeout. */
  readonly delayMs: number | null;
  /** B switched within (last accepted probe sent, first refused probe answered], relative to the rotate answer. */
  readonly delayBoundsMs: readonly [number, number] | null;
  /** Largest gap between probe send times within ±50 ms of the rotate answer. */
  readonly probeGapMs: number;
  /** How long the rotate call took (send to answer). */
  readonly rotateMs: number;
  readonly probes: number;
  /** Probes sent after the rotate answer that B still accepted (must be 0 for B itself). */
  readonly acceptedAfterAnswer: number;
  /** Probes sent after the first refusal was answered that were accepted (must be 0 everywhere). */
  readonly acceptedAfterRefusal: number;
  /** Probes with neither 200 nor 401 (errors). */
  readonly otherStatuses: number;
}

export interface Victim {
  clientId: string;
  clientSecret: string;
}

/** What is polled with the victim's token: B's authenticated read, or a protected service's route. */
export interface Probe {
  readonly url: string;
  /** Extra token-request parameters (the protected service's audience, as `resource`). */
  readonly tokenParams?: Readonly<Record<string, string>>;
  readonly name: string;
}

const PROBES_IN_FLIGHT = 2;
const TIMEOUT_MS = 2_000;

async function issue(baseUrl: string, victim: Victim, params: Readonly<Record<string, string>> = {}): Promise<string> {
  const answer = await request(`${baseUrl}/v2/auth/oauth2-token`, {
    headers: FORM,
    body: form({
      grant_type: "client_credentials",
      client_id: victim.clientId,
      client_secret: victim.clientSecret,
      ...params,
    }),
  });
  const token = answer.status === 200 ? answer.json<{ access_token?: string }>().access_token : undefined;
  if (!token)
    throw new Error(`invalidation: token for the probe client answered ${answer.status} ${answer.text.slice(0, 200)}`);
  return token;
}

/** B's authenticated read, the invalidation probe. */
export const readOn = (b: string): Probe => ({ url: `${b}/v2/api-users?limit=1`, name: "instance B" });

/** One repetition; updates victim.clientSecret to the rotated secret. */
export async function measureInvalidationOnce(
  a: string,
  probe: Probe,
  adminToken: string,
  victim: Victim,
): Promise<InvalidationSample> {
  const token = await issue(a, victim, probe.tokenParams);
  const readUrl = probe.url;
  const auth = { authorization: `Bearer ${token}` };
  // B must accept the fresh token first (it was issued on A a moment ago).
  const acceptDeadline = performance.now() + TIMEOUT_MS;
  for (;;) {
    const answer = await request(readUrl, { headers: auth });
    if (answer.status === 200) break;
    if (performance.now() > acceptDeadline)
      throw new Error(
        `invalidation: ${probe.name} does not accept a fresh token (${answer.status} ${answer.text.slice(0, 200)})`,
      );
    await new Promise((r) => setTimeout(r, 20));
  }

  const probes: Array<{ sent: number; answered: number; status: number }> = [];
  let answeredAt: number | undefined;
  let refusedAfterAnswer = 0;
  let stop = false;
  const prober = async () => {
    while (!stop) {
      const sent = performance.now();
      let status: number;
      try {
        status = (await request(readUrl, { headers: auth, timeoutMs: TIMEOUT_MS })).status;
      } catch {
        status = 0;
      }
      probes.push({ sent, answered: performance.now(), status });
      if (answeredAt !== undefined && sent >= answeredAt) {
        if (status === 401) refusedAfterAnswer++;
        if (refusedAfterAnswer >= 3 || performance.now() - answeredAt > TIMEOUT_MS) stop = true;
      }
    }
  };
  const probing = Promise.all(Array.from({ length: PROBES_IN_FLIGHT }, prober));
  try {
    await new Promise((r) => setTimeout(r, 25)); // a few accepted probes first
    const rotateSent = performance.now();
    const rotated = await request(`${a}/v2/api-users/rotate`, {
      headers: { ...JSON_TYPE, authorization: `Bearer ${adminToken}` },
      body: JSON.stringify({ clientId: victim.clientId }),
    });
    answeredAt = performance.now();
    const secret = rotated.status === 200 ? rotated.json<{ clientSecret?: string }>().clientSecret : undefined;
    if (!secret) throw new Error(`invalidation: rotate on A answered ${rotated.status} ${rotated.text.slice(0, 200)}`);
    victim.clientSecret = secret;
    await probing;
    probes.sort((x, y) => x.sent - y.sent);
    const at = answeredAt;
    const firstRefusal = probes.find((p) => p.status === 401);
    const lastAccepted = probes.findLast((p) => p.status === 200 && (!firstRefusal || p.sent < firstRefusal.answered));
    const bounds: [number, number] | null = firstRefusal
      ? [(lastAccepted?.sent ?? -Infinity) - at, firstRefusal.answered - at]
      : null;
    const after = probes.filter((p) => p.sent >= at);
    const acceptedAfterAnswer = after.filter((p) => p.status === 200).length;
    const acceptedAfterRefusal = firstRefusal
      ? probes.filter((p) => p.sent >= firstRefusal.answered && p.status === 200).length
      : 0;
    const near = probes.filter((p) => Math.abs(p.sent - at) <= 50).map((p) => p.sent);
    let probeGapMs = 0;
    for (let i = 1; i < near.length; i++) probeGapMs = Math.max(probeGapMs, near[i]! - near[i - 1]!);
    return {
      refusedWhenAnswered: after.length > 0 && acceptedAfterAnswer === 0,
      delayMs: bounds ? (Number.isFinite(bounds[0]) ? (bounds[0] + bounds[1]) / 2 : bounds[1]) : null,
      delayBoundsMs: bounds,
      probeGapMs,
      rotateMs: at - rotateSent,
      probes: probes.length,
      acceptedAfterAnswer,
      acceptedAfterRefusal,
      otherStatuses: probes.filter((p) => p.status !== 200 && p.status !== 401).length,
    };
  } finally {
    stop = true;
    await probing;
  }
}
