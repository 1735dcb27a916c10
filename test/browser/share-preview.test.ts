// Share previews of the public event page, read back from the page Chromium
// renders (Debian's Chromium, headless, driven by playwright-core): the Open
// Graph and Twitter tags, the canonical link and the schema.org Event in
// JSON-LD, for events whose titles and texts try to break out of an attribute
// or out of the <script> data block. Nothing may run (no dialog, no console
// error such as a CSP violation), and every value must read back exactly.
// Skipped (with a message) only when /usr/bin/chromium is missing.
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseUrl, db, publicUrl } from '../helpers.ts';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { createCommunity, createEvent, createVenue } from '../support/event-fixtures.ts';

const available = chromiumAvailable('share-preview');

interface Preview {
  meta: Record<string, string | null>;
  canonical: string | null;
  jsonLd: string[];
  title: string;
  pwned: unknown;
  calendarLink: string | null;
}

async function readPreview(page: Page): Promise<Preview> {
  return page.evaluate(() => {
    const meta: Record<string, string | null> = {};
    for (const el of Array.from(document.querySelectorAll('meta[property], meta[name]'))) {
      meta[el.getAttribute('property') ?? el.getAttribute('name')!] = el.getAttribute('content');
    }
    return {
      meta,
      canonical: document.querySelector('link[rel="canonical"]')?.getAttribute('href') ?? null,
      jsonLd: Array.from(document.querySelectorAll('script[type="application/ld+json"]')).map((s) => s.textContent ?? ''),
      title: document.title,
      pwned: (window as unknown as { pwned?: unknown }).pwned,
      calendarLink: Array.from(document.querySelectorAll('a')).find((a) => a.textContent === 'Add to calendar')?.getAttribute('href') ?? null,
    };
  });
}

const HOSTILE: [string, string][] = [
  ['a script-closing title', '</script><script>window.pwned = 1; alert(1)</script>'],
  ['quotes and an attribute break-out', '"><img src=x onerror="window.pwned=2"> \'single\' "double"'],
  ['a comment opener and entities', '<!-- &amp; &lt;b&gt; --> <b>bold</b>'],
  ['line and paragraph separators', 'one\u2028two\u2029three'],
  ['emoji and ampersands', '🎉 Rock & Roll 🥳 & more'],
];

