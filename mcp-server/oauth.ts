// OAuth 2.0 for the agent interface: authorization code + PKCE (S256) with
// dynamic client registration, served by the MCP SDK's auth router with a
// provider whose clients, pending requests, codes and tokens live in Postgres
// (hashed; sql/migrations/committed/000016-agents.sql). Endpoints, at the root of
// PUBLIC_URL (the gateway proxies them here):
//   /.well-known/oauth-authorization-server, /.well-known/openid-configuration,
//   /.well-known/oauth-protected-resource[/mcp], /register, /authorize,
//   /token, /revoke, and POST /oauth/consent (the sign-in and consent form
//   that /authorize renders).
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import {
  AccessDeniedError,
  InvalidClientError,
  InvalidClientMetadataError,
  InvalidGrantError,
  InvalidScopeError,
  InvalidTargetError,
  OAuthError,
  ServerError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { createOAuthMetadata, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import express, { type Response, type Router } from 'express';
import { z } from 'zod';
import { HttpError, toHttpError } from '../gateway/core/web/errors.ts';
import { html, page, type SafeHtml } from '../gateway/core/web/html.ts';
import { SERVICE_NAME } from '../gateway/core/web/service.ts';
import { checkPassword, type PasswordAttempt } from '../gateway/core/auth/passwords.ts';
import { mcpClientIp } from './client-address.ts';
import { authenticateAgent, SCOPES } from './credentials.ts';
import type { McpDeps } from './deps.ts';

/** Paths this module serves (the gateway proxies them; server.ts rate-limits them). */
export const OAUTH_PATHS = ['/authorize', '/token', '/register', '/revoke', '/oauth'];
export const WELL_KNOWN_PATHS = [
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
  '/.well-known/oauth-protected-resource',
];

const SCOPE_DESCRIPTIONS: Record<string, string> = {
  'mcp:read': 'read the communities you manage, their events, and the members your agent created',
  'mcp:write': 'create members (they get an e-mail to set a password), set their attributes, add them to your communities, and change onboarding opt-in',
};

function fromSqlError(err: unknown): never {
  if (err instanceof OAuthError) throw err;
  const httpError = toHttpError(err);
  if (httpError.code === 'invalid_grant') throw new InvalidGrantError(httpError.message);
  if (httpError.code === 'invalid_scope') throw new InvalidScopeError(httpError.message);
  if (httpError.status < 500) throw new InvalidGrantError(httpError.message);
  throw new ServerError('internal error');
}

interface TokenRow {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  scope: string;
}

const tokensOf = (row: TokenRow): OAuthTokens => ({
  access_token: row.access_token,
  token_type: 'Bearer',
  expires_in: row.expires_in,
  refresh_token: row.refresh_token,
  scope: row.scope,
});

class PostgresOAuthProvider implements OAuthServerProvider {
  constructor(private readonly deps: McpDeps) {}

  get clientsStore(): OAuthRegisteredClientsStore {
    const { sql } = this.deps;
    return {
      async getClient(clientId: string): Promise<OAuthClientInformationFull | undefined> {
        const [row] = await sql<{ metadata: Record<string, unknown>; client_secret_expires_at: string; client_id_issued_at: string }[]>`
          select * from private.oauth_client_get(${clientId})`;
        if (!row) return undefined;
        // The secret is checked by clientSecretCheck() (only its hash is kept).
        return {
          ...(row.metadata as Omit<OAuthClientInformationFull, 'client_id'>),
          client_id: clientId,
          client_id_issued_at: Number(row.client_id_issued_at),
        };
      },
      async registerClient(client: Omit<OAuthClientInformationFull, 'client_id' | 'client_id_issued_at'>) {
        const full = client as OAuthClientInformationFull;
        const unusable = full.redirect_uris.find((uri) => formActionSource(uri) === null);
        if (unusable !== undefined) {
          throw new InvalidClientMetadataError(
            `redirect_uri ${JSON.stringify(unusable)} is not usable: an http(s) URL needs a host name or IP address (letters, digits, '.', '-'), another scheme a plain scheme name`,
          );
        }
        await sql`
          select private.oauth_client_register(${full.client_id}, ${full.client_secret ?? null},
                   ${full.client_secret_expires_at ?? 0}, ${full.client_id_issued_at ?? Math.floor(Date.now() / 1000)},
                   ${sql.json(full as never)})`;
        return full;
      },
    };
  }

  async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    const scopes = params.scopes && params.scopes.length > 0 ? params.scopes : [...SCOPES];
    const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
    if (unknown.length > 0) throw new InvalidScopeError(`unknown scope: ${unknown.join(' ')}`);
    // RFC 8707: the token is for this resource (/mcp), also when the client
    // named none; a client naming another one is refused.
    const resource = params.resource?.href.replace(/\/+$/, '') ?? this.deps.resourceUrl;
    if (resource !== this.deps.resourceUrl && resource !== this.deps.config.publicUrl) {
      throw new InvalidTargetError(`unknown resource ${resource}`);
    }
    const [row] = await this.deps.sql<{ token: string }[]>`
      select private.oauth_request_begin(${client.client_id}, ${params.redirectUri}, ${params.codeChallenge},
                                         ${params.state ?? null}, ${scopes}, ${resource}) as token`;
    sendConsentPage(res, 200, {
      serviceHost: new URL(this.deps.config.publicUrl).host,
      requestToken: row!.token,
      clientName: client.client_name ?? client.client_id,
      clientUri: client.client_uri ?? null,
      redirectUri: params.redirectUri,
      scopes,
      error: null,
    });
  }

  async challengeForAuthorizationCode(client: OAuthClientInformationFull, code: string): Promise<string> {
    try {
      const [row] = await this.deps.sql<{ challenge: string | null }[]>`
        select private.oauth_code_challenge(${client.client_id}, ${code}) as challenge`;
      if (!row?.challenge) throw new InvalidGrantError('invalid or expired authorization code');
      return row.challenge;
    } catch (err) {
      fromSqlError(err);
    }
  }

  async exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    code: string,
    _codeVerifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    try {
      const [row] = await this.deps.sql<TokenRow[]>`
        select * from private.oauth_code_exchange(${client.client_id}, ${code}, ${redirectUri ?? null},
                                                  ${resource?.href.replace(/\/+$/, '') ?? null}, ${this.deps.config.accessTokenTtlSeconds})`;
      if (!row) throw new InvalidGrantError('invalid or expired authorization code');
      return tokensOf(row);
    } catch (err) {
      fromSqlError(err);
    }
  }

  async exchangeRefreshToken(client: OAuthClientInformationFull, refreshToken: string, scopes?: string[]): Promise<OAuthTokens> {
    try {
      const [row] = await this.deps.sql<TokenRow[]>`
        select * from private.oauth_token_refresh(${client.client_id}, ${refreshToken}, ${scopes ?? null}, null,
                                                  ${this.deps.config.accessTokenTtlSeconds})`;
      if (!row) throw new InvalidGrantError('refresh token already used; the authorization is revoked');
      return tokensOf(row);
    } catch (err) {
      fromSqlError(err);
    }
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const agent = await authenticateAgent(this.deps.sql, token, '/mcp', [this.deps.resourceUrl, this.deps.config.publicUrl]);
    return { token, clientId: agent.clientId ?? '', scopes: agent.scopes, expiresAt: agent.expiresAt };
  }

  async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    await this.deps.sql`select private.oauth_token_revoke(${client.client_id}, ${request.token})`;
  }
}

