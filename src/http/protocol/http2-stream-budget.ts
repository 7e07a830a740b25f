import http2 from "node:http2";

/**
 * What one client may ask of the HTTP/2 server (issue 18, finding 1: rapid reset, CVE-2023-44487).
 *
 * Measured before choosing (test/fuzz/http2-abuse.test.ts): one connection sending HEADERS +
 * RST_STREAM in a loop got each reset stream handed to Fastify all the same, and every one ran
 * its route to the end (a readiness check is two database round trips), so the event loop and
 * the database pool queued behind tens of thousands of requests nobody was waiting for: other
 * clients' reads took 10–15 s or failed (500/503/504). nghttp2's own reset limit (1000 at once,
 * then 33/s per session; Node 20 cannot tune it) let a reconnecting client start over each time.
 * So, as Go's net/http and nginx did after the CVE, the work a client can cause is bounded, not
 * only the streams it keeps open:
 * - a stream is dispatched on the loop turn after the read that opened it, and one the client
 *   has reset by then is never dispatched (the usual HEADERS + RST_STREAM pair arrives in one
 *   read, so this costs the attacker everything; dispatching inside that read let a route that
 *   answers at once do all its work before the reset was even parsed, measured on Node 24);
 * - SETTINGS_MAX_CONCURRENT_STREAMS (100 by default, as Go and nginx; grpc-js clients queue
 *   beyond it), and nghttp2 refuses streams over it;
 * - a reset budget: every stream the client resets (RST_STREAM with any code but NO_ERROR),
 *   before, during or after its handler, spends one token of a bucket (burst, refill per
 *   second) held per client address, shared by its sessions and kept across reconnects; the
 *   session that finds the bucket empty is ended with GOAWAY ENHANCE_YOUR_CALM, its streams not
 *   yet dispatched are refused (REFUSED_STREAM), and so is every new session from that address
 *   until a token is back. A reset while the handler runs leaves that handler running, so the
 *   handlers a client can orphan are bounded by this budget too (Go bounds running handlers per
 *   connection for the same reason). Streams the server cancels itself spend nothing;
 * - at most `h2MaxSessionsPerAddress` open sessions per client address; more are ended at once
 *   with GOAWAY ENHANCE_YOUR_CALM;
 * - a reset budget of the whole instance beside the per-address one: many addresses at once
 *   (16 in issue 31's run) each stay within their own budget for a while, yet together made every
 *   other client wait (victims' p99 1.4–3.7 s). Every client reset also spends a token of one
 *   instance-wide bucket; when it is empty, the session that has reset the most streams lately is
 *   ended with GOAWAY ENHANCE_YOUR_CALM and its address's own bucket emptied (so its reconnects are
 *   refused as above), rather than every client slowing down. A session with fewer recent resets
 *   than its address may make per second is never chosen, so the clients that only cancel a call
 *   now and then are left alone even while the bucket is empty.
 */
export interface Http2Limits {
  /** SETTINGS_MAX_CONCURRENT_STREAMS announced to every HTTP/2 client. */
  readonly h2MaxConcurrentStreams: number;
  /** Streams a client address may reset, at once. */
  readonly h2ResetBurst: number;
  /** How fast that budget refills, per second. */
  readonly h2ResetsPerSecond: number;
  /** Open HTTP/2 sessions per client address. */
  readonly h2MaxSessionsPerAddress: number;
  /** Streams all clients of this instance together may reset, at once. */
  readonly h2InstanceResetBurst: number;
  /** How fast that budget refills, per second. */
  readonly h2InstanceResetsPerSecond: number;
}

export type SessionRefusal =
  "reset budget spent" | "too many sessions from one address" | "instance reset budget spent";

/** The http2 server options that carry the limits nghttp2 enforces itself. */
export function http2ServerOptions(limits: Http2Limits): http2.ServerOptions {
  return { settings: { maxConcurrentStreams: limits.h2MaxConcurrentStreams } };
}