describe.skipIf(!available)('share previews on /e/{shortlink} (headless Chromium)', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;

  beforeAll(async () => {
    browser = await launchChromium('share-preview');
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
  });

  async function open(path: string) {
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('dialog', (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console: ${msg.text()}`);
    });
    const response = await page.goto(`${baseUrl}${path}`);
    return { page, response, problems };
  }

  it.each(HOSTILE)('%s: the tags and the JSON-LD read back exactly; nothing runs', async (_name, title) => {
    const community = await createCommunity();
    await db()`update app.communities set name = ${`${title} club`} where id = ${community.id}`;
    const venue = await createVenue(`${title} hall`);
    await db()`update app.venues set address = ${`${title} street`} where node_id = ${venue}`;
    const event = await createEvent({ communityId: community.id, title, starts: '2 days', venueNodeId: venue, description: `About ${title}` });
    const [row] = await db()`select starts_at, starts_at + interval '2 hours' as ends from app.events where id = ${event.id}`;
    const url = `${publicUrl}/e/${event.shortlink}`;

    const { page, response, problems } = await open(`/e/${event.shortlink}`);
    expect(response?.status()).toBe(200);
    const preview = await readPreview(page);
    expect(problems).toEqual([]);
    expect(preview.pwned).toBeUndefined();
    expect(preview.title).toBe(title);
    expect(preview.canonical).toBe(url);
    expect(preview.meta['og:title']).toBe(title);
    expect(preview.meta['og:type']).toBe('website');
    expect(preview.meta['og:url']).toBe(url);
    expect(preview.meta['og:description']).toContain(`${title} hall, ${title} street`.replace(/\s+/g, ' '));
    // No image of its own: the default one (every preview names an image).
    expect(preview.meta['og:image']).toBe(`${publicUrl}/assets/event.png`);
    expect(preview.meta['twitter:card']).toBe('summary_large_image');
    expect(preview.meta['twitter:title']).toBe(title);
    expect(preview.meta.robots).toBeUndefined(); // the event page may be indexed
    expect(preview.calendarLink).toBe(`/e/${event.shortlink}.ics`);

    expect(preview.jsonLd).toHaveLength(1);
    const data = JSON.parse(preview.jsonLd[0]!);
    expect(data).toEqual({
      '@context': 'https://schema.org',
      '@type': 'Event',
      name: title,
      // Local time in the event's zone (UTC here), with its offset.
      startDate: `${row!.starts_at.toISOString().slice(0, 19)}Z`,
      endDate: `${row!.ends.toISOString().slice(0, 19)}Z`,
      eventStatus: 'https://schema.org/EventScheduled',
      eventAttendanceMode: 'https://schema.org/OfflineEventAttendanceMode',
      location: { '@type': 'Place', name: `${title} hall`, address: { '@type': 'PostalAddress', streetAddress: `${title} street` } },
      url,
      image: [`${publicUrl}/assets/event.png`],
      organizer: { '@type': 'Organization', name: `${title} club`, url: `${publicUrl}/c/${community.id}` },
      description: `About ${title}`,
    });
    // The data block holds no markup a parser could stop at.
    expect(preview.jsonLd[0]).not.toMatch(/[<>&\u2028\u2029]/);
    await page.close();
  });

  it('an event with an image: og:image (absolute) and a large Twitter card; the calendar link downloads the .ics', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'With a picture', starts: '1 day', ends: '1 day 3 hours' });
    await db()`update app.events set image_path = 'https://images.example.com/a b.png?x="y"&z=<1>', location = 'Somewhere 5' where id = ${event.id}`;
    const { page, problems } = await open(`/e/${event.shortlink}`);
    const preview = await readPreview(page);
    // The page shows the image, which this machine cannot load: the only message allowed.
    expect(problems.filter((p) => !p.includes('Failed to load resource'))).toEqual([]);
    expect(preview.meta['og:image']).toBe(new URL('https://images.example.com/a b.png?x="y"&z=<1>').toString());
    expect(preview.meta['twitter:card']).toBe('summary_large_image');
    const data = JSON.parse(preview.jsonLd[0]!);
    expect(data.image).toEqual([preview.meta['og:image']]);
    expect(data.location).toEqual({ '@type': 'Place', name: 'Somewhere 5', address: { '@type': 'PostalAddress', streetAddress: 'Somewhere 5' } });
    expect(new Date(data.endDate).getTime() - new Date(data.startDate).getTime()).toBe(3 * 3600 * 1000);

    const calendar = await page.request.get(`${baseUrl}${preview.calendarLink}`);
    expect(calendar.status()).toBe(200);
    expect(calendar.headers()['content-type']).toBe('text/calendar; charset=utf-8');
    expect(await calendar.text()).toContain('SUMMARY:With a picture');

    // A same-site image path becomes an absolute URL.
    await db()`update app.events set image_path = '/images/a.png' where id = ${event.id}`;
    await page.reload();
    expect((await readPreview(page)).meta['og:image']).toBe(`${publicUrl}/images/a.png`);
    await page.close();
  });

  it('an event with neither venue nor location: the Place is the community, its name as the address (Google requires one)', async () => {
    const community = await createCommunity();
    const [{ name }] = (await db()`select name from app.communities where id = ${community.id}`) as unknown as [{ name: string }];
    const event = await createEvent({ communityId: community.id, title: 'Somewhere', starts: '1 day' });
    const { page, problems } = await open(`/e/${event.shortlink}`);
    const data = JSON.parse((await readPreview(page)).jsonLd[0]!);
    expect(problems).toEqual([]);
    expect(data.location).toEqual({ '@type': 'Place', name, address: { '@type': 'PostalAddress', streetAddress: name } });
    expect(data.organizer).toEqual({ '@type': 'Organization', name, url: `${publicUrl}/c/${community.id}` });
    // Without a description of its own: what the page says of it (when, where).
    expect(data.description).toMatch(/UTC/);
    await page.close();
  });
});
