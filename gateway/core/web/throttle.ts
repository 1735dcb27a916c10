// 429 answers: the error to throw, and the Retry-After header the pipeline sets
// from it. The counting itself is SQL (private.password_attempt_start / _finish for sign-ins,
// private.auth_throttle_* for refresh and verify).
import type { AuthLimits } from '../process/config.ts';
import { HttpError } from './errors.ts';

export const DEFAULT_AUTH_LIMITS: AuthLimits = {
  maxFailuresPerEmailAndClient: 10,
  maxFailuresPerEmail: 100,
  maxFailuresPerIp: 100,
  maxPasswordSetsPerIp: 100,
  windowSeconds: 900,
  maxGuestSignInsPerIp: 30,
};

/** What the doors that set a password (register, signup, set-password) say about their limits. */
export const PASSWORD_SET_LIMIT =
  `Requests are counted per client address, POST /api/auth/register, /signup and /set-password together (by default ` +
  `${DEFAULT_AUTH_LIMITS.maxPasswordSetsPerIp} in ${DEFAULT_AUTH_LIMITS.windowSeconds / 60} minutes); past them: 429 with Retry-After. ` +
  `The password is hashed only after the request's other checks, each client address taking its turn.`;

/** What the doors that e-mail a link to whoever has an address (recover, the deletion page) say about their limits. */
export const EMAIL_LINK_LIMIT =
  `Requests are counted per client address, POST /api/auth/recover, /auth/v1/recover and /account/delete together (by default ` +
  `${DEFAULT_AUTH_LIMITS.maxPasswordSetsPerIp} in ${DEFAULT_AUTH_LIMITS.windowSeconds / 60} minutes, PASSWORD_SET_MAX_PER_IP); past them: 429 with Retry-After. ` +
  'Whether an account has the address is looked up by a job after the answer, so the answer and its time are the same either way.';

/** A 429 whose details carry `retry_after` (seconds); the pipeline turns it into Retry-After. */
export function tooManyRequests(retryAfterSeconds: number, message = 'too many attempts, try again later'): HttpError {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
  return new HttpError(429, 'rate_limited', message, { retry_after: seconds });
}

/**
 * The Retry-After value for an error: its details' retry_after (a limit, or
 * SQL's JSON DETAIL such as 409 idempotency_key_in_progress's), else 1 s on
 * any 429 or 503.
 */
export function retryAfterOf(err: HttpError): string | undefined {
  const seconds = err.details?.retry_after;
  if (typeof seconds === 'number' && Number.isFinite(seconds)) return String(Math.max(1, Math.ceil(seconds)));
  return err.status === 429 || err.status === 503 ? '1' : undefined;
}