interface ConsentView {
  /** Where the user is signing in (PUBLIC_URL's host), named beside the service's name. */
  serviceHost: string;
  requestToken: string;
  clientName: string;
  clientUri: string | null;
  redirectUri: string;
  scopes: string[];
  error: string | null;
}

/**
 * What the consent page's Content-Security-Policy allows as a form target for
 * a redirect URI: its origin (http/https; the host only letters, digits, '.'
 * and '-', or an IP address) or its scheme (a native app's own scheme). Null
 * for anything else, so that no character of a registered URI can end the
 * directive and add another (`https://evil.example;script-src-elem ...`).
 */
export function formActionSource(redirectUri: string): string | null {
  let url: URL;
  try {
    url = new URL(redirectUri);
  } catch {
    return null;
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') {
    return /^https?:\/\/(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/.test(url.origin) ? url.origin : null;
  }
  return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol) ? url.protocol : null;
}

function sendConsentPage(res: Response, status: number, view: ConsentView): void {
  const body: SafeHtml = html`
<p class="service" id="service">${SERVICE_NAME} · ${view.serviceHost}</p>
<h1>Connect ${view.clientName} to your account</h1>
<p class="meta"><strong id="client">${view.clientName}</strong> asks to act as you on ${SERVICE_NAME} (${view.serviceHost}), through its agent interface. It will be able to:</p>
<ul>${view.scopes.map((s) => html`<li>${SCOPE_DESCRIPTIONS[s] ?? s}</li>`)}</ul>
<p class="meta">After you allow it, you return to <code>${view.redirectUri}</code>.</p>
${view.error ? html`<p id="status" class="error" role="alert">${view.error}</p>` : ''}
<form method="post" action="/oauth/consent">
  <input type="hidden" name="request" value="${view.requestToken}">
  <label for="email">E-mail</label>
  <input id="email" name="email" type="email" autocomplete="username" required>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit" name="decision" value="allow">Sign in and allow</button>
  <button type="submit" name="decision" value="deny" class="secondary" formnovalidate>Deny</button>
</form>`;
  const rendered = page({ title: `Connect ${view.clientName} to ${SERVICE_NAME}`, body });
  // The form's answer redirects to the client: allow that origin (or scheme) as a form target.
  const target = formActionSource(view.redirectUri);
  const csp = rendered.headers['Content-Security-Policy']!.replace("form-action 'self'", target ? `form-action 'self' ${target}` : "form-action 'self'");
  res.status(status);
  for (const [name, value] of Object.entries(rendered.headers)) res.setHeader(name, value);
  res.setHeader('Content-Security-Policy', csp);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Cache-Control', 'no-store');
  res.type('html').send(rendered.html);
}

