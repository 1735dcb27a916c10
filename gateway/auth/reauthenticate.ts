// Re-authentication: the signed-in caller's password checked again, as a
// sign-in checks it, before what acts destructively (deleting the account,
// changing its e-mail address or password: /api/mobile/account/*, PUT
// /auth/v1/user). It goes through the login throttle's door
// (private.reauthenticate_start, the comparison here,
// private.reauthenticate_finish: a wrong password is a failed sign-in), and
// gives the single-use proof the api function then consumes.
import type { Context } from '../http/route.ts';
import { HttpError, unavailable } from '../core/web/errors.ts';
import { checkPassword, type PasswordAttempt } from '../core/auth/passwords.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../core/web/throttle.ts';

/** A row of private.reauthenticate_start: a sign-in attempt (throttled, check), or no_password / password_required. */
interface ReauthenticationStart extends Omit<PasswordAttempt, 'status'> {
  status: PasswordAttempt['status'] | 'no_password' | 'password_required';
}

export type Reauthentication = { kind: 'proof'; proof: string } | { kind: 'no_password' };

/**
 * The caller's password checked again, as a sign-in checks it (its place in
 * the hashing queue first, then SQL, the comparison, SQL): the single-use
 * proof the api function consumes, or no_password for an account without
 * one. A wrong password is 401 and is counted by the login throttle.
 */
export async function reauthenticate(
  { db, services, clientIp, user }: Pick<Context<unknown, unknown, unknown, unknown>, 'db' | 'services' | 'clientIp' | 'user'>,
  password: string | undefined,
  field: string,
): Promise<Reauthentication> {
  const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
  const { passwords } = services;
  const place = password === undefined ? null : passwords.enter(clientIp);
  let start: ReauthenticationStart | undefined;
  let checked: { matched: boolean; newHash: string | null };
  try {
    [start] = await db(
      (tx) => tx<ReauthenticationStart[]>`
        select * from private.reauthenticate_start(${user!.sub}, ${typeof user!.session_id === 'string' ? user!.session_id : null},
                                                   ${clientIp}, ${passwords.cost}, ${limits.maxFailuresPerEmailAndClient},
                                                   ${limits.maxFailuresPerEmail}, ${limits.maxFailuresPerIp}, ${limits.windowSeconds},
                                                   ${password !== undefined})`,
      null,
    );
    if (start?.status === 'throttled') throw tooManyRequests(start.retry_after, 'too many failed sign-ins, try again later');
    if (start?.status === 'no_password') return { kind: 'no_password' };
    if (start?.status === 'password_required') {
      throw new HttpError(422, 'validation_error', `${field}: the account's password is required`, {
        issues: [{ path: field, message: "the account's password is required" }],
      });
    }
    checked = await checkPassword(passwords, place!, password!, start!);
  } finally {
    place?.leave();
  }
  const [result] = await db(
    (tx) => tx<{ status: string; reauthentication: string | null }[]>`
      select * from private.reauthenticate_finish(${user!.sub}, ${start!.attempt}, ${checked.matched}, ${checked.newHash})`,
    null,
  );
  if (result?.status === 'expired') throw unavailable('the password check took too long, try again');
  if (result?.status !== 'ok') throw new HttpError(401, 'invalid_credentials', 'the password is not right');
  return { kind: 'proof', proof: result.reauthentication! };
}
