// Where an e-mailed link of /auth/v1 may send the browser once it is verified
// (GET /auth/v1/verify `redirect_to`): only to an address of the allow-list
// (AUTH_REDIRECT_URLS, docs/supabase-sdks.md#links), else to the site's own
// address (SITE_URL, default PUBLIC_URL), as Supabase Auth does. An open
// redirect would hand a signed-in session (the URL fragment) to anyone.

import type { AuthRedirects } from '../process/config.ts';

/**
 * Whether `target` is one of `allowed`: the same scheme, host and port, and a
 * path equal to the entry's or below it (an entry `https://app.example/cb`
 * admits `/cb` and `/cb/x`, not `/cbx`). The site's address is always allowed.
 */
export function isAllowedRedirect(target: string, redirects: AuthRedirects): boolean {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return false;
  }
  if (url.username !== '' || url.password !== '') return false;
  return [redirects.siteUrl, ...redirects.allowed].some((entry) => {
    let allowed: URL;
    try {
      allowed = new URL(entry);
    } catch {
      return false;
    }
    if (allowed.protocol !== url.protocol || allowed.host !== url.host) return false;
    const base = allowed.pathname.replace(/\/+$/, '');
    return url.pathname === base || url.pathname.startsWith(`${base}/`) || (base === '' && url.pathname === '');
  });
}

/** `target` if allowed, else the site's address. */
export function redirectTarget(target: string | undefined, redirects: AuthRedirects): string {
  return target !== undefined && isAllowedRedirect(target, redirects) ? target : redirects.siteUrl;
}