const ConsentForm = z.object({
  request: z.string().min(1).max(200),
  email: z.string().max(320).optional().default(''),
  password: z.string().max(1024).optional().default(''),
  decision: z.enum(['allow', 'deny']),
});

function redirectWith(res: Response, redirectUri: string, params: Record<string, string | null>): void {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null) url.searchParams.set(k, v);
  res.setHeader('Cache-Control', 'no-store');
  res.redirect(302, url.href);
}

function expiredPage(res: Response): void {
  const rendered = page({
    title: 'Request expired',
    body: html`<h1>This sign-in request has expired</h1><p>Go back to your application and connect again.</p>`,
  });
  for (const [name, value] of Object.entries(rendered.headers)) res.setHeader(name, value);
  res.status(400).type('html').send(rendered.html);
}

interface ApprovalRow {
  status: 'ok' | 'invalid' | 'expired' | 'request_expired';
  redirect_uri: string | null;
  code: string | null;
  state: string | null;
}

/**
 * The consent form's answer: sign in, then a code to the client (or
 * access_denied). The password is checked as POST /api/auth/login checks it
 * (gateway/auth/sign-in.ts): the login's throttling and attempt in SQL
 * (private.password_attempt_start), bcrypt here in this process's bounded
 * hashing, then private.oauth_request_approve records the outcome.
 */
