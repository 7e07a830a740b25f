// What the credential-change stream has said, as a resource server needs it to refuse tokens:
// each API user's current credential generation (0: revoked) and the revoked jtis until they
// expire. No I/O: the stream follower (verifier.ts) feeds it events; verify() asks it about claims.
// Events change the state; only a heartbeat whose gap check passed moves the cursor, so a stream
// that lost an event resumes from before it (every event is a state: a replay is harmless).

/** The claims of an access token this state judges (the rest of the token is not its business). */
export interface BoundClaims {
  readonly client_id: string;
  readonly gen: number;
  readonly jti: string;
  readonly creds?: ReadonlyArray<readonly [string, number]>;
}

export class RevocationState {
  private generations = new Map<string, number>();
  /** Revoked jti → its token's expiry (ms since the epoch); dropped once past it. */
  private revoked = new Map<string, number>();
  /** A snapshot being received page by page; it replaces everything on its last page. */
  private incoming: { generations: Map<string, number>; revoked: Map<string, number> } | undefined;
  private cursorValue = "";

  /** The cursor to resume from: the last one a heartbeat vouched for (every change up to it received). */
  get cursor(): string {
    return this.cursorValue;
  }

  get knownCredentials(): number {
    return this.generations.size;
  }

  get revokedTokens(): number {
    return this.revoked.size;
  }

  /** One page of a snapshot; the last page replaces the whole state (the heartbeat after it moves the cursor). */
  snapshotPage(page: {
    credentials: ReadonlyArray<{ clientId: string; generation: number }>;
    revokedTokens: ReadonlyArray<{ jti: string; expiresAtMs: number }>;
    lastPage: boolean;
  }): void {
    this.incoming ??= { generations: new Map(), revoked: new Map() };
    for (const c of page.credentials) this.incoming.generations.set(c.clientId, c.generation);
    for (const t of page.revokedTokens) this.incoming.revoked.set(t.jti, t.expiresAtMs);
    if (!page.lastPage) return;
    this.generations = this.incoming.generations;
    this.revoked = this.incoming.revoked;
    this.incoming = undefined;
  }

  credentialChanged(clientId: string, generation: number): void {
    this.generations.set(clientId, generation);
  }

  tokenRevoked(jti: string, expiresAtMs: number): void {
    this.revoked.set(jti, expiresAtMs);
  }

  /** A heartbeat's cursor, its gap check passed: every change up to it has been received and applied. */
  caughtUpTo(cursor: string): void {
    if (cursor !== "" && (this.cursorValue === "" || BigInt(cursor) > BigInt(this.cursorValue)))
      this.cursorValue = cursor;
  }

  /**
   * The service refused the cursor (ahead of its latest change: its database was restored or
   * replaced): the next stream starts with a snapshot, which replaces the state whatever its cursor.
   */
  forgetCursor(): void {
    this.cursorValue = "";
  }

  /** A stream that ended mid-snapshot: its pages are dropped (the cursor never moved past them). */
  abandonSnapshot(): void {
    this.incoming = undefined;
  }

  /**
   * Whether the stream has invalidated the token: its jti revoked, or any credential it is bound
   * to (its own `gen`, each `creds` entry) now at another generation or revoked (0). A client the
   * state does not know was created after the snapshot with its first generation: not invalidated.
   */
  isRevoked(claims: BoundClaims): boolean {
    if (this.revoked.has(claims.jti)) return true;
    if (this.invalidated(claims.client_id, claims.gen)) return true;
    if (claims.creds)
      for (const [clientId, generation] of claims.creds) if (this.invalidated(clientId, generation)) return true;
    return false;
  }

  /** Drops the revoked jtis whose tokens have expired (they are refused as expired anyway). */
  prune(nowMs: number): number {
    let dropped = 0;
    for (const [jti, expiresAtMs] of this.revoked)
      if (expiresAtMs < nowMs) {
        this.revoked.delete(jti);
        dropped++;
      }
    return dropped;
  }

  private invalidated(clientId: string, generation: number): boolean {
    const current = this.generations.get(clientId);
    return current !== undefined && (current === 0 || current !== generation);
  }
}
