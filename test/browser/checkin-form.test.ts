// The web check-in form end to end in a real browser: Debian's Chromium,
// headless, driven by playwright-core. A desktop browser opens the event's
// deep link, is redirected to the form, signs in and sees the check-in
// confirmed; the check-in row exists. Skipped (with a message) only when
// /usr/bin/chromium is missing; .ci/run installs it.
import type { BrowserContext } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseUrl, db, registerUser } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';

const available = chromiumAvailable('checkin-form');

describe.skipIf(!available)('web check-in form (headless Chromium)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('checkin-form');
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('deep link → form → sign in → checked in', async () => {
    const user = await registerUser('browser');
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'Browser <night>', starts: '-15 minutes', ends: '2 hours' });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(msg.text());
    });

    const response = await page.goto(`${baseUrl}/l/checkin/event/${event.nodeId}`);
    expect(response?.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe(`/checkin/event/${event.nodeId}`);
    // The title is text, not markup.
    expect(await page.locator('#event-title').textContent()).toBe('Browser <night>');

    // A wrong password is reported and nothing is checked in.
    await page.fill('#email', user.email);
    await page.fill('#password', 'wrong-password');
    await page.click('button[type=submit]');
    await page.locator('#status.error').waitFor({ timeout: 15_000 });
    expect(await page.locator('#status').textContent()).toMatch(/wrong e-mail or password/i);

    await page.fill('#password', user.password);
    await page.selectOption('#visibility', 'public');
    await page.click('button[type=submit]');
    await page.locator('#status.ok').waitFor({ timeout: 15_000 });
    expect(await page.locator('#status').textContent()).toBe('You are checked in to Browser <night>.');
    expect(await page.locator('#checkin-form').isHidden()).toBe(true);

    const rows = await db()`
      select visibility, checked_out_at from app.checkins where user_id = ${user.userId} and event_id = ${event.id}`;
    expect(rows).toEqual([{ visibility: 'public', checked_out_at: null }]);

    // The same form again: already checked in (200), still one row.
    await page.goto(`${baseUrl}/checkin/event/${event.nodeId}`);
    await page.fill('#email', user.email);
    await page.fill('#password', user.password);
    await page.click('button[type=submit]');
    await page.locator('#status.ok').waitFor({ timeout: 15_000 });
    expect(await page.locator('#status').textContent()).toBe('You were already checked in to Browser <night>.');
    const [count] = await db()`select count(*)::int as n from app.checkins where user_id = ${user.userId}`;
    expect(count!.n).toBe(1);
    expect(errors.filter((e) => !/401/.test(e))).toEqual([]);
    await page.close();
  });
});