/**
 * True when the client reset the stream before it could be dispatched: nobody waits for its
 * answer, so it is dropped here. Its reset is still to be emitted as an 'error', which nothing
 * else will listen for (the compatibility layer is not called): unheard, it would end the process.
 */
export function droppedAsReset(stream: http2.ServerHttp2Stream): boolean {
  if (!stream.destroyed && !stream.closed) return false;
  stream.on("error", ignoreError);
  return true;
}

function ignoreError(): void {}

/**
 * Enforces the per-address parts of Http2Limits on every session of `server`. `closedByServer`
 * holds the streams the server itself cancelled (its request timeout) and the sessions it ended
 * (shutdown): their streams spend no budget.
 */
export function enforceHttp2Limits(
  server: http2.Http2Server,
  limits: Http2Limits,
  closedByServer: WeakSet<http2.ServerHttp2Stream | http2.ServerHttp2Session>,
  onRefused: (reason: SessionRefusal, address: string) => void,
  now: () => number = () => performance.now(),
): (address: string) => SessionRefusal | undefined {
  const sessionsByAddress = new Map<string, number>();
  const budget = new ResetBudget(limits.h2ResetBurst, limits.h2ResetsPerSecond, now);
  const instance = new InstanceResetBudget(limits, now, (offender) => {
    budget.empty(offender.address);
    onRefused("instance reset budget spent", offender.address);
    endCalmly(offender.session, offender.lastStreamId);
  });
  server.once("close", () => budget.stop());
  server.on("session", (session) => {
    const address = session.socket?.remoteAddress ?? "unknown";
    countWhileOpen(sessionsByAddress, address, session);
    spendOnClientResets(instance.track(session, address), budget, instance, closedByServer, onRefused);
  });

  // Checked before a connection becomes a session (dual-protocol-server.ts): destroying a session
  // from its own "session" event crashes Node 20 when the socket still holds unread bytes.
  // Reconnecting does not buy a new budget: once an address has emptied its bucket, its new
  // connections end before any of their streams is read until the bucket is half full again
  // (5 s at the defaults). Letting one in per refilled token let a client that reconnects at once
  // open a session every 50 ms, each of which carried ~1000 streams in its first reads before its
  // resets were counted: measured on the embedded backend, victims' p99 went over 1 s.
  return (address) => {
    if (budget.isSpent(address)) return "reset budget spent";
    if ((sessionsByAddress.get(address) ?? 0) >= limits.h2MaxSessionsPerAddress)
      return "too many sessions from one address";
    return undefined;
  };
}

/** The address's open sessions, counted from now until `session` closes. */
function countWhileOpen(sessionsByAddress: Map<string, number>, address: string, session: http2.ServerHttp2Session) {
  sessionsByAddress.set(address, (sessionsByAddress.get(address) ?? 0) + 1);
  session.once("close", () => {
    const left = (sessionsByAddress.get(address) ?? 1) - 1;
    if (left <= 0) sessionsByAddress.delete(address);
    else sessionsByAddress.set(address, left);
  });
}

/**
 * Every stream the client resets spends budget, however far the server had got with it.
 * Measured on Node 24 (test/fuzz/http2-abuse.test.ts): a route that answers at once (the shared
 * /readyz) has sent its whole response before the RST_STREAM that came in the same read is
 * parsed, so counting only resets "before the answer" counted nothing, nghttp2's own limit ended
 * each session with INTERNAL_ERROR after ~1000 resets, and a reconnect started over with the work
 * of every stream done. A reset that arrives while the handler runs leaves that handler running
 * to its end: work the client caused all the same. A legitimate client cancels a call now and
 * then; the budget (200, then 20/s) is for that. The session that finds the budget spent is ended.
 */
