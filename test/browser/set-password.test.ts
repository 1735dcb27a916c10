// The set-password page an e-mailed link opens, in a real browser (Debian's
// Chromium, headless, driven by playwright-core): the user types a password
// twice, the page confirms, and the user can then sign in with the API.
// Skipped (with a message) only when /usr/bin/chromium is missing.
import type { BrowserContext, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, publicUrl, registerUser } from '../helpers.ts';

const available = chromiumAvailable('set-password');

/** A fresh invite link for a user without a password. */
async function inviteLink(): Promise<{ user: Awaited<ReturnType<typeof registerUser>>; link: URL }> {
  const user = await registerUser('browser-pw');
  await db()`update identity.users set password_hash = null where id = ${user.userId}`;
  await db()`select private.queue_password_email(${user.userId}, 'invite', ${publicUrl})`;
  const [row] = await db()<{ link: string }[]>`select link from app.email_outbox where user_id = ${user.userId}`;
  return { user, link: new URL(row!.link) };
}

/** Styles the page's own stylesheet gives (the browser defaults differ): max-width of main, font of body. */
async function appliedStyle(page: Page): Promise<{ mainMaxWidth: string; bodyFont: string }> {
  return page.evaluate(() => ({
    mainMaxWidth: getComputedStyle(document.querySelector('main')!).maxWidth,
    bodyFont: getComputedStyle(document.body).fontFamily,
  }));
}

describe.skipIf(!available)('set-password page (headless Chromium)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('set-password');
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('link → type the password twice → confirmed → sign in works; the link is then used up', async () => {
    const { user, link } = await inviteLink();

    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    const response = await page.goto(baseUrl + link.pathname + link.search);
    expect(response?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe('Choose your password');

    await page.fill('#password', 'browser-password');
    await page.fill('#confirm', 'browser-passwork');
    await page.click('button[type=submit]');
    await page.locator('#status.error').waitFor({ timeout: 15_000 });
    expect(await page.locator('#status').textContent()).toBe('The two passwords differ.');

    await page.fill('#confirm', 'browser-password');
    await page.click('button[type=submit]');
    await page.locator('#status.ok').waitFor({ timeout: 15_000 });
    expect(await page.locator('#status').textContent()).toContain(user.email);
    expect(await page.locator('#password-form').isHidden()).toBe(true);

    const login = await api('POST', '/api/auth/login', { body: { email: user.email, password: 'browser-password' } });
    expect(login.status).toBe(200);

    const again = await page.goto(baseUrl + link.pathname + link.search);
    expect(again?.status()).toBe(404);
    expect(await page.locator('h1').textContent()).toBe('This link is not valid');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('an expired, used or malformed link shows the "not valid" page styled, with no CSP violation', async () => {
    const expired = await inviteLink();
    await db()`update identity.password_tokens set expires_at = now() - interval '1 minute' where user_id = ${expired.user.userId}`;
    const used = await inviteLink();
    const token = used.link.searchParams.get('token')!;
    expect((await api('POST', '/api/auth/set-password', { body: { token, password: 'used-password' } })).status).toBe(200);

    const cases: [string, string, number][] = [
      ['expired', expired.link.pathname + expired.link.search, 404],
      ['used', used.link.pathname + used.link.search, 404],
      ['malformed', '/auth/set-password?token=short', 400],
    ];
    for (const [name, path, status] of cases) {
      const page = await context.newPage();
      const messages: string[] = [];
      page.on('console', (msg) => messages.push(`${msg.type()}: ${msg.text()}`));
      page.on('pageerror', (err) => messages.push(`pageerror: ${err.message}`));
      const response = await page.goto(baseUrl + path);
      expect(response?.status(), name).toBe(status);
      expect(await page.locator('h1').textContent(), name).toBe('This link is not valid');
      // The page's stylesheet applied (browser defaults: max-width none, a serif font).
      expect(await appliedStyle(page), name).toEqual({ mainMaxWidth: '512px', bodyFont: expect.stringContaining('system-ui') });
      // Nothing refused by the Content-Security-Policy; the only error Chromium
      // may log is the document's own 4xx status.
      expect(messages.filter((m) => /Content Security Policy|Refused to/i.test(m)), name).toEqual([]);
      expect(messages.filter((m) => !/Failed to load resource: the server responded with a status of 40[04]/.test(m)), name).toEqual([]);
      await page.close();
    }
  });
});
