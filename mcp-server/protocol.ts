// One MCP protocol server per HTTP request (the transport runs stateless;
// the session id lives in Postgres, see server.ts), with:
//   * `initialize` answering the protocol version the client asks for when it
//     is one of PROTOCOL_VERSIONS (2025-11-25, 2025-06-18, 2025-03-26); an
//     older one gets 2025-03-26 (the closest), anything else the latest;
//   * tools/list from the tool definitions (title, annotations, input and
//     output JSON Schema from zod), in the shape of the request's version:
//     2025-03-26 has no outputSchema;
//   * tools/call handled here, so that every failure is a tool error
//     (`isError: true`, JSON text with an `error` code), never a JSON-RPC
//     internal error: unknown tool, arguments that are not an object or do not
//     match the schema, missing scope, anything SQL raises. A success is the
//     JSON text and, from 2025-06-18 on, the same object as structuredContent.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { InitializeRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { assertStorable } from '../gateway/core/web/input.ts';
import type { Context as TraceContext } from '@opentelemetry/api';
import { requestTransaction } from '../gateway/core/database/request-transaction.ts';
import type { Replicas } from '../gateway/core/database/replicas.ts';
import type { Sql } from '../gateway/core/database/pool.ts';
import type { ErrorCode } from '../gateway/core/web/error-codes.ts';
import { toHttpError } from '../gateway/core/web/errors.ts';
import type { Logger } from '../gateway/core/process/log.ts';
import type { Agent } from './credentials.ts';
import { tools, toolsByName, type ToolDefinition } from './tools.ts';

/** The protocol revisions this server speaks, newest first. */
export const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number];
export const LATEST_PROTOCOL_VERSION: ProtocolVersion = PROTOCOL_VERSIONS[0];
/** What a request that names no version speaks (the transport spec says so for a missing MCP-Protocol-Version header). */
export const DEFAULT_PROTOCOL_VERSION: ProtocolVersion = '2025-03-26';

export const isProtocolVersion = (v: unknown): v is ProtocolVersion => (PROTOCOL_VERSIONS as readonly unknown[]).includes(v);

/**
 * The version `initialize` answers: the one asked for when this server
 * speaks it; for an older dated revision, the oldest one spoken (the closest
 * to the client's); for anything else (a newer revision, no version), the latest.
 */
export function negotiateVersion(asked: unknown): ProtocolVersion {
  if (isProtocolVersion(asked)) return asked;
  const oldest = PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.length - 1]!;
  if (typeof asked === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(asked) && asked < oldest) return oldest;
  return LATEST_PROTOCOL_VERSION;
}

/** Whether a revision has structured tool output (outputSchema, structuredContent: 2025-06-18 on). */
export const hasStructuredOutput = (version: ProtocolVersion): boolean => version !== '2025-03-26';
/** Whether a revision has scope step-up (403 insufficient_scope with a WWW-Authenticate challenge: 2025-11-25 on). */
export const hasScopeStepUp = (version: ProtocolVersion): boolean => version === '2025-11-25';

export const SERVER_INFO = { name: 'community-backend', title: 'Community platform', version: '1.0.0' };

const INSTRUCTIONS =
  'Tools for community managers: read the communities you manage and their events, onboard members ' +
  '(create_member e-mails them a set-password link), set their attributes and hand them to your communities. ' +
  'Results are JSON (text, and structuredContent matching each tool\'s outputSchema); failures are tool errors ' +
  'whose JSON carries an `error` code (not_found, invalid_arguments, rate_limited, email_taken, insufficient_scope, ...).';

/** What the server offers: tools only (their list never changes while the server runs). */
const CAPABILITIES = { tools: { listChanged: false } };

/** tools/call as it arrives: everything is checked by hand, so nothing fails before our handler. */
const LenientCallToolRequest = z.object({
  method: z.literal('tools/call'),
  params: z.unknown().optional(),
});

