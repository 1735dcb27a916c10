// The MCP process: Streamable HTTP at /mcp (POST, GET, DELETE), the OAuth
// endpoints and discovery documents (oauth.ts), and nothing else. The gateway
// proxies those paths here; `npm run mcp` runs this alone.
//
// A request to /mcp goes:
//   Host/Origin check (DNS-rebinding protection)
//   → admission in Postgres: the client IP's count for this minute (429 past
//     the limit) and the owner of the session it names
//   → bearer credential (401 with WWW-Authenticate; 403 for a
//     community-scoped API token)
//   → session: `initialize` opens one in Postgres and answers its id in
//     Mcp-Session-Id; later requests must name a live session of the same
//     user (404 otherwise, so the client starts again); DELETE ends it
//   → a fresh protocol server and a stateless transport for this request.
// Nothing about a session is kept in this process, so any replica serves any
// request.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import express, { type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { mcpStandalonePort, type Config } from '../gateway/core/process/config.ts';
import { createPool, type Sql } from '../gateway/core/database/pool.ts';
import { replicaPoolMax, Replicas } from '../gateway/core/database/replicas.ts';
import type { Context as TraceContext } from '@opentelemetry/api';
import { noteCause, requestLogger } from '../gateway/core/web/request-log.ts';
import { defaultCode, errorBody, HttpError, toHttpError } from '../gateway/core/web/errors.ts';
import type { Logger } from '../gateway/core/process/log.ts';
import { Passwords } from '../gateway/core/auth/passwords.ts';
import { mcpClientIp } from './client-address.ts';
import type { McpDeps } from './deps.ts';
import { bearerToken } from '../gateway/core/auth/bearer.ts';
import { authenticateAgent, type Agent } from './credentials.ts';
import { oauthRouter, OAUTH_PATHS } from './oauth.ts';
import {
  createProtocolServer,
  DEFAULT_PROTOCOL_VERSION,
  hasScopeStepUp,
  isProtocolVersion,
  negotiateVersion,
  PROTOCOL_VERSIONS,
  type ProtocolVersion,
} from './protocol.ts';
import { toolsByName } from './tools.ts';

export interface RunningMcpServer {
  url: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}


const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface Admission {
  allowed: boolean;
  request_limit: number;
  remaining: number;
  reset_at: Date;
  session_user_id: string | null;
}

/** Counts the request against its client IP; sets the x-ratelimit-* headers; 429 past the limit. */
export async function admit(deps: McpDeps, req: Request, res: Response, sessionId: string | null): Promise<Admission> {
  const ip = mcpClientIp(req, deps.config.mcp.proxySecret);
  const [row] = await deps.sql<Admission[]>`
    select * from private.mcp_admit(${ip}, ${deps.config.mcp.requestsPerMinute}, ${sessionId})`;
  const admission = row!;
  const resetSeconds = Math.max(1, Math.ceil((admission.reset_at.getTime() - Date.now()) / 1000));
  res.setHeader('x-ratelimit-limit', String(admission.request_limit));
  res.setHeader('x-ratelimit-remaining', String(admission.remaining));
  res.setHeader('x-ratelimit-reset', String(resetSeconds));
  if (!admission.allowed) {
    res.setHeader('Retry-After', String(resetSeconds));
    throw new HttpError(429, 'rate_limited', `too many requests from this address; retry in ${resetSeconds} s`, {
      retry_after_seconds: resetSeconds,
    });
  }
  return admission;
}

/** Express middleware form of admit() for the OAuth endpoints. */
export function ipLimit(deps: McpDeps): RequestHandler {
  return (req, res, next) => {
    admit(deps, req, res, null).then(() => next(), next);
  };
}

function jsonRpcError(res: Response, status: number, code: number, message: string): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

function checkHostAndOrigin(deps: McpDeps, req: Request): string | null {
  const host = req.headers.host;
  if (!host || !deps.allowedHosts.includes(host.toLowerCase())) return `Invalid Host header: ${host ?? ''}`;
  const origin = req.headers.origin;
  if (origin && !deps.allowedOrigins.includes(origin.toLowerCase())) return `Invalid Origin header: ${origin}`;
  return null;
}

