// Deep links and web pages (docs/api/web.md#deep-links-and-web-pages): public HTML routes.
//
//   /l/checkin/event/{event_node_id}  302 to the app (iOS/Android) or to the web form
//   /l/event/{shortlink}              the same, by shortlink
//   /l/checkin/venue/{venue_node_id}  302 to the one concurrent event's link, or a selection page
//   /e/{shortlink}                    public event page (a deleted one: cancelled, while its tombstone is kept)
//   /c/{community_id}                 public community page (the organizer its events' previews name)
//   /checkin/event/{event_node_id}    web check-in form: sign in, then check in through the API
//
// Where a link leads (user agent rule, concurrency window) is decided in SQL;
// this module renders the pages. Unknown or malformed ids answer a 404 page,
// and so do events of a draft community (SQL: private.community_events_public).
import { z } from 'zod';
import { defineRoute, type Reply } from '../http/route.ts';
import { formatTime, html, jsonScriptData, page, safeUrl, type Page, type PageOptions, type SafeHtml } from '../core/web/html.ts';
import type { HttpError } from '../core/web/errors.ts';
import { localIso } from '../core/web/time-zones.ts';
import { content, errors } from '../http/responses.ts';
import { DEFAULT_EVENT_IMAGE_PATH, DEFAULT_EVENT_IMAGE_SIZE } from './assets.ts';
import type { Event as EventShape } from '../core/web/shapes.ts';

/** The Event object  as the SQL functions build it (api.event_public*: JSON, so dates are strings). */
type EventJson = z.infer<typeof EventShape>;

/** What the public event page shows (api.event_page): a live event, or a deleted one (cancelled). */
interface EventPage {
  title: string;
  description: string | null;
  /** The start and the effective end (ISO, UTC). */
  date: string;
  end: string;
  /** The event's IANA time zone: where its local time is told. */
  timezone: string;
  /** Its image as a URL: the stored object's public URL, or the external image. */
  image_path: string | null;
  /** The share preview's image: a 1200×630 transformation of a stored image, else the image (absent on a cancelled page). */
  og_image?: string | null;
  event_url: string | null;
  /** The page's own URL (canonical). */
  url: string;
  calendar_path: string;
  /** The check-in link; null once cancelled. */
  checkin_path: string | null;
  /** "venue, address", or the event's location text. */
  location: string | null;
  /** schema.org's location: always a place with an address (the venue, the location text, or the community). */
  place: { name: string; address: string; latitude: number | null; longitude: number | null };
  organizer: { name: string; url: string };
  /** schema.org EventStatusType (EventScheduled, EventCancelled) and EventAttendanceModeEnumeration members. */
  event_status: string;
  attendance_mode: string;
}

/** What the public community page shows (api.community_page). */
interface CommunityPage {
  name: string;
  description: string | null;
  url: string;
  calendar_path: string;
  events: { title: string; date: string; end: string; timezone: string; path: string }[];
}

/** At most `max` characters (code points), whitespace collapsed, an ellipsis when cut. */
function excerpt(text: string, max: number): string {
  const chars = Array.from(text.replace(/\s+/g, ' ').trim());
  return chars.length <= max ? chars.join('') : `${chars.slice(0, max - 1).join('').trimEnd()}…`;
}

/** An absolute URL of the event's image, or of the default image (every preview names one). */
function imageOf(imagePath: string | null, publicUrl: string): { url: string; own: boolean } {
  const base = publicUrl.replace(/\/+$/, '');
  const path = safeUrl(imagePath);
  if (path) return { url: path.startsWith('/') ? `${base}${path}` : path, own: true };
  return { url: `${base}${DEFAULT_EVENT_IMAGE_PATH}`, own: false };
}

/**
 * The share preview of an event page: Open Graph and Twitter card tags, a
 * canonical link, and the schema.org Event as JSON-LD (a data block: the
 * CSP's script-src does not apply to it, nothing runs) with every field
 * Google's Event rich result requires (name, startDate, location with an
 * address) and the recommended ones the data has (endDate, eventStatus,
 * eventAttendanceMode, description, image, organizer with its url). Times
 * are local, with the offset of the event's zone. Every value is escaped for
 * where it goes: attributes by html``, the JSON by jsonScriptData.
 */
