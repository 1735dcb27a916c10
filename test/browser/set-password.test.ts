// The set-password page an e-mailed link opens, in a real browser (Debian's
// Chromium, headless, driven by playwright-core): the user types a password
// twice, the page confirms, and the user can then sign in with the API.
// Skipped (with a message) only when /usr/bin/chromium is missing.
import type { BrowserContext } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, publicUrl, registerUser } from '../helpers.ts';

const available = chromiumAvailable('set-password');

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
    const user = await registerUser('browser-pw');
    await db()`update identity.users set password_hash = null where id = ${user.userId}`;
    await db()`select private.queue_password_email(${user.userId}, 'invite', ${publicUrl})`;
    const [row] = await db()<{ link: string }[]>`select link from app.email_outbox where user_id = ${user.userId}`;
    const link = new URL(row!.link);

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
});
