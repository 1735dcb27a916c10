// Deep links and public pages: redirects by user agent, the venue link's
// concurrency rule, 404 pages, HTML escaping (an event titled <script> is
// text), and that the pages are small, mobile-friendly text/html.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, db } from '../helpers.ts';
import { createCommunity, createEvent, createVenue, unknownId } from '../support/event-fixtures.ts';

const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';
const IPAD = 'Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1';
const IPOD = 'Mozilla/5.0 (iPod touch; CPU iPhone OS 15_8 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Mobile/15E148 Safari/604.1';
const ANDROID = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36';
const DESKTOP = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36';
const MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15';

const get = (path: string, userAgent?: string) =>
  api('GET', path, { headers: userAgent === undefined ? {} : { 'user-agent': userAgent } });

function expectHtml(res: { headers: Headers; text: string }) {
  expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(res.text).toMatch(/^<!doctype html>/i);
  expect(res.text).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
}

async function someEvent(title = 'Open evening', venueNodeId?: string) {
  const community = await createCommunity();
  return createEvent({ communityId: community.id, title, starts: '-30 minutes', ends: '2 hours', venueNodeId });
}

describe('GET /l/checkin/event/{event_node_id}', () => {
  it.each([
    ['iPhone', IPHONE],
    ['iPad', IPAD],
    ['iPod', IPOD],
    ['Android', ANDROID],
  ])('%s: 302 to the app link', async (_name, ua) => {
    const event = await someEvent();
    const res = await get(`/l/checkin/event/${event.nodeId}`, ua);
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`communityapp://checkin/event/${event.nodeId}`);
    expect(res.headers.get('vary')).toMatch(/User-Agent/i);
    expectHtml(res);
  });

  it.each([
    ['a desktop browser', DESKTOP],
    ['a Mac', MAC],
    ['no user agent', ''],
  ])('%s: 302 to the web check-in form', async (_name, ua) => {
    const event = await someEvent();
    const res = await get(`/l/checkin/event/${event.nodeId}`, ua);
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`/checkin/event/${event.nodeId}`);
  });

  it.each([
    ['an unknown id', () => unknownId()],
    ['a malformed id', () => 'not-an-id'],
  ])('404 HTML for %s', async (_name, id) => {
    const res = await get(`/l/checkin/event/${id()}`, IPHONE);
    expect(res.status).toBe(404);
    expectHtml(res);
    expect(res.headers.get('location')).toBeNull();
  });

  it('takes the event node id, not the event id', async () => {
    const event = await someEvent();
    expect((await get(`/l/checkin/event/${event.id}`, DESKTOP)).status).toBe(404);
  });
});

describe('GET /l/event/{shortlink}', () => {
  it('behaves like the event check-in link', async () => {
    const event = await someEvent();
    const app = await get(`/l/event/${event.shortlink}`, ANDROID);
    expect(app.status).toBe(302);
    expect(app.headers.get('location')).toBe(`communityapp://checkin/event/${event.nodeId}`);
    const web = await get(`/l/event/${event.shortlink}`, DESKTOP);
    expect(web.status).toBe(302);
    expect(web.headers.get('location')).toBe(`/checkin/event/${event.nodeId}`);
  });

  it('404 HTML for an unknown or malformed shortlink', async () => {
    for (const code of ['ZZZZZZZ0', 'short', 'with-dash']) {
      const res = await get(`/l/event/${code}`, DESKTOP);
      expect(res.status).toBe(404);
      expectHtml(res);
    }
  });
});

describe('GET /l/checkin/venue/{venue_node_id}', () => {
  it('one concurrent event: 302 to its event check-in link', async () => {
    const venue = await createVenue('Single Hall');
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, starts: '100 minutes', venueNodeId: venue });
    await createEvent({ communityId: community.id, starts: '-2 days', ends: '-47 hours', venueNodeId: venue });
    const res = await get(`/l/checkin/venue/${venue}`, IPHONE);
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`/l/checkin/event/${event.nodeId}`);
  });

  it('several: 200 HTML selection page linking each event', async () => {
    const venue = await createVenue('Busy <Hall>');
    const community = await createCommunity();
    const a = await createEvent({ communityId: community.id, title: 'Alpha & friends', starts: '-1 hour', venueNodeId: venue });
    const b = await createEvent({ communityId: community.id, title: 'Beta', starts: '1 hour', venueNodeId: venue });
    const res = await get(`/l/checkin/venue/${venue}`, DESKTOP);
    expect(res.status).toBe(200);
    expectHtml(res);
    expect(res.text).toContain(`href="/l/checkin/event/${a.nodeId}"`);
    expect(res.text).toContain(`href="/l/checkin/event/${b.nodeId}"`);
    expect(res.text).toContain('Alpha &amp; friends');
    expect(res.text).toContain('Busy &lt;Hall&gt;');
    expect(res.text.indexOf(a.nodeId)).toBeLessThan(res.text.indexOf(b.nodeId));
  });

  it('404 HTML when nothing is on, for an unknown venue, and for a malformed id', async () => {
    const quiet = await createVenue('Quiet Hall');
    const community = await createCommunity();
    await createEvent({ communityId: community.id, starts: '-6 hours', ends: '-121 minutes', venueNodeId: quiet });
    for (const id of [quiet, unknownId(), 'x1']) {
      const res = await get(`/l/checkin/venue/${id}`, DESKTOP);
      expect(res.status).toBe(404);
      expectHtml(res);
    }
  });
});

