// The API reference page in a real browser (Debian's Chromium, headless,
// playwright-core): Swagger UI renders from this server alone (every request
// goes to the gateway's own origin, no CSP violation), lists the operations,
// and takes an API token through Authorize. A screenshot is written to a
// temporary file (its path is printed) for a human look. Skipped (with a
// message) only when /usr/bin/chromium is missing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../gateway/app.ts';
import { api, baseUrl, registerUser } from '../helpers.ts';

const available = chromiumAvailable('docs-page');

/**
 * The operations the page lists. Swagger UI renders a list of 150 tags and
 * operations or more virtually (only what is near the viewport is in the
 * DOM), so the page is scrolled from top to bottom and what appears on the
 * way is collected.
 */
async function listedOperations(page: Page): Promise<{ ids: Set<string>; paths: Set<string> }> {
  const ids = new Set<string>();
  const paths = new Set<string>();
  await page.evaluate(() => window.scrollTo(0, 0));
  for (let step = 0; step < 2_000; step++) {
    const seen = await page.evaluate(() =>
      [...document.querySelectorAll('.opblock')].map((block) => [
        block.id,
        (block.querySelector('.opblock-summary-path')?.textContent ?? '').replace(/\u200b/g, '').trim(),
      ]),
    );
    for (const [id, summary] of seen) {
      ids.add(id!);
      paths.add(summary!);
    }
    const moved = await page.evaluate(() => {
      const before = window.scrollY;
      window.scrollBy(0, Math.floor(window.innerHeight / 2));
      return window.scrollY !== before;
    });
    if (!moved) break;
    await page.waitForTimeout(30);
  }
  await page.evaluate(() => window.scrollTo(0, 0));
  return { ids, paths };
}

describe.skipIf(!available)('API reference page (headless Chromium)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('docs-page', { viewport: { width: 1280, height: 900 } });
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('renders from this server alone, lists the operations and takes an API token', async () => {
    const page = await context.newPage();
    const problems: string[] = [];
    const origins = new Set<string>();
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(msg.text());
    });
    page.on('request', (request) => {
      if (/^https?:/.test(request.url())) origins.add(new URL(request.url()).origin);
    });

    const response = await page.goto(`${baseUrl}/api/docs`);
    expect(response?.status()).toBe(200);
    await page.locator('.opblock').first().waitFor({ timeout: 30_000 });

    // Every operation of the route table is listed, and GET /health.
    const listed = await listedOperations(page);
    expect(listed.ids.size).toBe(routes.length + 1);
    expect(listed.paths).toContain('/api/mobile/tasks/{id}/complete_and_link');
    expect(listed.paths).toContain('/api/docs/endpoints');
    expect(listed.paths).toContain('/storage/v1/object/{bucket}/{path}');
    expect(await page.locator('.info .title').textContent()).toContain('Community');

    // Authorize takes an API token (the apiToken scheme).
    await page.locator('button.authorize').first().click();
    const dialog = page.locator('.auth-container', { hasText: 'apiToken' });
    await dialog.waitFor({ timeout: 10_000 });
    await dialog.locator('input').fill('cbk_0123456789abcdefghijABCDEFGHIJ0123456789');
    await dialog.locator('button.authorize').click();
    await dialog.locator('button', { hasText: 'Logout' }).waitFor({ timeout: 10_000 });
    expect(await dialog.textContent()).toContain('Authorized');
    await page.locator('button.close-modal').click();

    // Try it out on an operation: the request goes to this server, with the token.
    // (The filter keeps the list short: a long one shows only what is in view.)
    await page.locator('.operation-filter-input').fill('Documentation');
    await page.locator('#operations-Documentation-get_docs_endpoints .opblock-summary').click();
    const sent = page.waitForRequest((request) => request.url().endsWith('/api/docs/endpoints'));
    await page.locator('#operations-Documentation-get_docs_endpoints button.execute').click();
    const request = await sent;
    expect(new URL(request.url()).origin).toBe(new URL(baseUrl).origin);
    await page.locator('#operations-Documentation-get_docs_endpoints .live-responses-table .response-col_status').first().waitFor({ timeout: 15_000 });

    const shot = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'docs-page-')), 'api-docs.png');
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: shot });
    console.info(`[docs-page] screenshot: ${shot}`);
    expect(fs.statSync(shot).size).toBeGreaterThan(20_000);

    expect([...origins]).toEqual([new URL(baseUrl).origin]);
    expect(problems.filter((p) => !/Failed to load resource/.test(p))).toEqual([]);
    await page.close();
  });

  it("shows a route's limits and errors, and try-it creates a task from the example as it stands", async () => {
    const user = await registerUser('docs-try-it');
    const created = await api('POST', '/api/docs/tokens', { token: user.accessToken, body: { name: 'Try it', permissions: ['*'] } });
    expect(created.status).toBe(201);

    const page = await context.newPage();
    await page.goto(`${baseUrl}/api/docs#/Tasks/post_tasks`);
    const operation = page.locator('#operations-Tasks-post_tasks');
    await operation.locator('.opblock-body').waitFor({ timeout: 30_000 });

    // The description names the limits and the errors; the 422 response explains its codes.
    const description = await operation.locator('.opblock-description-wrapper').first().textContent();
    expect(description).toContain('Limits');
    expect(description).toContain('at most 500 characters');
    expect(description).toContain('Errors');
    // The codes of a status are listed in alphabetical order (idempotency_key_reused comes first).
    expect(description).toMatch(/422: [^\n]*\bvalidation_error\b/);
    const responses = await operation.locator('.responses-wrapper').textContent();
    expect(responses).toContain('unauthorized');

    // The body is the example: a meaningful title, a company and a value.
    const body = operation.locator('textarea.body-param__text');
    expect(await body.inputValue()).toContain('Call Acme about the renewal');

    await page.locator('button.authorize').first().click();
    const dialog = page.locator('.auth-container', { hasText: 'apiToken' });
    await dialog.locator('input').fill(created.body.token_value);
    await dialog.locator('button.authorize').click();
    await page.locator('button.close-modal').click();

    // Back to the operation (Authorize is at the top, and a long list shows only what is in view).
    await page.locator('.operation-filter-input').fill('Tasks');
    await operation.locator('button.execute').click();
    const status = operation.locator('.live-responses-table tbody .response-col_status').first();
    await status.waitFor({ timeout: 15_000 });
    expect((await status.textContent())?.trim()).toBe('201');
    const tasks = await api('GET', '/api/mobile/tasks', { token: user.accessToken });
    expect(tasks.body.tasks.map((task: { meta: { title?: string } }) => task.meta.title)).toEqual(['Call Acme about the renewal']);

    const shot = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'docs-page-')), 'try-it.png');
    await operation.screenshot({ path: shot });
    console.info(`[docs-page] try-it screenshot: ${shot}`);
    await page.close();
  });
});
