// A bounded cache of access tokens whose signature and claims were verified,
// so a client that sends the same token on every request pays for the HMAC or
// signature check once (PostgREST does the same: jwt-cache-max-lifetime).
//
// Safe because a cached entry only stands for "this exact string verified":
// it is dropped when the token expires (checked on every hit), and session
// revocation (logout) is checked in SQL in each request's own transaction,
// not here. Entries are frozen so no request can change another's claims.
export class VerifiedTokenCache<T extends { exp?: number }> {
  private readonly entries = new Map<string, T>();

  constructor(private readonly maxEntries = 10_000) {}

  /** The verified claims of `token`, or undefined (unknown or expired). */
  get(token: string, nowMs = Date.now()): T | undefined {
    const claims = this.entries.get(token);
    if (claims === undefined) return undefined;
    if (claims.exp === undefined || claims.exp * 1000 <= nowMs) {
      this.entries.delete(token);
      return undefined;
    }
    return claims;
  }

  set(token: string, claims: T): T {
    if (this.entries.size >= this.maxEntries) {
      // Oldest first (Map keeps insertion order).
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    Object.freeze(claims);
    this.entries.set(token, claims);
    return claims;
  }
}
