// The credential an Authorization header carries, read the same way on every
// door that takes one (the REST pipeline and its stream, /mcp): `Bearer`, in
// any case, then one token (RFC 6750). Which kind of credential it is, and
// whether it is valid, is for its verifier.
const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The token of `Authorization: Bearer <token>`; null when the header is absent or not of that form. */
export function bearerToken(header: string | undefined): string | null {
  const match = header ? BEARER.exec(header) : null;
  return match?.[1] ?? null;
}
