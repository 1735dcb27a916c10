// The OAuth sign-in and consent page (GET /authorize) in a real browser
// (Debian's Chromium, headless, driven by playwright-core): it names the
// service the user grants access to and the client asking, "Deny" looks like
// the secondary action it is, everything a client registered is shown as
// text, and the page's Content-Security-Policy refuses nothing of its own.
// Skipped (with a message) only when /usr/bin/chromium is missing.
import crypto from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, publicUrl } from '../helpers.ts';

const available = chromiumAvailable('consent-page');

// A client chooses its own name and redirect URI at registration: both are hostile here.
const CLIENT_NAME = `Evil <img src=x onerror="document.title='owned'"> & "Co" <script>document.title='owned'</script>`;
const REDIRECT = `http://127.0.0.1:9/cb?next=<b>"bold"</b>&x='y'`;

async function registerClient(): Promise<string> {
  const res = await fetch(`${baseUrl}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: CLIENT_NAME,
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

function authorizeUrl(clientId: string): string {
  const challenge = crypto.createHash('sha256').update(crypto.randomBytes(32).toString('base64url')).digest('base64url');
  const url = new URL(`${baseUrl}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st',
    scope: 'mcp:read mcp:write',
  })) url.searchParams.set(k, v);
  return url.href;
}

/** The computed look of a button: what tells a primary action from a secondary one. */
function buttonStyle(page: Page, selector: string) {
  return page.locator(selector).evaluate((el) => {
    const style = getComputedStyle(el);
    return { background: style.backgroundColor, color: style.color, border: `${style.borderTopWidth} ${style.borderTopStyle}` };
  });
}

describe.skipIf(!available)('OAuth consent page (headless Chromium)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('consent-page');
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('names the service and the client, makes Deny a secondary action, and shows hostile names as text', async () => {
    const docs = await api('GET', '/api/docs/openapi.json');
    const serviceName: string = docs.body.info.title;
    expect(serviceName.length).toBeGreaterThan(0);
    const clientId = await registerClient();

    const page = await context.newPage();
    const messages: string[] = [];
    const dialogs: string[] = [];
    page.on('console', (msg) => messages.push(`${msg.type()}: ${msg.text()}`));
    page.on('pageerror', (err) => messages.push(`pageerror: ${err.message}`));
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const response = await page.goto(authorizeUrl(clientId));
    expect(response?.status()).toBe(200);

    // The service (its name and where it runs) and the client asking.
    const host = new URL(publicUrl).host;
    expect(await page.locator('#service').textContent()).toBe(`${serviceName} · ${host}`);
    expect(await page.title()).toBe(`Connect ${CLIENT_NAME} to ${serviceName}`);
    expect(await page.locator('h1').textContent()).toBe(`Connect ${CLIENT_NAME} to your account`);
    expect(await page.locator('#client').textContent()).toBe(CLIENT_NAME);
    expect(await page.locator('main').textContent()).toContain(`asks to act as you on ${serviceName} (${host})`);
    // Registered text stays text: no element, script or handler came from it.
    expect(await page.locator('main code').textContent()).toBe(REDIRECT);
    expect(await page.locator('main img, main script, main b').count()).toBe(0);
    expect(dialogs).toEqual([]);

    // "Sign in and allow" is the primary button, "Deny" visibly secondary.
    const allow = await buttonStyle(page, 'button[value="allow"]');
    const deny = await buttonStyle(page, 'button[value="deny"]');
    expect(allow.background).toBe('rgb(37, 99, 235)');
    expect(deny.background).toBe('rgba(0, 0, 0, 0)');
    expect(deny.border).toBe('1px solid');
    expect(deny.color).not.toBe(allow.color);

    // The page's own style applied, and its CSP refused nothing.
    expect(await page.evaluate(() => getComputedStyle(document.querySelector('main')!).maxWidth)).toBe('512px');
    expect(messages).toEqual([]);
    await page.close();

    // The HTML itself: every client-chosen character escaped.
    const raw = await (await fetch(authorizeUrl(clientId))).text();
    expect(raw).not.toContain('<img');
    expect(raw).not.toContain("<script>document");
    expect(raw).not.toContain('<b>');
    expect(raw).toContain('Evil &lt;img src=x onerror=&quot;document.title=&#39;owned&#39;&quot;&gt; &amp; &quot;Co&quot;');
    expect(raw).toContain('http://127.0.0.1:9/cb?next=&lt;b&gt;&quot;bold&quot;&lt;/b&gt;&amp;x=&#39;y&#39;');
  });
});