function spendOnClientResets(
  tracked: TrackedSession,
  budget: ResetBudget,
  instance: InstanceResetBudget,
  closedByServer: WeakSet<http2.ServerHttp2Stream | http2.ServerHttp2Session>,
  onRefused: (reason: SessionRefusal, address: string) => void,
): void {
  const { session, address } = tracked;
  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    tracked.lastStreamId = Math.max(tracked.lastStreamId, stream.id ?? 0);
    markServerCloses(stream, closedByServer);
    const count = () => {
      if (tracked.ended || closedByServer.has(stream) || closedByServer.has(session)) return;
      // The code of a RST_STREAM the client sent (CANCEL, mostly); NO_ERROR for a stream that ran to its end.
      if (stream.rstCode === undefined || stream.rstCode === http2.constants.NGHTTP2_NO_ERROR) return;
      if (budget.spend(address)) return instance.spend(tracked);
      tracked.ended = true;
      onRefused("reset budget spent", address);
      endCalmly(session, tracked.lastStreamId);
    };
    // A stream reset before this event is closed already, and its 'close' may have been emitted.
    if (stream.destroyed) count();
    else stream.once("close", count);
  });
}

/**
 * The server's own closes (stream.close(code), or destroy() of a stream still open: a body over
 * the limit, a handler's error) leave an RST code too; they are marked here so that only the
 * client's RST_STREAM spends its budget. (A stream the client resets is closed first and
 * destroyed after, so destroy() finds it closed.)
 */
function markServerCloses(
  stream: http2.ServerHttp2Stream,
  closedByServer: WeakSet<http2.ServerHttp2Stream | http2.ServerHttp2Session>,
): void {
  const closeStream = stream.close.bind(stream);
  stream.close = (code?: number, callback?: () => void) => {
    closedByServer.add(stream);
    closeStream(code, callback);
  };
  const destroyStream = stream.destroy.bind(stream);
  stream.destroy = (error?: Error) => {
    if (!stream.closed) closedByServer.add(stream);
    return destroyStream(error);
  };
}

/**
 * Ends the session with GOAWAY ENHANCE_YOUR_CALM: the GOAWAY at once, so that nghttp2 ignores the
 * new streams of the reads still to come (under many addresses at once, a session that had to wait
 * a loop turn for its GOAWAY carried thousands more streams), the destroy on the next turn of the
 * loop, not from inside the stream's own 'close'. When it is gone already (nghttp2 ended it), the
 * address's next connections are refused before they become sessions (enforceHttp2Limits'
 * answer), and that refusal says why.
 */
function endCalmly(session: http2.ServerHttp2Session, lastStreamId: number): void {
  // GOAWAY first, then an ordinary destroy: destroy(code) alone would take its error path,
  // which tears the socket down before the GOAWAY reaches a client that is still sending.
  if (!session.destroyed && !session.closed) session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, lastStreamId);
  setImmediate(() => {
    if (!session.destroyed) session.destroy();
  });
}

interface Bucket {
  tokens: number;
  updatedMs: number;
  /** Emptied by the address: its new sessions are refused until the bucket is half full again. */
  spent: boolean;
}

/** The reset budget: a token bucket per client address, shared by its sessions and kept across reconnects. */
class ResetBudget {
  private readonly buckets = new Map<string, Bucket>();
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    private readonly now: () => number,
  ) {
    // Buckets that have filled up again say nothing: forgetting them keeps the map to the
    // addresses that reset streams recently.
    this.sweep = setInterval(() => this.forgetFull(), 30_000);
    this.sweep.unref();
  }

  /** Takes one token from the address's bucket; false when it is empty. */
  spend(address: string): boolean {
    const bucket = this.bucketOf(address);
    if (bucket.tokens < 1) {
      bucket.spent = true;
      return false;
    }
    bucket.tokens -= 1;
    return true;
  }

  /** Empties the address's bucket: its new sessions are refused until it is half full again. */
  empty(address: string): void {
    const bucket = this.bucketOf(address);
    bucket.tokens = 0;
    bucket.spent = true;
  }

  /** The address emptied its bucket, which is not half full again yet. */
  isSpent(address: string): boolean {
    return this.buckets.has(address) && this.bucketOf(address).spent;
  }

  stop(): void {
    clearInterval(this.sweep);
  }

  /** The address's bucket, refilled to now (a new one is full). */
  private bucketOf(address: string): Bucket {
    const at = this.now();
    const bucket = this.buckets.get(address) ?? { tokens: this.burst, updatedMs: at, spent: false };
    bucket.tokens = tokensAt(bucket, at, this.burst, this.perSecond);
    bucket.updatedMs = at;
    if (bucket.tokens >= this.burst / 2) bucket.spent = false;
    this.buckets.set(address, bucket);
    return bucket;
  }

  private forgetFull(): void {
    const at = this.now();
    for (const [address, bucket] of this.buckets) {
      if (tokensAt(bucket, at, this.burst, this.perSecond) >= this.burst) this.buckets.delete(address);
    }
  }
}

