// An addition to the interface: what an agent did. Every MCP tool call is recorded
// (app.mcp_tool_calls: tool, arguments with secrets redacted, outcome,
// duration); the owner of the credential reads their own here, newest first.
// Operators read everyone's with admin.mcp_tool_calls / `npm run admin -- agent-calls`.
import { z } from 'zod';
import { LIMITS } from '../core/limits.ts';
import { DateTime, errors } from '../http/responses.ts';
import { defineRoute } from '../http/route.ts';
import { QueryInteger } from '../core/schemas.ts';

export const agentCallRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/docs/agent-calls',
    summary: "Tool calls made through the agent interface (/mcp) with the caller's credentials, newest first.",
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
        data: z.array(
          z.object({
            id: z.number().int(),
            tool: z.string(),
            arguments: z.record(z.string(), z.unknown()).nullable(),
            outcome: z.string(),
            error_message: z.string().nullable(),
            duration_ms: z.number().nullable(),
            credential_kind: z.string().nullable(),
            credential_id: z.string().nullable(),
            client_id: z.string().nullable(),
            session_id: z.string().nullable(),
            called_at: DateTime,
          }),
        ),
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