/**
 * A zod schema as JSON Schema 2020-12 (the MCP default dialect): `input`
 * for what a client sends, `output` for what a tool answers. An `example`
 * (which the OpenAPI document uses) becomes JSON Schema's `examples`.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  return z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    override: ({ jsonSchema: js }) => {
      const node = js as Record<string, unknown>;
      if ('example' in node) {
        node.examples = [node.example];
        delete node.example;
      }
    },
  }) as Tool['inputSchema'];
}

/** tools/list of each revision, made once. */
const toolLists = new Map<boolean, Tool[]>();
function toolList(version: ProtocolVersion): Tool[] {
  const structured = hasStructuredOutput(version);
  let list = toolLists.get(structured);
  if (!list) {
    list = tools.map((tool) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: jsonSchema(tool.input, 'input'),
      ...(structured ? { outputSchema: jsonSchema(tool.output, 'output') as Tool['outputSchema'] } : {}),
      annotations: { title: tool.title, ...tool.annotations },
    }));
    toolLists.set(structured, list);
  }
  return list;
}

export interface CallContext {
  sql: Sql;
  /** Read replicas (DATABASE_REPLICA_URLS): the read tools run on one that has the agent's user's writes (core/database/replicas.ts). */
  replicas?: Replicas;
  agent: Agent;
  sessionId: string | null;
  /** The revision this request speaks (negotiated by its initialize, else its MCP-Protocol-Version header). */
  protocolVersion: ProtocolVersion;
  publicUrl: string;
  statementTimeoutMs: number;
  /** The request's W3C trace id (the gateway's, through traceparent): its tool calls' transactions carry it. */
  traceId?: string;
  /** Its W3C traceparent: the jobs its tool calls queue carry it (core/database/transaction.ts). */
  traceparent?: string;
  /** Its span context, when traces are exported (the tool call's transaction is a child span). */
  traceContext?: TraceContext;
  log: Logger;
  /** Audit records not yet written (awaited on shutdown). */
  pendingRecords: Set<Promise<void>>;
}

export function createProtocolServer(ctx: CallContext): Server {
  const server = new Server(SERVER_INFO, { capabilities: CAPABILITIES, instructions: INSTRUCTIONS });
  server.setRequestHandler(InitializeRequestSchema, (request) => ({
    protocolVersion: negotiateVersion(request.params.protocolVersion),
    capabilities: CAPABILITIES,
    serverInfo: SERVER_INFO,
    instructions: INSTRUCTIONS,
  }));
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolList(ctx.protocolVersion) }));
  // Server.setRequestHandler would validate tools/call against the SDK's
  // schema first and answer a JSON-RPC error (e.g. for positional
  // arguments); the base Protocol method registers the handler as is.
  const register = Object.getPrototypeOf(Server.prototype).setRequestHandler as Server['setRequestHandler'];
  register.call(server, LenientCallToolRequest, (request) => callTool(ctx, request.params));
  return server;
}

function toolError(error: ErrorCode, message: string, details?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify({ error, message, ...(details ? { details } : {}) }) }], isError: true };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

interface Outcome {
  result: CallToolResult;
  /** The tool error's code, or 'ok' (recorded with the call). */
  code: ErrorCode | 'ok';
  message: string | null;
}

/**
 * Why arguments cannot be stored or sent to SQL (REST refuses the same in a
 * body: NUL or a lone surrogate in a string or key, a number JSON cannot
 * hold, nesting deeper than 64 levels); null when they can.
 */
function unstorable(args: unknown): string | null {
  try {
    assertStorable(args, 'arguments', 400);
    return null;
  } catch (err) {
    return toHttpError(err).message;
  }
}

