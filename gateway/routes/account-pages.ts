// The web pages of an account (docs/api/accounts.md#your-account): HTML forms that
// work without JavaScript, under the pages' CSP (core/web/html.ts).
//
//   GET  /account/delete            a form: the account's e-mail address
//   POST /account/delete            e-mails the account a deletion link; the same page whatever the address
//   GET  /account/delete/confirm    the page the deletion link opens: one button
//   POST /account/delete/confirm    deletes the account (api.account_delete_confirm)
//   GET  /account/email/confirm     the page an e-mail change link opens: one button, or "cannot be used"
//   POST /account/email/confirm     the new address becomes the account's (api.account_email_change_confirm)
//
// A link only shows its page on GET (mail scanners open links): the change
// is the form's POST. Links, their expiry, single use and the limits are SQL
// (sql/areas/account.sql).
import { z } from 'zod';
import { html, page, type Page } from '../core/web/html.ts';
import { HttpError } from '../core/web/errors.ts';
import { Email } from '../core/web/schemas.ts';
import { defineRoute } from '../http/route.ts';
import { content } from '../http/responses.ts';
import { EMAIL_LINK_LIMIT } from '../core/web/throttle.ts';
import { queueEmailLink } from '../auth/email-links.ts';

const LinkToken = (what: string) =>
  z
    .string()
    .regex(/^[A-Za-z0-9_-]{20,100}$/, { message: `not ${what}` })
    .describe(`The token of the e-mailed link (its \`${what === 'an e-mail change link' ? 'token_hash' : 'token'}\` parameter).`)
    .meta({ example: 'Zq3m9VbX2kLp7RtY8wNc4HdF6sJg1AeU' });
const DeleteToken = LinkToken('a deletion link');
const EmailChangeToken = LinkToken('an e-mail change link');
const LinkType = z.literal('email_change').optional().describe('The kind of link: `email_change` (optional).');

const NO_STORE = { 'Cache-Control': 'no-store' };

/** What deleting an account deletes and keeps, on the pages that ask for it. */
const WHAT_GOES = html`<p>Deleting the account deletes for good its profile, hats, memberships, check-ins, connections (yours and
those others made to you), tasks and deals, API tokens, agent access, sessions, calendar feed and stored files. Every device
signed in to it is signed out at once. Communities keep their events; counts drop you. The address can be used for a new
account afterwards.</p>`;

function requestPage(): Page {
  return page({
    title: 'Delete your account',
    body: html`<h1>Delete your account</h1>
${WHAT_GOES}
<p class="meta">Enter the e-mail address of the account. We send it a link (valid for 1 hour) to confirm the deletion.</p>
<form method="post" action="/account/delete">
<label for="email">E-mail address</label>
<input id="email" name="email" type="email" autocomplete="email" required>
<button type="submit">Send me the link</button>
</form>`,
  });
}

function requestSentPage(): Page {
  return page({
    title: 'Check your inbox',
    body: html`<h1>Check your inbox</h1>
<p>If an account has this address, a link to confirm its deletion is on its way to it. The link works once, for 1 hour.</p>
<p class="meta">Nothing is deleted until the link is opened and the deletion confirmed.</p>`,
  });
}

function confirmDeletePage(token: string, email: string): Page {
  return page({
    title: 'Delete your account',
    body: html`<h1>Delete the account ${email}?</h1>
${WHAT_GOES}
<form method="post" action="/account/delete/confirm">
<input type="hidden" name="token" value="${token}">
<button type="submit">Delete my account for good</button>
</form>`,
  });
}

function deletedPage(): Page {
  return page({
    title: 'Account deleted',
    body: html`<h1>Your account is deleted</h1><p>Everything in it is gone, and every device is signed out. Thank you for having been here.</p>`,
  });
}

function confirmEmailPage(tokenHash: string, email: string): Page {
  return page({
    title: 'Confirm your new e-mail address',
    body: html`<h1>Use ${email} for your account?</h1>
<p>From then on you sign in with this address.</p>
<form method="post" action="/account/email/confirm">
<input type="hidden" name="token_hash" value="${tokenHash}">
<input type="hidden" name="type" value="email_change">
<button type="submit">Use this address</button>
</form>`,
  });
}

