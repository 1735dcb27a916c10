// HTML for the few web pages (deep links, public event page, web check-in
// form): one escape helper and one page frame. `html` is a tagged template
// that escapes every interpolated value unless it is already SafeHtml, so
// content from the database can only ever render as text.
import crypto from 'node:crypto';
import { formatLocalTime } from './time-zones.ts';

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

export type HtmlValue = SafeHtml | string | number | null | undefined | false | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(value);
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

/** An http(s) URL or a same-site path, usable in href/src; anything else (javascript:, data:, ...) is null. */
export function safeUrl(value: string | null | undefined): string | null {
  if (!value) return null;
  if (/^\/(?!\/)/.test(value)) return value;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.toString() : null;
  } catch {
    return null;
  }
}

/**
 * "Saturday 21 November 2026 at 18:00 CET" for an ISO timestamp, in the
 * event's time zone (UTC when none is given); with an end, a range that names
 * the day once when both fall on it (time-zones.ts).
 */
export function formatTime(startIso: string, endIso?: string | null, zone?: string | null): string {
  return formatLocalTime(startIso, endIso, zone);
}

/**
 * A page and the headers it needs: its Content-Security-Policy names the
 * nonce of its own <style> and <script>, so the two are only ever sent
 * together (a page sent with other headers, or none, renders unstyled).
 */
export interface Page {
  html: string;
  /** Headers the page needs (Content-Security-Policy with the page's nonce). */
  headers: Record<string, string>;
}

const STYLE = `
  :root { color-scheme: light dark; }
  body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; padding: 1rem; }
  main { max-width: 32rem; margin: 0 auto; }
  h1 { font-size: 1.5rem; line-height: 1.25; margin: .5rem 0; overflow-wrap: anywhere; }
  .meta { color: GrayText; margin: 0 0 1rem; }
  p, li { overflow-wrap: anywhere; }
  img { max-width: 100%; height: auto; border-radius: .5rem; }
  ul.events { list-style: none; padding: 0; }
  ul.events li { margin: .5rem 0; }
  a.button, button { display: inline-block; font: inherit; padding: .65rem 1rem; border-radius: .5rem; border: 0;
    background: #2563eb; color: #fff; text-decoration: none; cursor: pointer; }
  a.button.secondary, button.secondary { background: transparent; color: inherit; border: 1px solid GrayText; }
  a.button.secondary { margin-left: .5rem; }
  button[disabled] { opacity: .6; }
  label { display: block; margin: .75rem 0 .25rem; }
  input, select { font: inherit; width: 100%; box-sizing: border-box; padding: .55rem; border-radius: .4rem; border: 1px solid GrayText; }
  form button { margin-top: 1rem; width: 100%; }
  form button.secondary { margin-top: .5rem; }
  .service { font-weight: 600; margin: 0; }
  #status { margin-top: 1rem; min-height: 1.5rem; }
  #status.ok { color: #15803d; font-weight: 600; }
  #status.error { color: #b91c1c; }
`;

/**
 * JSON for a `<script type="application/ld+json">` data block: `<`, `>`, `&`
 * and U+2028/U+2029 written as \u escapes, so no value can close the element
 * or start markup (the JSON parses to the same value).
 */
export function jsonScriptData(value: unknown): SafeHtml {
  return new SafeHtml(
    JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
  );
}

export interface PageOptions {
  title: string;
  body: SafeHtml;
  /** Trusted code only; runs under the page's nonce. */
  script?: string;
  /** More elements of <head> (meta tags, data blocks), already escaped. */
  head?: SafeHtml;
  /** Pages are `noindex` unless they say they may be indexed (the public event page). */
  indexable?: boolean;
}

/** A complete, small, mobile-friendly document. `script` (trusted code only) runs under a per-page nonce. */
export function page(options: PageOptions): Page {
  const nonce = crypto.randomBytes(16).toString('base64');
  const document = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${options.indexable ? '' : html`<meta name="robots" content="noindex">
`}<link rel="icon" href="data:,">
<title>${options.title}</title>
${options.head ?? ''}
<style nonce="${nonce}">${new SafeHtml(STYLE)}</style>
</head>
<body>
<main>
${options.body}
</main>
${options.script ? html`<script nonce="${nonce}">${new SafeHtml(options.script)}</script>` : ''}
</body>
</html>
`;
  return {
    html: document.value,
    headers: securityHeaders(nonce),
  };
}

/**
 * The security headers of every HTML response (pages and error pages): a
 * strict CSP whose styles and scripts need the page's nonce, no framing, no
 * MIME sniffing, no referrer.
 */
export function securityHeaders(nonce: string): Record<string, string> {
  return {
    'Content-Security-Policy': [
      "default-src 'none'",
      `style-src 'nonce-${nonce}'`,
      `script-src 'nonce-${nonce}'`,
      'img-src http: https: data:',
      "connect-src 'self'",
      "form-action 'self'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  };
}