async function runTool(ctx: CallContext, tool: ToolDefinition, rawArgs: unknown, problem: string | null): Promise<Outcome> {
  if (rawArgs !== undefined && !isPlainObject(rawArgs)) {
    const message = 'arguments must be an object';
    return { result: toolError('invalid_arguments', message), code: 'invalid_arguments', message };
  }
  // Before any SQL (a deeply nested value would not even serialise).
  if (problem) return { result: toolError('invalid_arguments', problem), code: 'invalid_arguments', message: problem };
  const parsed = tool.input.safeParse(rawArgs ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
    const message = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
    return { result: toolError('invalid_arguments', message, { issues }), code: 'invalid_arguments', message };
  }
  const scope = tool.kind === 'read' ? 'mcp:read' : 'mcp:write';
  if (!ctx.agent.scopes.includes(scope)) {
    const message = `this credential lacks the ${scope} scope`;
    return { result: toolError('insufficient_scope', message), code: 'insufficient_scope', message };
  }
  try {
    // As a REST route's: on a replica that has the agent's user's writes for a read tool, else the primary.
    const db = requestTransaction({
      sql: ctx.sql,
      replicas: ctx.replicas,
      claims: ctx.agent.claims,
      readOnly: tool.kind === 'read',
      statementTimeoutMs: ctx.statementTimeoutMs,
      traceId: ctx.traceId,
      traceparent: ctx.traceparent,
      traceContext: ctx.traceContext,
    });
    const value = await db((tx) => tool.run(tx, parsed.data, { publicUrl: ctx.publicUrl }));
    const result: CallToolResult = { content: [{ type: 'text', text: JSON.stringify(value) }] };
    if (hasStructuredOutput(ctx.protocolVersion) && isPlainObject(value)) result.structuredContent = value;
    return { result, code: 'ok', message: null };
  } catch (err) {
    const httpError = toHttpError(err);
    if (httpError.status >= 500) ctx.log.error({ err, tool: tool.name }, 'tool failed');
    const code: ErrorCode =
      httpError.code === 'bad_request' || httpError.code === 'validation_error' ? 'invalid_arguments' : httpError.code;
    return { result: toolError(code, httpError.message), code, message: httpError.message };
  }
}

/** Text Postgres can store: a NUL (e.g. in an unknown tool's name, echoed in the message) becomes U+FFFD. */
const storableText = (text: string): string => text.replace(/\u0000/g, '\uFFFD');

async function callTool(ctx: CallContext, params: unknown): Promise<CallToolResult> {
  const started = performance.now();
  const name = isPlainObject(params) && typeof params.name === 'string' ? params.name : null;
  const rawArgs = isPlainObject(params) ? params.arguments : undefined;
  const tool = name ? toolsByName.get(name) : undefined;
  const problem = isPlainObject(rawArgs) ? unstorable(rawArgs) : null;
  let outcome: Outcome;
  if (!tool) {
    const message = name ? `unknown tool ${name}` : 'params.name must name a tool';
    outcome = { result: toolError('unknown_tool', message), code: 'unknown_tool', message };
  } else {
    outcome = await runTool(ctx, tool, rawArgs, problem);
  }
  // Arguments that cannot be stored are recorded as why not (the call is still recorded).
  const recordedArgs = isPlainObject(rawArgs) ? (problem ? { not_recorded: problem.slice(0, 200) } : rawArgs) : null;
  const durationMs = performance.now() - started;
  // Recorded off the answer's path (one round trip less per call); the
  // server waits for pending records when it closes. SQL caps what is kept
  // (private.mcp_record_call: 16 KB of arguments).
  const record = ctx.sql`
      select private.mcp_record_call(${ctx.agent.userId}, ${ctx.agent.kind}, ${ctx.agent.credentialId}, ${ctx.agent.clientId},
                                     ${ctx.sessionId}, ${storableText((name ?? '(none)').slice(0, 100))},
                                     ${recordedArgs ? ctx.sql.json(recordedArgs as never) : null},
                                     ${outcome.code}, ${outcome.message === null ? null : storableText(outcome.message)},
                                     ${durationMs.toFixed(3)})`
    .then(() => undefined)
    .catch((err: unknown) => ctx.log.error({ err }, 'could not record the tool call'));
  ctx.pendingRecords.add(record);
  void record.finally(() => ctx.pendingRecords.delete(record));
  return outcome.result;
}