function emailChangedPage(email: string): Page {
  return page({
    title: 'E-mail address changed',
    body: html`<h1>Your e-mail address is now ${email}</h1><p>Sign in with it from now on.</p>`,
  });
}

/** The error pages of these routes: what went wrong, and what to do. */
function accountErrorPage(err: HttpError): Page {
  if (err.code === 'last_manager_of_communities') {
    const communities = (err.details?.communities ?? []) as { id: string; name: string }[];
    return page({
      title: 'The account cannot be deleted yet',
      body: html`<h1>The account cannot be deleted yet</h1>
<p>It is the only manager of ${communities.length === 1 ? 'this community' : 'these communities'}:</p>
<ul>${communities.map((c) => html`<li>${c.name}</li>`)}</ul>
<p>Make another member a manager of each, then open the link again (it still works until it expires).</p>`,
    });
  }
  if (err.code === 'email_taken' || err.code === 'conflict') {
    return page({
      title: 'This address cannot be used',
      body: html`<h1>This address cannot be used</h1><p>Another account has it. Your account keeps its current address.</p>`,
    });
  }
  const issues = (err.details?.issues ?? []) as { path: string }[];
  if (err.status === 400 && issues.some((i) => i.path === 'body.email')) {
    return page({ title: 'Not an e-mail address', body: html`<h1>That is not an e-mail address</h1><p><a href="/account/delete">Try again</a>.</p>` });
  }
  if (err.status === 429 || err.status >= 500) {
    return page({ title: 'Try again later', body: html`<h1>Something went wrong</h1><p>Try again in a moment.</p>` });
  }
  return page({
    title: 'Link not valid',
    body: html`<h1>This link is not valid</h1><p>It was used, replaced by a newer one, or has expired. Ask for a new one.</p>`,
  });
}

const PAGE_ERRORS = {
  400: content('text/html', 'A page saying the input or the link is malformed, or the link is used up, replaced or expired.'),
  404: content('text/html', 'A page saying the link is used up, replaced or expired.'),
  429: content('text/html', 'A page asking to try again later.'),
  503: content('text/html', 'A page asking to try again later.'),
} as const;