/** A token bucket's tokens at `at`: what it held at `updatedMs`, refilled at `perSecond`, at most `burst`. */
function tokensAt(bucket: { tokens: number; updatedMs: number }, at: number, burst: number, perSecond: number): number {
  return Math.min(burst, bucket.tokens + ((at - bucket.updatedMs) / 1000) * perSecond);
}

/** An open session as the instance's reset budget sees it. */
interface TrackedSession {
  readonly session: http2.ServerHttp2Session;
  readonly address: string;
  lastStreamId: number;
  /** Told to go away already (by either budget): its remaining resets spend nothing more. */
  ended: boolean;
  /** Its resets lately: decays by half every RECENT_HALF_LIFE_MS. */
  recentResets: number;
  scoredAtMs: number;
}

const RECENT_HALF_LIFE_MS = 1_000;

/**
 * The instance's reset budget: one token bucket for every client together, and each open
 * session's recent resets, so that when the bucket is empty the session resetting the most is the
 * one ended (`endOffender`), not whichever reset happened to find it empty.
 */
class InstanceResetBudget {
  private readonly bucket: { tokens: number; updatedMs: number };
  private readonly sessions = new Set<TrackedSession>();

  constructor(
    private readonly limits: Http2Limits,
    private readonly now: () => number,
    private readonly endOffender: (offender: TrackedSession) => void,
  ) {
    this.bucket = { tokens: limits.h2InstanceResetBurst, updatedMs: now() };
  }

  /** Follows `session` until it closes. */
  track(session: http2.ServerHttp2Session, address: string): TrackedSession {
    const tracked = { session, address, lastStreamId: 0, ended: false, recentResets: 0, scoredAtMs: this.now() };
    this.sessions.add(tracked);
    session.once("close", () => this.sessions.delete(tracked));
    return tracked;
  }

  /** One client reset on `tracked`'s session; when the bucket is empty, the worst session is ended. */
  spend(tracked: TrackedSession): void {
    const at = this.now();
    this.score(tracked, at, 1);
    const { h2InstanceResetBurst, h2InstanceResetsPerSecond } = this.limits;
    this.bucket.tokens = tokensAt(this.bucket, at, h2InstanceResetBurst, h2InstanceResetsPerSecond);
    this.bucket.updatedMs = at;
    if (this.bucket.tokens >= 1) {
      this.bucket.tokens -= 1;
      return;
    }
    const offender = this.worst(at);
    if (!offender) return;
    offender.ended = true;
    this.endOffender(offender);
  }

  /** The session with the most recent resets, if it has more than its address may make in a second. */
  private worst(at: number): TrackedSession | undefined {
    let worst: TrackedSession | undefined;
    for (const candidate of this.sessions) {
      if (candidate.ended) continue;
      this.score(candidate, at, 0);
      if (!worst || candidate.recentResets > worst.recentResets) worst = candidate;
    }
    return worst && worst.recentResets > this.limits.h2ResetsPerSecond ? worst : undefined;
  }

  private score(tracked: TrackedSession, at: number, resets: number): void {
    tracked.recentResets = tracked.recentResets * 0.5 ** ((at - tracked.scoredAtMs) / RECENT_HALF_LIFE_MS) + resets;
    tracked.scoredAtMs = at;
  }
}
