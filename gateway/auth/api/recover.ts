// Setting a password from an e-mailed link (docs/api/accounts.md#passwords-from-a-link):
// accounts made without a password (platform attendees, agent-created
// members) and password recovery for everyone.
//
//   POST /api/auth/recover        {email} → 200 whether or not the account exists
//   POST /api/auth/set-password   {token, password} → 200; 400 invalid_link / weak_password
//   GET  /auth/set-password       the page the e-mailed link opens (it posts to the route above)
//
// Links, their expiry and single use are SQL (api.auth_recover,
// api.auth_set_password); the link is e-mailed by gateway/auth/email-links.ts.
import { z } from 'zod';
import { html, page, type Page } from '../../core/web/html.ts';
import { LIMITS } from '../../core/web/limits.ts';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { content, errors, Id, succeeded } from '../../http/responses.ts';
import { Email, Password } from '../../core/web/schemas.ts';
import { hashNewPassword, type PasswordSetStart } from '../../core/auth/passwords.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { DEFAULT_AUTH_LIMITS, EMAIL_LINK_LIMIT, PASSWORD_SET_LIMIT } from '../../core/web/throttle.ts';
import { queueEmailLink } from '../email-links.ts';

const LinkToken = z
  .string()
  .regex(/^[A-Za-z0-9_-]{20,100}$/, { message: 'not a set-password link token' })
  .describe('The token of the e-mailed link (its `token` query parameter).')
  .meta({ example: 'Zq3m9VbX2kLp7RtY8wNc4HdF6sJg1AeU' });

// Trusted code only: the token is read from the page's own URL and results
// are written with textContent.
const SET_PASSWORD_SCRIPT = `
(function () {
  var form = document.getElementById('password-form');
  var status = document.getElementById('status');
  var token = new URLSearchParams(location.search).get('token') || '';
  function show(kind, text) { status.className = kind; status.textContent = text; }
  form.addEventListener('submit', async function (event) {
    event.preventDefault();
    var password = form.elements.password.value;
    if (password !== form.elements.confirm.value) { show('error', 'The two passwords differ.'); return; }
    var button = form.querySelector('button');
    button.disabled = true;
    show('', 'Saving…');
    try {
      var res = await fetch('/api/auth/set-password', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: token, password: password })
      });
      var body = {};
      try { body = await res.json(); } catch (e) {}
      if (res.ok) {
        form.hidden = true;
        show('ok', 'Your password is set. You can now sign in with the app as ' + body.email + '.');
      } else {
        show('error', body.message || 'That did not work.');
        button.disabled = false;
      }
    } catch (e) {
      show('error', 'The server could not be reached. Try again.');
      button.disabled = false;
    }
  });
})();
`;

function setPasswordPage(): Page {
  return page({
    title: 'Choose your password',
    body: html`<h1>Choose your password</h1>
<p class="meta">At least ${LIMITS.passwordMinLength} characters. The link works once.</p>
<form id="password-form" novalidate>
<label for="password">New password</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="${LIMITS.passwordMinLength}" required>
<label for="confirm">Repeat it</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" minlength="${LIMITS.passwordMinLength}" required>
<button type="submit">Set password</button>
</form>
<p id="status" role="status"></p>`,
    script: SET_PASSWORD_SCRIPT,
  });
}

function invalidLinkPage(_err: HttpError): Page {
  return page({
    title: 'Link not valid',
    body: html`<h1>This link is not valid</h1><p>Ask for a new one from the app ("Forgot password").</p>`,
  });
}

export const authRecoverRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/auth/recover',
    summary: 'E-mail a set-password link to the account with this address (the same answer when there is none).',
    description:
      'E-mails a link to set a new password to the account with this address. The answer is the same whether or not there is such an account, so that nobody learns which addresses have one. The link works once, for a limited time.',
    auth: 'public',
    body: z.object({ email: Email.describe('The e-mail address of the account.') }),
    limits: [EMAIL_LINK_LIMIT],
    invalidStatus: 400,
    responses: {
      200: succeeded({
        message: z
          .string()
          .describe('The same text whether or not an account has this address.')
          .meta({ example: 'if an account exists for this address, a link to set its password is on its way' }),
      }),
      400: errors('validation_error'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      await queueEmailLink(ctx, 'recover', ctx.body.email);
      return {
        status: 200,
        body: { success: true, message: 'if an account exists for this address, a link to set its password is on its way' },
      };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/set-password',
    summary: 'Set the password of the account an e-mailed link names; the link is then used up and sessions end.',
    description:
      "Sets the password of the account the e-mailed link names (the page the link opens calls this). The link is then used up, and the account's sessions end.",
    limits: [PASSWORD_SET_LIMIT],
    auth: 'public',
    body: z.object({ token: LinkToken, password: Password.describe(`The new password: at least ${LIMITS.passwordMinLength} characters.`) }),
    invalidStatus: 400,
    responses: {
      200: succeeded({
        user_id: Id.describe('The account whose password was set.'),
        email: z.string().describe('Its e-mail address: sign in with it.').meta({ example: 'ada@example.com' }),
      }),
      400: errors('invalid_link', 'weak_password', 'validation_error'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler({ body, db, services, clientIp }) {
      // The link checked and the request counted per address (SQL), then the
      // hash in the client's turn (never in Postgres); the link's rules are SQL.
      const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
      const passwordHash = await hashNewPassword(services.passwords, clientIp, body.password, async () => {
        const [start] = await db(
          (tx) => tx<PasswordSetStart[]>`
            select * from private.password_set_start('set_password', ${clientIp}, ${limits.maxPasswordSetsPerIp}, ${limits.windowSeconds},
                                                     null, ${body.token})`,
          claimsOf({ kind: 'gateway' }),
        );
        return start;
      });
      const [account] = await db(
        (tx) => tx<{ user_id: string; email: string }[]>`select * from api.auth_set_password(${body.token}, ${passwordHash})`,
      );
      return { status: 200, body: { success: true, user_id: account!.user_id, email: account!.email } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/auth/set-password',
    summary: 'The set-password page an e-mailed link opens.',
    description:
      'The page an e-mailed set-password link opens: a form that posts to POST /api/auth/set-password. A malformed link is 400, a used, replaced or expired one 404 (both HTML pages).',
    auth: 'public',
    query: z.object({ token: LinkToken }),
    invalidStatus: 400,
    renderError: invalidLinkPage,
    responses: {
      200: content('text/html', 'The set-password form.'),
      400: content('text/html', 'A page saying the link is malformed.'),
      404: content('text/html', 'A page saying the link is used up, replaced or expired.'),
    },
    async handler({ query, db }) {
      const [link] = await db((tx) => tx<{ valid: boolean }[]>`select api.auth_password_link_valid(${query.token}) as valid`);
      if (!link?.valid) throw new HttpError(404, 'invalid_link', 'this link is not valid or has expired');
      return { status: 200, page: setPasswordPage(), headers: { 'Cache-Control': 'no-store' } };
    },
  }),
];