function resourceMetadataUrl(deps: McpDeps): string {
  return `${new URL(deps.resourceUrl).origin}/.well-known/oauth-protected-resource${new URL(deps.resourceUrl).pathname}`;
}

function unauthorized(deps: McpDeps, res: Response, err: HttpError, hadToken: boolean): void {
  const parts = [`resource_metadata="${resourceMetadataUrl(deps)}"`, 'scope="mcp:read mcp:write"'];
  if (hadToken) parts.unshift('error="invalid_token"', `error_description="${err.message.replace(/["\\]/g, '')}"`);
  res.setHeader('WWW-Authenticate', `Bearer ${parts.join(', ')}`);
  res.status(401).json(errorBody('default', err));
}

/**
 * The scope a request's tools/call messages need that the credential lacks
 * (mcp:read for read tools, mcp:write for write tools), or null. Unknown
 * tools and malformed calls need none here: they are tool errors.
 */
function missingScope(body: unknown, agent: Agent): string | null {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!m || typeof m !== 'object' || (m as { method?: unknown }).method !== 'tools/call') continue;
    const name = (m as { params?: { name?: unknown } }).params?.name;
    const tool = typeof name === 'string' ? toolsByName.get(name) : undefined;
    const scope = tool ? (tool.kind === 'read' ? 'mcp:read' : 'mcp:write') : null;
    if (scope && !agent.scopes.includes(scope)) return scope;
  }
  return null;
}

/**
 * Step-up authorization (MCP 2025-11-25): 403 with a challenge naming the
 * scopes to ask for (those held and the one missing), so that an OAuth
 * client can get a token that has them and send the request again.
 */
function insufficientScope(deps: McpDeps, res: Response, agent: Agent, scope: string): void {
  const wanted = [...new Set([...agent.scopes, scope])].join(' ');
  const err = new HttpError(403, 'insufficient_scope', `this credential lacks the ${scope} scope`);
  res.setHeader(
    'WWW-Authenticate',
    `Bearer error="insufficient_scope", scope="${wanted}", resource_metadata="${resourceMetadataUrl(deps)}", error_description="${err.message}"`,
  );
  res.status(403).json(errorBody('default', err));
}

interface InitializeMessage {
  method: 'initialize';
  params?: { protocolVersion?: unknown; clientInfo?: { name?: unknown; version?: unknown } };
}

