// E-mailed links, for the doors that send one to whoever has an address
// (POST /api/auth/recover and /auth/v1/recover: a set-password link; POST
// /account/delete: a deletion link; POST /auth/v1/otp: a sign-in code and link). Links, their expiry and single use are
// SQL (api.auth_recover, api.account_delete_request); a job (jobs/mail.ts
// email_link) looks the address up after the answer and queues the e-mail,
// which a job worker sends.
import type { Context } from '../http/route.ts';
import { DEFAULT_AUTH_LIMITS } from '../core/web/throttle.ts';

/**
 * The request half of a door that e-mails a link to whoever has an address:
 * counted per client address, the link queued as a job that looks the
 * address up after the answer, so that nothing about the answer tells
 * whether an account has it.
 */
export async function queueEmailLink(
  ctx: Pick<Context<unknown, unknown, unknown, unknown>, 'db' | 'services' | 'clientIp'>,
  kind: 'recover' | 'delete_account' | 'otp',
  email: string,
): Promise<void> {
  const { publicUrl, authLimits } = ctx.services;
  const { maxPasswordSetsPerIp, windowSeconds } = authLimits ?? DEFAULT_AUTH_LIMITS;
  await ctx.db((tx) =>
    kind === 'recover'
      ? tx`select api.auth_recover(${email}, ${publicUrl}, ${ctx.clientIp}, ${maxPasswordSetsPerIp}, ${windowSeconds})`
      : kind === 'otp'
        ? tx`select api.auth_otp_request(${email}, ${publicUrl}, ${ctx.clientIp}, ${maxPasswordSetsPerIp}, ${windowSeconds})`
        : tx`select api.account_delete_request(${email}, ${publicUrl}, ${ctx.clientIp}, ${maxPasswordSetsPerIp}, ${windowSeconds})`,
  );
}