function sharePreview(data: EventPage, publicUrl: string): SafeHtml {
  const cancelled = data.event_status === 'EventCancelled';
  const image = imageOf(data.og_image ?? data.image_path, publicUrl);
  const summary = [cancelled ? 'Cancelled' : null, formatTime(data.date, data.end, data.timezone), data.location].filter(Boolean).join(' · ');
  const description = excerpt(data.description ? `${summary}. ${data.description}` : summary, 300);
  const title = cancelled ? `Cancelled: ${data.title}` : data.title;
  const place: Record<string, unknown> = {
    '@type': 'Place',
    name: data.place.name,
    address: { '@type': 'PostalAddress', streetAddress: data.place.address },
  };
  if (data.place.latitude !== null && data.place.longitude !== null) {
    place.geo = { '@type': 'GeoCoordinates', latitude: data.place.latitude, longitude: data.place.longitude };
  }
  const jsonLd = {
    '@context': 'https://schema.org',
    '@type': 'Event',
    name: data.title,
    startDate: localIso(data.date, data.timezone),
    endDate: localIso(data.end, data.timezone),
    eventStatus: `https://schema.org/${data.event_status}`,
    eventAttendanceMode: `https://schema.org/${data.attendance_mode}`,
    location: place,
    url: data.url,
    image: [image.url],
    description: data.description || summary,
    organizer: { '@type': 'Organization', name: data.organizer.name, url: data.organizer.url },
  };
  return html`<link rel="canonical" href="${data.url}">
<meta name="description" content="${description}">
<meta property="og:type" content="website">
<meta property="og:title" content="${title}">
<meta property="og:description" content="${description}">
<meta property="og:url" content="${data.url}">
<meta property="og:image" content="${image.url}">
${image.own ? '' : html`<meta property="og:image:width" content="${DEFAULT_EVENT_IMAGE_SIZE.width}">
<meta property="og:image:height" content="${DEFAULT_EVENT_IMAGE_SIZE.height}">
`}<meta name="twitter:card" content="summary_large_image">
<meta name="twitter:title" content="${title}">
<meta name="twitter:description" content="${description}">
<meta name="twitter:image" content="${image.url}">
<script type="application/ld+json">${jsonScriptData(jsonLd)}</script>`;
}

/** A concurrent event on the venue selection page (api.link_venue_checkin): fields of the Event. */
type VenueChoice = Pick<EventJson, 'title' | 'date' | 'end_time' | 'location' | 'timezone'> & { node_id: string };