function findInitialize(body: unknown): InitializeMessage | null {
  const messages = Array.isArray(body) ? body : [body];
  for (const m of messages) {
    if (m && typeof m === 'object' && (m as { method?: unknown }).method === 'initialize') return m as InitializeMessage;
  }
  return null;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function mcpHandler(deps: McpDeps, open: Set<{ close(): Promise<void> }>, pendingRecords: Set<Promise<void>>): RequestHandler {
  const jsonBody = express.json({ limit: '1mb', type: () => true });
  return async (req: Request, res: Response, next: NextFunction) => {
    const reqLog: Logger = res.locals.log ?? deps.log;
    try {
      const rebinding = checkHostAndOrigin(deps, req);
      if (rebinding) return jsonRpcError(res, 403, -32000, rebinding);

      const header = req.headers['mcp-session-id'];
      const sessionHeader = typeof header === 'string' ? header : null;
      const sessionId = sessionHeader && UUID.test(sessionHeader) ? sessionHeader.toLowerCase() : null;
      const admission = await admit(deps, req, res, sessionId);

      const token = bearerToken(req.headers.authorization);
      if (!token) return unauthorized(deps, res, new HttpError(401, 'unauthorized', 'missing bearer credential'), false);
      let agent: Agent;
      try {
        // The resource is /mcp (also when asked as /mcp/): the path its permissions must name.
        agent = await authenticateAgent(deps.sql, token, '/mcp', [deps.resourceUrl, deps.config.publicUrl]);
      } catch (err) {
        const httpError = toHttpError(err);
        if (httpError.status === 401) return unauthorized(deps, res, httpError, true);
        throw err;
      }
      res.locals.userId = agent.userId;

      if (sessionHeader !== null && admission.session_user_id !== agent.userId) {
        return jsonRpcError(res, 404, -32001, 'Session not found');
      }
      if (req.method === 'DELETE') {
        if (!sessionId) return jsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
        await deps.sql`select private.mcp_session_end(${sessionId}, ${agent.userId})`;
        res.status(200).end();
        return;
      }
      if (req.method !== 'GET' && req.method !== 'POST') {
        res.setHeader('Allow', 'GET, POST, DELETE');
        return jsonRpcError(res, 405, -32000, 'Method not allowed.');
      }

      let body: unknown;
      let init: InitializeMessage | null = null;
      if (req.method === 'POST') {
        await new Promise<void>((resolve, reject) => jsonBody(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
        body = req.body;
        init = findInitialize(body);
      }
      // The revision this request speaks: what its initialize negotiates, else
      // its MCP-Protocol-Version header (2025-06-18 on), else 2025-03-26.
      const versionHeader = req.headers['mcp-protocol-version'];
      let version: ProtocolVersion;
      if (init) {
        version = negotiateVersion(init.params?.protocolVersion);
      } else if (versionHeader === undefined) {
        version = DEFAULT_PROTOCOL_VERSION;
      } else if (isProtocolVersion(versionHeader)) {
        version = versionHeader;
      } else {
        return jsonRpcError(res, 400, -32000, `Bad Request: unsupported MCP-Protocol-Version (supported: ${PROTOCOL_VERSIONS.join(', ')})`);
      }
      if (init) {
        const [row] = await deps.sql<{ id: string }[]>`
          select private.mcp_session_open(${agent.userId}, ${str(init.params?.clientInfo?.name)},
                                          ${str(init.params?.clientInfo?.version)}, ${version}) as id`;
        res.setHeader('mcp-session-id', row!.id);
      } else if (hasScopeStepUp(version)) {
        const scope = missingScope(body, agent);
        if (scope) return insufficientScope(deps, res, agent, scope);
      }

      const mcp = createProtocolServer({
        sql: deps.sql,
        replicas: deps.replicas,
        agent,
        sessionId: sessionId ?? (res.getHeader('mcp-session-id') as string | undefined) ?? null,
        protocolVersion: version,
        publicUrl: deps.config.publicUrl,
        statementTimeoutMs: deps.config.statementTimeoutMs,
        traceId: res.locals.traceId as string | undefined,
        traceparent: res.locals.traceparent as string | undefined,
        traceContext: res.locals.traceContext as TraceContext | undefined,
        log: reqLog,
        pendingRecords,
      });
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableDnsRebindingProtection: true,
        allowedHosts: deps.allowedHosts,
        allowedOrigins: deps.allowedOrigins,
      });
      const handle = {
        close: async () => {
          await transport.close().catch(() => {});
          await mcp.close().catch(() => {});
        },
      };
      open.add(handle);
      res.on('close', () => {
        open.delete(handle);
        void handle.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(
        Object.assign(req, {
          auth: {
            token: agent.token,
            clientId: agent.clientId ?? `api_token:${agent.credentialId}`,
            scopes: agent.scopes,
            expiresAt: agent.expiresAt,
          },
        }),
        res,
        body,
      );
    } catch (err) {
      next(err);
    }
  };
}

/**
 * A request body the parsers refused (express.json / express.urlencoded, as
 * body-parser's errors: too large, malformed, an unsupported charset or
 * encoding) is the client's fault: its own 4xx status, never a 500.
 */
function bodyParserError(err: unknown): HttpError | null {
  const e = err as { type?: unknown; status?: unknown; expose?: unknown; message?: unknown } | null;
  if (typeof e?.type !== 'string' || typeof e.status !== 'number' || e.status < 400 || e.status >= 500 || e.expose !== true) return null;
  const message = typeof e.message === 'string' ? e.message : 'the request body could not be read';
  return new HttpError(e.status, defaultCode(e.status), message);
}

const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  if (res.headersSent) return;
  const type = (err as { type?: unknown } | null)?.type;
  if (req.path === '/mcp' && (type === 'entity.parse.failed' || type === 'entity.too.large')) {
    return jsonRpcError(res, type === 'entity.too.large' ? 413 : 400, -32700, 'Parse error: invalid JSON');
  }
  const httpError = bodyParserError(err) ?? toHttpError(err);
  // The metrics' cause of a 503 (core/process/metrics.ts), as the gateway's pipeline counts it.
  if (httpError.status === 503) noteCause(res, err instanceof HttpError ? 'overloaded' : 'database');
  if (httpError.status >= 500) (res.locals.log as Logger | undefined)?.error({ err }, 'mcp request failed');
  res.status(httpError.status).json(errorBody('default', httpError));
};

/** Host headers and origins /mcp accepts: PUBLIC_URL's, localhost on the gateway's and this process's ports, MCP_ALLOWED_HOSTS. */
function allowedHostsAndOrigins(config: Config, ownPort: number): { hosts: string[]; origins: string[] } {
  const pub = new URL(config.publicUrl);
  const hosts = new Set<string>([pub.host.toLowerCase()]);
  const origins = new Set<string>([pub.origin.toLowerCase()]);
  for (const port of [config.port, ownPort]) {
    for (const name of ['localhost', '127.0.0.1', '[::1]']) {
      hosts.add(`${name}:${port}`);
      origins.add(`http://${name}:${port}`);
    }
  }
  for (const extra of config.mcp.allowedHosts) {
    hosts.add(extra.toLowerCase());
    origins.add(`https://${extra.toLowerCase()}`);
  }
  return { hosts: [...hosts], origins: [...origins] };
}

/**
 * Starts the MCP server on MCP_PORT (0: any free port; unset: PORT + 1). It needs a
 * migrated database only when requests arrive (the gateway, or whoever
 * started it, migrates).
 */
export async function startMcpServer(config: Config, databaseUrl: string, log: Logger): Promise<RunningMcpServer> {
  const sql = createPool(databaseUrl, { max: config.dbPoolMax, applicationName: 'mcp-server', mode: config.databasePoolMode, log, publicUrl: config.publicUrl });
  // Read replicas (DATABASE_REPLICA_URLS): the read tools' transactions, as in the gateway.
  const replicas =
    config.databaseReplicaUrls.length > 0
      ? new Replicas(databaseUrl, config.databaseReplicaUrls, {
          maxLagMs: config.replicaMaxLagMs,
          pool: { max: replicaPoolMax(config.dbPoolMax), applicationName: 'mcp-server', mode: config.databasePoolMode, log, publicUrl: config.publicUrl },
          log,
        }).start()
      : undefined;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(mcpStandalonePort(config), config.mcp.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const { hosts, origins } = allowedHostsAndOrigins(config, port);
  const deps: McpDeps = {
    sql,
    replicas,
    config,
    log,
    resourceUrl: `${config.publicUrl}/mcp`,
    allowedHosts: hosts,
    allowedOrigins: origins,
    passwords: new Passwords(config.passwords),
  };
  const open = new Set<{ close(): Promise<void> }>();
  const pendingRecords = new Set<Promise<void>>();

  app.use(requestLogger(log));
  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.use(OAUTH_PATHS, ipLimit(deps));
  app.use(oauthRouter(deps));
  app.all('/mcp', mcpHandler(deps, open, pendingRecords));
  app.use((req, res) => {
    res.status(404).json(errorBody('default', new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`)));
  });
  app.use(errorHandler);

  // Expired counts, sessions and OAuth state, and stored request records
  // past their retention, are pruned by the job worker's crontab
  // (gateway/jobs/crontab.ts).

  const close = async () => {
    await Promise.all([...open].map((h) => h.close()));
    await Promise.all([...pendingRecords]);
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2_000).unref();
    });
    await sql.end({ timeout: 5 });
    await replicas?.close();
    await deps.passwords.close();
  };
  return { url: `http://127.0.0.1:${port}`, port, server, close };
}
