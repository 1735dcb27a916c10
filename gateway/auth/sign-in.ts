// Password sign-in and registration, for every door that takes an e-mail
// and a password (POST /api/auth/login and /register, POST /auth/v1/token
// and /signup). Passwords are hashed and verified in the gateway
// (core/auth/passwords.ts, bounded per process; the database's CPU is shared
// by every process), and every rule around them is SQL: a sign-in is
//   private.password_attempt_start   throttling checked; the hash to compare
//                                    (a dummy for an unknown e-mail) and an attempt
//   the comparison (bcrypt, on the thread pool)
//   private.auth_login_finish        the attempt consumed: a failure counted,
//                                    or a session (and a re-hash stored), with
//                                    the client's User-Agent and address (the
//                                    owner's list of sessions shows them)
// Both run as the gateway's own role (private functions: no request role can
// read a hash); neither a password nor a hash is logged or answered.
import type { Context } from '../http/route.ts';
import type { Tx } from '../core/database/transaction.ts';
import { HttpError, unavailable } from '../core/web/errors.ts';
import { claimsOf } from '../core/auth/identity.ts';
import { checkPassword, hashNewPassword, type PasswordAttempt, type PasswordSetStart } from '../core/auth/passwords.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../core/web/throttle.ts';
import type { AuthSession, SignInRequest } from './sessions.ts';

/** What a registration gives: the address, the password, and the name other members see (optional). */
interface Registration {
  email: string;
  password: string;
  name?: string | null;
}

/** The account api.auth_register made. */
export const register = (tx: Tx, body: Registration, passwordHash: string) =>
  tx<{ user_id: string; email: string }[]>`select * from api.auth_register(${body.email}, ${passwordHash}, ${body.name ?? null})`;

/** Register and signup: the e-mail checked and the request counted per address (SQL), then the hash in the client's turn. */
export async function registrationHash({
  body,
  db,
  services,
  clientIp,
}: Pick<Context<undefined, undefined, Registration>, 'body' | 'db' | 'services' | 'clientIp'>): Promise<string> {
  const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
  return hashNewPassword(services.passwords, clientIp, body.password, async () => {
    const [start] = await db(
      (tx) => tx<PasswordSetStart[]>`
        select * from private.password_set_start('register', ${clientIp}, ${limits.maxPasswordSetsPerIp}, ${limits.windowSeconds}, ${body.email})`,
      claimsOf({ kind: 'gateway' }),
    );
    return start;
  });
}

/**
 * A sign-in with e-mail and password, for every door that takes one
 * (POST /api/auth/login, POST /auth/v1/token): its place in the hashing
 * queue first (503 when full), the throttle and the attempt (SQL), the
 * comparison, the outcome (SQL). A new session, or 401 invalid_credentials
 * (the same whether or not the e-mail exists), 429 or 503.
 */
export async function signInWithPassword({ db, services, clientIp, userAgent }: SignInRequest, email: string, password: string): Promise<AuthSession> {
  const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
  const { passwords } = services;
  // A place for the password work first: refused (503) before any SQL.
  const place = passwords.enter(clientIp);
  let checked;
  let attempt: PasswordAttempt | undefined;
  try {
    [attempt] = await db(
      (tx) => tx<PasswordAttempt[]>`
        select * from private.password_attempt_start('login', ${email}, ${clientIp}, ${passwords.cost},
                                                     ${limits.maxFailuresPerEmailAndClient}, ${limits.maxFailuresPerEmail},
                                                     ${limits.maxFailuresPerIp}, ${limits.windowSeconds})`,
      claimsOf({ kind: 'gateway' }),
    );
    if (attempt?.status === 'throttled') throw tooManyRequests(attempt.retry_after, 'too many failed logins, try again later');
    checked = await checkPassword(passwords, place, password, attempt!);
  } finally {
    place.leave();
  }
  const [result] = await db(
    (tx) => tx<(AuthSession & { status: string; user_email: string })[]>`
      select * from private.auth_login_finish(${attempt!.attempt}, ${checked.matched}, ${checked.newHash}, ${userAgent}, ${clientIp})`,
    claimsOf({ kind: 'gateway' }),
  );
  // The same answers whether or not the e-mail exists.
  if (result?.status === 'expired') throw unavailable('the sign-in took too long, try again');
  if (result?.status !== 'ok') throw new HttpError(401, 'invalid_credentials', 'invalid email or password');
  return { ...result, email: result.user_email };
}