export const accountPageRoutes = [
  defineRoute({
    method: 'get',
    path: '/account/delete',
    summary: 'The web page to delete an account without the app: it asks for the e-mail address.',
    description:
      'A page to delete an account without the app (no JavaScript needed): the account\'s e-mail address is posted to POST /account/delete, ' +
      'which e-mails the account a link to confirm the deletion.',
    auth: 'public',
    renderError: accountErrorPage,
    responses: { 200: content('text/html', 'The form.'), 503: PAGE_ERRORS[503] },
    async handler() {
      return { status: 200, page: requestPage(), headers: NO_STORE };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/account/delete',
    summary: 'E-mail the account with this address a link to confirm its deletion (the same page whatever the address).',
    description:
      'The form of GET /account/delete. E-mails the account with this address a single-use link (1 hour) to a page that confirms the ' +
      'deletion. The answer is the same page whether or not an account has the address.',
    limits: ['At most 5 deletion links an hour are e-mailed to an account (later requests answer the same page and send nothing).', EMAIL_LINK_LIMIT],
    auth: 'public',
    bodyType: 'form',
    body: z.object({ email: Email.describe("The account's e-mail address.") }).meta({ example: { email: 'ada@example.com' } }),
    invalidStatus: 400,
    renderError: accountErrorPage,
    responses: {
      200: content('text/html', 'A page saying a link is on its way if an account has the address.'),
      400: PAGE_ERRORS[400],
      429: PAGE_ERRORS[429],
      503: PAGE_ERRORS[503],
    },
    async handler(ctx) {
      await queueEmailLink(ctx, 'delete_account', ctx.body.email);
      return { status: 200, page: requestSentPage(), headers: NO_STORE };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/account/delete/confirm',
    summary: 'The page an e-mailed deletion link opens: one button deletes the account.',
    description:
      'The page an e-mailed deletion link opens: the account it deletes and a button that posts to POST /account/delete/confirm. ' +
      'Opening it deletes nothing. A malformed link is 400, a used, replaced or expired one 404 (both HTML pages).',
    auth: 'public',
    query: z.object({ token: DeleteToken }),
    invalidStatus: 400,
    renderError: accountErrorPage,
    responses: { 200: content('text/html', 'The confirmation form.'), 400: PAGE_ERRORS[400], 404: PAGE_ERRORS[404], 503: PAGE_ERRORS[503] },
    async handler({ query, db }) {
      const [row] = await db((tx) => tx<{ link: { email: string } | null }[]>`select api.account_delete_link(${query.token}) as link`);
      if (!row?.link) throw new HttpError(404, 'invalid_link', 'this link is not valid or has expired');
      return { status: 200, page: confirmDeletePage(query.token, row.link.email), headers: NO_STORE };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/account/delete/confirm',
    summary: 'Delete the account of an e-mailed deletion link (the form of its page).',
    description:
      'The form of GET /account/delete/confirm: deletes the account of the link, as DELETE /api/mobile/account does. A used, replaced ' +
      'or expired link is 400; the only manager of a community is 409 (the page names the communities).',
    auth: 'public',
    bodyType: 'form',
    body: z.object({ token: DeleteToken }).meta({ example: { token: 'Zq3m9VbX2kLp7RtY8wNc4HdF6sJg1AeU' } }),
    invalidStatus: 400,
    renderError: accountErrorPage,
    responses: {
      200: content('text/html', 'A page saying the account is deleted.'),
      400: PAGE_ERRORS[400],
      409: content('text/html', 'A page naming the communities the account is the only manager of.'),
      503: PAGE_ERRORS[503],
    },
    async handler({ body, db }) {
      await db((tx) => tx`select api.account_delete_confirm(${body.token})`);
      return { status: 200, page: deletedPage(), headers: NO_STORE };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/account/email/confirm',
    summary: 'The page an e-mail change link opens: one button makes the new address the account\'s.',
    description:
      'The page an e-mail change link (sent to the new address) opens: a button that posts to POST /account/email/confirm, or, when ' +
      'another account has the address, a page saying it cannot be used (409). Opening it changes nothing. A malformed link is 400, ' +
      'a used, replaced or expired one 404 (HTML pages).',
    auth: 'public',
    query: z.object({ token_hash: EmailChangeToken, type: LinkType }),
    invalidStatus: 400,
    renderError: accountErrorPage,
    responses: {
      200: content('text/html', 'The confirmation form.'),
      400: PAGE_ERRORS[400],
      404: PAGE_ERRORS[404],
      409: content('text/html', 'A page saying the address cannot be used: another account has it.'),
      503: PAGE_ERRORS[503],
    },
    async handler({ query, db }) {
      const [row] = await db(
        (tx) => tx<{ link: { email: string; available: boolean } | null }[]>`select api.account_email_change_link(${query.token_hash}) as link`,
      );
      if (!row?.link) throw new HttpError(404, 'invalid_link', 'this link is not valid or has expired');
      if (!row.link.available) throw new HttpError(409, 'email_taken', 'this address cannot be used: another account has it');
      return { status: 200, page: confirmEmailPage(query.token_hash, row.link.email), headers: NO_STORE };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/account/email/confirm',
    summary: 'Make the new address of an e-mail change link the account\'s (the form of its page).',
    description:
      'The form of GET /account/email/confirm: the account signs in with the new address from now on. A used, replaced or expired ' +
      'link is 400; an address another account has meanwhile is 409 (HTML pages).',
    auth: 'public',
    bodyType: 'form',
    body: z
      .object({ token_hash: EmailChangeToken, type: LinkType })
      .meta({ example: { token_hash: 'Zq3m9VbX2kLp7RtY8wNc4HdF6sJg1AeU', type: 'email_change' } }),
    invalidStatus: 400,
    renderError: accountErrorPage,
    responses: {
      200: content('text/html', 'A page saying the address is changed.'),
      400: PAGE_ERRORS[400],
      409: content('text/html', 'A page saying the address cannot be used: another account has it.'),
      503: PAGE_ERRORS[503],
    },
    async handler({ body, db }) {
      const [row] = await db((tx) => tx<{ result: { email: string } }[]>`select api.account_email_change_confirm(${body.token_hash}) as result`);
      return { status: 200, page: emailChangedPage(row!.result.email), headers: NO_STORE };
    },
  }),
];