const EventNode = z.object({ event_node_id: z.guid().describe("The event's node id.") });
const VenueNode = z.object({ venue_node_id: z.guid().describe("The venue's node id.") });
const Shortlink = z.object({
  shortlink: z.string().regex(/^[A-Za-z0-9]{8}$/).describe("The event's short code (8 letters and digits).").meta({ example: 'k3Xb9QzA' }),
});
const UserAgent = z.object({
  'user-agent': z
    .string()
    .optional()
    .describe('Decides where the link leads: iOS and Android go to the app, anything else to the web check-in form.')
    .meta({ example: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)' }),
});

const REDIRECT = content('text/html', 'A redirect: `Location` names the app link or the web check-in form.');
const PAGE = content('text/html', 'An HTML page.');

function errorPage(err: HttpError): Page {
  const title = err.status === 404 ? 'Not found' : 'Something went wrong';
  // A malformed id fails validation (code not_found); say so plainly.
  const message = err.code === 'not_found' ? 'This link is not valid.' : err.message;
  return page({ title, body: html`<h1>${title}</h1><p>${message}</p>` });
}

function pageReply(status: number, content: PageOptions): Reply {
  return { status, page: page(content), headers: { 'Cache-Control': 'no-store' } };
}

/** A 302 with a short HTML body; the target may depend on the user agent, so it is not cached. */
function redirectReply(location: string): Reply {
  const body = page({
    title: 'Redirecting',
    body: html`<p>Continue to <a href="${location}">${location}</a>.</p>`,
  });
  return { status: 302, redirect: location, page: body, headers: { 'Cache-Control': 'no-store', Vary: 'User-Agent' } };
}

/** When an event takes place, in its zone: local time and the zone's abbreviation (the machine-readable time with its offset). */
function when(event: Pick<EventJson, 'date' | 'end_time' | 'timezone'>): SafeHtml {
  return html`<time datetime="${localIso(event.date, event.timezone)}">${formatTime(event.date, event.end_time, event.timezone)}</time>`;
}

// Trusted code only: it reads the event id and title from the page, never
// from interpolation, and writes results with textContent.
const CHECKIN_SCRIPT = `
(function () {
  var form = document.getElementById('checkin-form');
  var status = document.getElementById('status');
  var title = document.getElementById('event-title').textContent;
  function show(kind, text) { status.className = kind; status.textContent = text; }
  async function json(res) { try { return await res.json(); } catch (e) { return {}; } }
  form.addEventListener('submit', async function (event) {
    event.preventDefault();
    var button = form.querySelector('button');
    button.disabled = true;
    try {
      show('', 'Signing in…');
      var login = await fetch('/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: form.elements.email.value, password: form.elements.password.value })
      });
      var session = await json(login);
      if (!login.ok) throw new Error(login.status === 401 ? 'Wrong e-mail or password.' : (session.message || 'Sign-in failed.'));
      show('', 'Checking in…');
      var res = await fetch('/api/mobile/events/' + encodeURIComponent(form.dataset.eventId) + '/checkin', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer ' + session.access_token },
        body: JSON.stringify({ visibility: form.elements.visibility.value })
      });
      var result = await json(res);
      if (!res.ok) throw new Error(result.message || 'Check-in failed.');
      form.hidden = true;
      show('ok', (res.status === 201 ? 'You are checked in to ' : 'You were already checked in to ') + title + '.');
    } catch (err) {
      show('error', err && err.message ? err.message : 'Something went wrong.');
      button.disabled = false;
    }
  });
})();
`;

export const deeplinkRoutes = [
  defineRoute({
    method: 'get',
    path: '/l/checkin/event/:event_node_id',
    summary: 'Event check-in deep link: 302 to the app on iOS/Android, else to the web check-in form.',
    description:
      "The link shared to check in to an event: 302 to the app's link (`<APP_SCHEME>://checkin/event/{event_node_id}`) on iOS and Android, else to the web check-in form. An unknown event, or one of a draft community, is a 404 page.",
    auth: 'public',
    params: EventNode,
    headers: UserAgent,
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 302: REDIRECT, 404: errors('event_not_found') },
    async handler({ params, headers, db, services }) {
      const [row] = await db(
        (tx) => tx<{ location: string }[]>`
          select api.link_event_checkin(${params.event_node_id}, ${headers['user-agent'] ?? null}, ${services.appScheme}) as location`,
      );
      return redirectReply(row!.location);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/l/event/:shortlink',
    summary: "An event's deep link by shortlink: as the event check-in deep link.",
    description:
      "An event's short deep link: leads where the event check-in link does (a 404 page for an unknown event or one of a draft community).",
    auth: 'public',
    params: Shortlink,
    headers: UserAgent,
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 302: REDIRECT, 404: errors('event_not_found') },
    async handler({ params, headers, db, services }) {
      const [row] = await db(
        (tx) => tx<{ location: string }[]>`
          select api.link_event_shortlink(${params.shortlink}, ${headers['user-agent'] ?? null}, ${services.appScheme}) as location`,
      );
      return redirectReply(row!.location);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/l/checkin/venue/:venue_node_id',
    summary: "Venue check-in deep link: one concurrent event: 302 to its link; several: a selection page; none: 404.",
    description:
      'The link shared to check in at a venue: with one event concurrent there, 302 to its check-in link; with several, a page to choose one; with none (or an unknown venue), a 404 page. Events of draft communities are left out.',
    auth: 'public',
    params: VenueNode,
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 200: content('text/html', 'A page to choose one of the concurrent events.'), 302: content('text/html', 'A redirect to the one concurrent event\'s check-in link.'), 404: errors('venue_not_found', 'no_concurrent_event') },
    async handler({ params, db }) {
      const [venue] = await db(
        (tx) => tx<{ location: string | null; venue_name: string; events: VenueChoice[] }[]>`
          select * from api.link_venue_checkin(${params.venue_node_id})`,
      );
      if (venue!.location) return redirectReply(venue!.location);
      return pageReply(200, {
        title: `Check in at ${venue!.venue_name}`,
        body: html`<h1>${venue!.venue_name}</h1>
<p>Several events are taking place here. Choose yours:</p>
<ul class="events">${venue!.events.map(
          (event) => html`
<li><a class="button" href="${`/l/checkin/event/${event.node_id}`}">${event.title}</a><br><small>${when(event)}</small></li>`,
        )}
</ul>`,
      });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/e/:shortlink',
    summary: 'Public page of an event, with share previews (Open Graph, Twitter card, schema.org Event) and an "Add to calendar" link; a cancelled (deleted) event\'s page says so.',
    description:
      "An event's public page: its title, local time (in the event's time zone, with the zone's abbreviation), place, description, a check-in link and an \"Add to calendar\" link (the event's .ics), with share previews for chat apps and search engines (Open Graph, Twitter card, a schema.org Event as JSON-LD with what Google's Event rich result requires). " +
      'A deleted event\'s page says it is cancelled (schema.org EventCancelled, 200) while its tombstone is kept: until its end is 30 days past. An unknown event, or one of a draft community, is a 404 page.',
    auth: 'public',
    params: Shortlink,
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 200: PAGE, 404: errors('event_not_found') },
    async handler({ params, db, services }) {
      const [row] = await db(
        (tx) => tx<{ page: EventPage }[]>`select api.event_page(${params.shortlink}, ${services.publicUrl}) as page`,
      );
      const data = row!.page;
      const cancelled = data.event_status === 'EventCancelled';
      const image = safeUrl(data.image_path);
      const link = safeUrl(data.event_url);
      const time = { date: data.date, end_time: data.end, timezone: data.timezone };
      return pageReply(200, {
        title: cancelled ? `Cancelled: ${data.title}` : data.title,
        indexable: true,
        head: sharePreview(data, services.publicUrl),
        body: html`${image ? html`<img src="${image}" alt="">` : ''}
${cancelled ? html`<p class="cancelled" role="status"><strong>This event has been cancelled.</strong></p>
` : ''}<h1>${data.title}</h1>
<p class="meta">${when(time)}${data.location ? html`<br>${data.location}` : ''}</p>
${data.description ? html`<p>${data.description}</p>` : ''}
${link ? html`<p><a href="${link}" rel="noopener noreferrer">Event website</a></p>` : ''}
<p>${data.checkin_path ? html`<a class="button" href="${data.checkin_path}">Check in</a><a class="button secondary" href="${data.calendar_path}" type="text/calendar">Add to calendar</a>` : ''}<a href="${data.organizer.url}">${data.organizer.name}</a></p>`,
      });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/c/:community_id',
    summary: "Public page of a community: its name, description and next events, and its calendar (the organizer its events' previews name). Draft communities are 404.",
    description:
      "A community's public page: its name, description, its next events (at most 50, each in its own time zone) with links to their pages, and a link to subscribe to its calendar; the organizer named by its events' share previews. " +
      'An unknown or draft community is a 404 page.',
    auth: 'public',
    params: z.object({ community_id: z.guid().describe("The community's id.") }),
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 200: PAGE, 404: errors('community_not_found') },
    async handler({ params, db, services }) {
      const [row] = await db(
        (tx) => tx<{ page: CommunityPage }[]>`select api.community_page(${params.community_id}, ${services.publicUrl}) as page`,
      );
      const data = row!.page;
      const description = excerpt(data.description ?? `Events of ${data.name}`, 300);
      return pageReply(200, {
        title: data.name,
        indexable: true,
        head: html`<link rel="canonical" href="${data.url}">
<meta name="description" content="${description}">
<meta property="og:type" content="website">
<meta property="og:title" content="${data.name}">
<meta property="og:description" content="${description}">
<meta property="og:url" content="${data.url}">
<script type="application/ld+json">${jsonScriptData({ '@context': 'https://schema.org', '@type': 'Organization', name: data.name, url: data.url, ...(data.description ? { description: data.description } : {}) })}</script>`,
        body: html`<h1>${data.name}</h1>
${data.description ? html`<p>${data.description}</p>` : ''}
${data.events.length === 0 ? html`<p>No upcoming events.</p>` : html`<ul class="events">${data.events.map(
          (event) => html`
<li><a href="${event.path}">${event.title}</a><br><small>${when({ date: event.date, end_time: event.end, timezone: event.timezone })}</small></li>`,
        )}
</ul>`}
<p><a class="button secondary" href="${data.calendar_path}" type="text/calendar">Subscribe to the calendar</a></p>`,
      });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/checkin/event/:event_node_id',
    summary: 'Web check-in form: sign in, then check in to the event through the API.',
    description:
      'The web check-in form: the visitor signs in and is checked in to the event through the API, in the page. An unknown event, or one of a draft community, is a 404 page.',
    auth: 'public',
    params: EventNode,
    invalidParamsStatus: 404,
    renderError: errorPage,
    responses: { 200: PAGE, 404: errors('event_not_found') },
    async handler({ params, db, services }) {
      const [row] = await db(
        (tx) => tx<{ event: EventJson }[]>`select api.event_public_by_node(${params.event_node_id}, ${services.publicUrl}) as event`,
      );
      const event = row!.event;
      return pageReply(200, {
        title: `Check in: ${event.title}`,
        body: html`<h1 id="event-title">${event.title}</h1>
<p class="meta">${when(event)}${event.location ? html`<br>${event.location}` : ''}</p>
<form id="checkin-form" data-event-id="${event.id}" autocomplete="on">
<label for="email">E-mail</label>
<input id="email" name="email" type="email" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required minlength="1">
<label for="visibility">Show my check-in</label>
<select id="visibility" name="visibility"><option value="anonymous">Anonymously</option><option value="public">Publicly</option></select>
<button type="submit">Sign in and check in</button>
</form>
<p id="status" role="status" aria-live="polite"></p>
<noscript><p>This form needs JavaScript. Or open the link on your phone to check in with the app.</p></noscript>`,
        script: CHECKIN_SCRIPT,
      });
    },
  }),
];
