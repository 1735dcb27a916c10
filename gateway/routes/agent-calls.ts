// An addition to the interface: what an agent did. Every MCP tool call is recorded
// (app.mcp_tool_calls: tool, arguments with secrets redacted, outcome,
// duration); the owner of the credential reads their own here, newest first.
// Operators read everyone's with admin.mcp_tool_calls / `npm run admin -- agent-calls`.
import { z } from 'zod';
import { LIMITS } from '../core/web/limits.ts';
import { DateTime, errors, Id } from '../http/responses.ts';
import { defineRoute } from '../http/route.ts';
import { QueryInteger } from '../core/web/schemas.ts';

export const agentCallRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/docs/agent-calls',
    summary: "Tool calls made through the agent interface (/mcp) with the caller's credentials, newest first.",
    description:
      "What AI agents did with the caller's credentials: every tool call made through the agent interface (/mcp) with one of their API tokens or OAuth grants, newest first, with its arguments (secrets redacted), outcome and duration. Page back with `before_id`.",
    limits: [`\`limit\` is 1 to ${LIMITS.pageLimitMax} (default 50).`],
    auth: 'user',
    query: z.object({
      limit: QueryInteger(1, LIMITS.pageLimitMax).optional().describe('How many calls to answer (default 50).').meta({ example: 20 }),
      before_id: QueryInteger(1, Number.MAX_SAFE_INTEGER)
        .optional()
        .describe("Only calls older than this one: the last `id` of the previous page (absent: the newest).")
        .meta({ example: 1234 }),
    }),
    responses: {
      200: z.object({
        data: z
          .array(
            z
              .object({
                id: z.number().int().describe("The call's number (pass the last one as `before_id` for the next page).").meta({ example: 1234 }),
                tool: z.string().describe('The tool called.').meta({ example: 'list_upcoming_events' }),
                arguments: z
                  .record(z.string(), z.unknown())
                  .nullable()
                  .describe('The arguments it was called with, secrets redacted; null when none.')
                  .meta({ example: { limit: 10 } }),
                outcome: z.string().describe('`ok`, or the error code the call ended with.').meta({ example: 'ok' }),
                error_message: z.string().nullable().describe("The error's message, or null.").meta({ example: null }),
                duration_ms: z.number().describe('How long the call took, in milliseconds.').meta({ example: 18.4 }),
                credential_kind: z.enum(['api_token', 'oauth']).describe('The credential the agent used: an API token, or an OAuth grant.'),
                credential_id: Id.nullable().describe('Which API token or grant, or null.'),
                client_id: z.string().nullable().describe('The OAuth client, or null for an API token.').meta({ example: null }),
                session_id: Id.nullable().describe('The MCP session, or null.'),
                called_at: DateTime.describe('When the call was made.'),
              })
              .describe('A tool call.'),
          )
          .describe('The calls, newest first.'),
      }),
      400: errors('invalid_limit'),
    },
    async handler({ query, db }) {
      const [row] = await db(
        (tx) => tx<{ page: { data: unknown[] } }[]>`
          select api.mcp_tool_calls_mine(${query.limit ?? 50}, ${query.before_id ?? null}) as page`,
      );
      return { status: 200, body: row!.page };
    },
  }),
];