function consentHandler(deps: McpDeps): express.RequestHandler {
  return async (req, res, next) => {
    try {
      const form = ConsentForm.safeParse(req.body);
      if (!form.success) return expiredPage(res);
      const { request, email, password, decision } = form.data;
      if (decision === 'deny') {
        const [denied] = await deps.sql<{ redirect_uri: string; state: string | null }[]>`
          select * from private.oauth_request_deny(${request})`;
        if (!denied) return expiredPage(res);
        const error = new AccessDeniedError('the user denied the request');
        return redirectWith(res, denied.redirect_uri, {
          error: error.errorCode,
          error_description: error.message,
          state: denied.state,
        });
      }
      const [pending] = await deps.sql<{ client_id: string; client_name: string | null; client_uri: string | null; redirect_uri: string; scopes: string[] }[]>`
        select * from private.oauth_request_get(${request})`;
      if (!pending) return expiredPage(res);
      const again = (status: number, error: string) =>
        sendConsentPage(res, status, {
          serviceHost: new URL(deps.config.publicUrl).host,
          requestToken: request,
          clientName: pending.client_name ?? pending.client_id,
          clientUri: pending.client_uri,
          redirectUri: pending.redirect_uri,
          scopes: pending.scopes,
          error,
        });
      const { passwords } = deps;
      const clientIp = mcpClientIp(req, deps.config.mcp.proxySecret);
      const busy = () => {
        res.setHeader('Retry-After', '1');
        return again(503, 'Too many sign-ins at once. Try again in a moment.');
      };
      let place;
      try {
        // A place in this client address's turn of the hashing queue.
        place = passwords.enter(clientIp);
      } catch {
        return busy();
      }
      // The login's throttling (counted per e-mail and client, per e-mail, per client address).
      const limits = deps.config.authLimits;
      let attempt: PasswordAttempt | undefined;
      let checked;
      try {
        [attempt] = await deps.sql<PasswordAttempt[]>`
          select * from private.password_attempt_start('oauth_consent', ${email}, ${clientIp},
                                                       ${passwords.cost}, ${limits.maxFailuresPerEmailAndClient},
                                                       ${limits.maxFailuresPerEmail}, ${limits.maxFailuresPerIp}, ${limits.windowSeconds})`;
        if (attempt!.status === 'throttled') {
          const wait = Math.max(1, attempt!.retry_after);
          res.setHeader('Retry-After', String(wait));
          return again(429, `Too many failed sign-ins. Try again in ${Math.ceil(wait / 60)} minute${wait > 60 ? 's' : ''}.`);
        }
        checked = await checkPassword(passwords, place, password, attempt!);
      } catch (err) {
        // The place went to another client's sign-in while this one waited.
        if (err instanceof HttpError && err.status === 503) return busy();
        throw err;
      } finally {
        place.leave();
      }
      const [approved] = await deps.sql<ApprovalRow[]>`
        select * from private.oauth_request_approve(${request}, ${attempt!.attempt}, ${checked.matched}, ${checked.newHash})`;
      if (approved?.status === 'request_expired') return expiredPage(res);
      if (approved?.status === 'expired') {
        res.setHeader('Retry-After', '1');
        return again(503, 'The sign-in took too long. Try again.');
      }
      if (approved?.status !== 'ok' || !approved.code || !approved.redirect_uri) return again(401, 'Wrong e-mail or password.');
      redirectWith(res, approved.redirect_uri, { code: approved.code, state: approved.state });
    } catch (err) {
      next(err);
    }
  };
}

/** Confidential clients' secrets are kept hashed, so the check the SDK would do on the plain secret happens here. */
function clientSecretCheck(deps: McpDeps): express.RequestHandler {
  return async (req, res, next) => {
    try {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const clientId = typeof body.client_id === 'string' ? body.client_id : null;
      if (!clientId) return next();
      const secret = typeof body.client_secret === 'string' ? body.client_secret : null;
      const [row] = await deps.sql<{ ok: boolean }[]>`select private.oauth_client_secret_matches(${clientId}, ${secret}) as ok`;
      if (row?.ok) return next();
      const error = new InvalidClientError('Invalid client credentials');
      res.status(401).json(error.toResponseObject());
    } catch (err) {
      next(err);
    }
  };
}

export function oauthRouter(deps: McpDeps): Router {
  const router = express.Router();
  const issuerUrl = new URL(deps.config.publicUrl);
  const provider = new PostgresOAuthProvider(deps);
  let metadata;
  try {
    metadata = createOAuthMetadata({ provider, issuerUrl, scopesSupported: [...SCOPES] });
  } catch (err) {
    deps.log.warn(
      { err: (err as Error).message },
      'OAuth is off: PUBLIC_URL must be https (or localhost); set MCP_DANGEROUSLY_ALLOW_INSECURE_ISSUER_URL=1 to allow http',
    );
    return router;
  }
  const protectedResource = {
    resource: deps.resourceUrl,
    authorization_servers: [metadata.issuer],
    scopes_supported: [...SCOPES],
    resource_name: 'Community platform agent interface (MCP)',
  };
  const form = express.urlencoded({ extended: false, limit: '16kb' });
  router.use(['/token', '/revoke'], form, clientSecretCheck(deps));
  router.use(
    mcpAuthRouter({
      provider,
      issuerUrl,
      resourceServerUrl: new URL(deps.resourceUrl),
      scopesSupported: [...SCOPES],
      resourceName: protectedResource.resource_name,
      authorizationOptions: { rateLimit: false },
      tokenOptions: { rateLimit: false },
      clientRegistrationOptions: { rateLimit: false },
      revocationOptions: { rateLimit: false },
    }),
  );
  router.get('/.well-known/oauth-protected-resource', (_req, res) => {
    res.json(protectedResource);
  });
  router.get('/.well-known/openid-configuration', (_req, res) => {
    res.json({ ...metadata, subject_types_supported: ['public'], claims_supported: ['sub'] });
  });
  router.post('/oauth/consent', form, consentHandler(deps));
  return router;
}