describe('HTML escaping', () => {
  const XSS = '<script>alert(1)</script>';

  it('an event titled <script> renders as text on every page', async () => {
    const venue = await createVenue(`"><img src=x onerror=alert(2)>`);
    const community = await createCommunity();
    const event = await createEvent({
      communityId: community.id, title: XSS, starts: '-10 minutes', venueNodeId: venue, description: `<b onclick="x()">bold</b>`,
    });
    await createEvent({ communityId: community.id, title: `${XSS} 2`, starts: '10 minutes', venueNodeId: venue });
    await db()`update app.events set event_url = 'javascript:alert(3)', image_path = 'javascript:alert(4)' where id = ${event.id}`;

    const pages = [
      await get(`/e/${event.shortlink}`),
      await get(`/checkin/event/${event.nodeId}`),
      await get(`/l/checkin/venue/${venue}`),
    ];
    for (const res of pages) {
      expect(res.status).toBe(200);
      expect(res.text).not.toContain('<script>alert');
      expect(res.text).not.toContain('<img src=x');
      expect(res.text).not.toContain('javascript:');
      expect(res.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    }
    expect(pages[0]!.text).toContain('&lt;b onclick=&quot;x()&quot;&gt;bold&lt;/b&gt;');
  });
});

describe('GET /e/{shortlink}', () => {
  it('a public page of the event, with a check-in link', async () => {
    const venue = await createVenue('Riverside');
    const community = await createCommunity();
    const event = await createEvent({
      communityId: community.id, title: 'Riverside run', starts: '1 day', ends: '1 day 2 hours', venueNodeId: venue,
      description: 'Ten kilometres along the river.',
    });
    await db()`update app.events set event_url = 'https://example.com/run' where id = ${event.id}`;
    const res = await get(`/e/${event.shortlink}`);
    expect(res.status).toBe(200);
    expectHtml(res);
    expect(res.text).toContain('<title>Riverside run</title>');
    expect(res.text).toContain('Ten kilometres along the river.');
    expect(res.text).toContain('Riverside');
    expect(res.text).toContain(`href="/l/event/${event.shortlink}"`);
    expect(res.text).toContain('href="https://example.com/run"');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.text.length).toBeLessThan(8000);
  });

  it('404 HTML for an unknown shortlink', async () => {
    const res = await get('/e/Nope1234');
    expect(res.status).toBe(404);
    expectHtml(res);
  });
});

describe('GET /checkin/event/{event_node_id} (web check-in form)', () => {
  it('a sign-in form for the event that posts through the API', async () => {
    const event = await someEvent('Form night');
    const res = await get(`/checkin/event/${event.nodeId}`, DESKTOP);
    expect(res.status).toBe(200);
    expectHtml(res);
    expect(res.text).toContain(`data-event-id="${event.id}"`);
    expect(res.text).toContain('type="email"');
    expect(res.text).toContain('type="password"');
    expect(res.text).toContain('/api/auth/login');
    expect(res.text).toContain('/api/mobile/events/');
    const nonce = /script-src 'nonce-([^']+)'/.exec(res.headers.get('content-security-policy') ?? '')?.[1];
    expect(nonce).toBeTruthy();
    expect(res.text).toContain(`<script nonce="${nonce}">`);
  });

  it('404 HTML for an unknown event', async () => {
    const res = await get(`/checkin/event/${unknownId()}`);
    expect(res.status).toBe(404);
    expectHtml(res);
  });
});

describe("a draft community's events are public nowhere (security review round 4)", () => {
  it('its event page, .ics, deep links, web check-in form and venue link are 404 like an unknown event; published, they are served', async () => {
    const community = await createCommunity();
    await db()`select admin.set_community_flags(${community.id}, false, true)`;
    const venue = await createVenue(`Draft hall ${crypto.randomUUID().slice(0, 6)}`);
    const event = await createEvent({ communityId: community.id, title: 'Not yet announced', starts: '-30 minutes', ends: '2 hours', venueNodeId: venue });
    const doors = [
      `/e/${event.shortlink}`,
      `/e/${event.shortlink}.ics`,
      `/l/event/${event.shortlink}`,
      `/l/checkin/event/${event.nodeId}`,
      `/checkin/event/${event.nodeId}`,
      `/l/checkin/venue/${venue}`,
    ];
    for (const path of doors) {
      for (const ua of [DESKTOP, IPHONE]) {
        const res = await get(path, ua);
        expect(res.status, path).toBe(404);
        expect(res.text, path).not.toContain('Not yet announced');
        expect(res.headers.get('location'), path).toBeNull();
      }
    }
    // The community calendar says the same (404 for a draft).
    expect((await get(`/c/${community.id}/calendar.ics`)).status).toBe(404);

    await db()`select admin.set_community_flags(${community.id}, false, false)`;
    expect((await get(`/e/${event.shortlink}`)).text).toContain('Not yet announced');
    expect((await get(`/e/${event.shortlink}.ics`)).status).toBe(200);
    expect((await get(`/l/event/${event.shortlink}`, IPHONE)).status).toBe(302);
    expect((await get(`/l/checkin/event/${event.nodeId}`, DESKTOP)).status).toBe(302);
    expect((await get(`/checkin/event/${event.nodeId}`)).status).toBe(200);
    expect((await get(`/l/checkin/venue/${venue}`)).headers.get('location')).toBe(`/l/checkin/event/${event.nodeId}`);
    expect((await get(`/c/${community.id}/calendar.ics`)).status).toBe(200);
  });
});
