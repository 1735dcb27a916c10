// Deleting an account on the web, without the app, in a real browser (Debian's
// Chromium, headless, driven by playwright-core, JavaScript off: the pages
// need none): GET /account/delete asks for an address, posting it answers the
// same page whether an account has it or not, the owner's e-mailed link opens
// a confirmation page, and its button deletes the account (every session
// ends, the address registers again). Skipped only when /usr/bin/chromium is missing.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { api, baseUrl, db, registerUser, uniqueEmail } from '../helpers.ts';

const available = chromiumAvailable('account-delete');

/** Console lines of a page that are not the document's own 4xx status (CSP refusals among them). */
function watch(page: Page): string[] {
  const messages: string[] = [];
  page.on('console', (msg) => messages.push(`${msg.type()}: ${msg.text()}`));
  page.on('pageerror', (err) => messages.push(`pageerror: ${err.message}`));
  return messages;
}

/** Fills the e-mail form of GET /account/delete and submits it; returns the answer page's status, heading and text. */
async function askForLink(page: Page, email: string): Promise<{ status: number | undefined; h1: string | null; text: string }> {
  const form = await page.goto(`${baseUrl}/account/delete`);
  expect(form?.status()).toBe(200);
  expect(form?.headers()['content-security-policy']).toContain("default-src 'none'");
  expect(await page.locator('h1').textContent()).toBe('Delete your account');
  await page.fill('#email', email);
  const [answer] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  return { status: answer?.status(), h1: await page.locator('h1').textContent(), text: await page.locator('main').innerText() };
}

describe.skipIf(!available)('deleting an account on the web (headless Chromium, no JavaScript)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('account-delete', { javaScriptEnabled: false });
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('an existing and an unknown address get the same page; only the owner gets a link, and it deletes the account', async () => {
    const user = await registerUser('webdel');
    const unknown = uniqueEmail('webdel-nobody');
    const page = await context.newPage();
    const messages = watch(page);

    const known = await askForLink(page, user.email.toUpperCase());
    const stranger = await askForLink(page, unknown);
    // No account enumeration: the same status and the same page for both.
    expect(known.status).toBe(200);
    expect(stranger).toEqual(known);
    expect(known.h1).toBe('Check your inbox');

    const mails = await db()<{ to_email: string; link: string }[]>`
      select to_email, link from app.email_outbox where purpose = 'delete_account' and to_email in (${user.email}, ${unknown})`;
    expect(mails.map((m) => m.to_email)).toEqual([user.email]);
    const link = new URL(mails[0]!.link);
    expect(link.pathname).toBe('/account/delete/confirm');

    // Opening the link deletes nothing: it shows the account and one button.
    const confirm = await page.goto(baseUrl + link.pathname + link.search);
    expect(confirm?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe(`Delete the account ${user.email}?`);
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);

    const [deleted] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect(deleted?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe('Your account is deleted');

    // Gone, not hidden: the session ends at once, the identity row is gone, the address registers again.
    const after = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(after.status).toBe(401);
    const refresh = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(refresh.status).toBe(401);
    const [rows] = await db()<{ n: number }[]>`select count(*)::int as n from identity.users where email = ${user.email}`;
    expect(rows!.n).toBe(0);
    expect((await api('POST', '/api/auth/register', { body: { email: user.email, password: 'a new account' } })).status).toBe(201);

    // The link is single-use: opened again it is "not valid", and the new account is untouched.
    const again = await page.goto(baseUrl + link.pathname + link.search);
    expect(again?.status()).toBe(404);
    expect(await page.locator('h1').textContent()).toBe('This link is not valid');

    // Nothing refused by the Content-Security-Policy; the only error logged is the 404 document itself.
    expect(messages.filter((m) => /Content Security Policy|Refused to/i.test(m))).toEqual([]);
    expect(messages.filter((m) => !/Failed to load resource: the server responded with a status of 404/.test(m))).toEqual([]);
    await page.close();
  });
});
