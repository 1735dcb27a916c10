// The caller's own account (docs/api/accounts.md#your-account): delete it, export its
// data, change its e-mail address and password, see and end its sessions.
//
//   DELETE /api/mobile/account                 {password} → deleted; no password: a link is e-mailed
//   GET    /api/mobile/account/export          one JSON document (an attachment)
//   POST   /api/mobile/account/email           {email, password} → 202, links e-mailed
//   POST   /api/mobile/account/password        {current_password, new_password}
//   GET    /api/mobile/account/sessions        the sessions that can still be refreshed
//   DELETE /api/mobile/account/sessions/{id}   ends one
//   DELETE /api/mobile/account/sessions        ends all but the calling one
//
// Only the access token of a sign-in manages an account (SQL refuses an API
// token or an agent's credential: private.account_caller). The routes that
// act destructively check the password again as a sign-in does
// (gateway/auth/reauthenticate.ts: a wrong password is a failed sign-in), and
// hand the api function the single-use proof that comes of it. Every rule is SQL (sql/areas/account.sql); the web pages that
// e-mailed links open are routes/account-pages.ts.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { ApiToken } from '../core/auth/api-tokens.ts';
import { HttpError } from '../core/web/errors.ts';
import { LIMITS } from '../core/web/limits.ts';
import { Email, Password, Uuid } from '../core/web/schemas.ts';
import { DEFAULT_AUTH_LIMITS } from '../core/web/throttle.ts';
import { reauthenticate } from '../auth/reauthenticate.ts';
import { DateTime, errors, Id, succeeded } from '../http/responses.ts';
import { Webhook } from './webhooks.ts';

/** What the sign-in limits say, for the routes that check the password again. */
const REAUTHENTICATION_LIMIT =
  `The password is checked as a sign-in is: a wrong one counts as a failed sign-in of the account's e-mail (by default ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmailAndClient} ` +
  `per e-mail and client, ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmail} per e-mail, ${DEFAULT_AUTH_LIMITS.maxFailuresPerIp} per address in ` +
  `${DEFAULT_AUTH_LIMITS.windowSeconds / 60} minutes, POST /api/auth/login included); past them: 429 with Retry-After.`;

const ACCESS_TOKEN_ONLY = 'Only the access token of a sign-in manages an account: an API token is 403 `forbidden`.';

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

const Session = z
  .object({
    id: Id.describe("The session's id (the `session_id` of its access tokens)."),
    created_at: DateTime.describe('When it began: the sign-in.'),
    last_used_at: DateTime.describe('When it was last used to get tokens: the sign-in or its latest refresh.'),
    user_agent: z
      .string()
      .nullable()
      .describe('The User-Agent of that sign-in or refresh (at most 512 characters), or null when none was sent.')
      .meta({ example: 'CommunityApp/2.3 (iPhone; iOS 18.1)' }),
    ip: z.string().nullable().describe('The client address of that sign-in or refresh, or null.').meta({ example: '203.0.113.7' }),
    current: z.boolean().describe("Whether it is the session of the request's own access token."),
  })
  .meta({ id: 'Session', description: 'A session of the account: a sign-in and the refreshes of its tokens.' });

const EXAMPLE_USER_ID = '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03';
const Timestamp = (what: string) => DateTime.describe(what);
const Nullable = (schema: z.ZodType, what: string) => schema.nullable().describe(what);

const ExportDocument = z
  .object({
    exported_at: Timestamp('When this document was made.'),
    account: z
      .object({
        user_id: Id.describe("The account's id."),
        email: z.string().nullable().describe('The e-mail address it signs in with; null for a guest.').meta({ example: 'ada@example.com' }),
        has_password: z.boolean().describe('Whether it has a password (never the password or its hash).'),
        created_at: Timestamp('When the account was made.'),
        updated_at: Timestamp('When it last changed.'),
        pending_email_change: z
          .object({
            email: z.string().describe('The new address waiting for its confirmation.').meta({ example: 'ada@new.example.com' }),
            expires_at: Timestamp('When its link expires.'),
          })
          .nullable()
          .describe('An e-mail change waiting to be confirmed, or null.'),
      })
      .describe('The identity.'),
    profile: z
      .object({
        name: z.string().describe('The name.').meta({ example: 'Ada Lovelace' }),
        name_source: z.enum(['chosen', 'email']).describe('Whether the name was chosen or made from the e-mail address.'),
        subscription_type: z.string().describe('The subscription plan.').meta({ example: 'basic' }),
        node_id: Nullable(Id, 'The node other members connect to.'),
        created_at: Timestamp('When the profile was made.'),
        updated_at: Timestamp('When it last changed.'),
      })
      .nullable()
      .describe('The profile, or null when there is none.'),
    hats: z
      .array(
        z.object({
          id: Id.describe("The hat's id."),
          name: z.string().describe('Its name.').meta({ example: 'At work' }),
          hat_type: z.string().describe('Its type.').meta({ example: 'professional' }),
          description: z.string().nullable().describe('Its description, or null.').meta({ example: 'Product designer at Acme.' }),
          is_primary: z.boolean().describe('Whether it is the primary hat.'),
          created_at: Timestamp('When it was made.'),
          updated_at: Timestamp('When it last changed.'),
        }),
      )
      .describe('The hats, oldest first.'),
    memberships: z
      .array(
        z.object({
          community_id: Id.describe('The community.'),
          community_name: z.string().describe("The community's name.").meta({ example: 'Run Club' }),
          role: z.enum(['member', 'manager']).describe('The role in it.'),
          joined_at: Timestamp('When the account joined it.'),
        }),
      )
      .describe('The communities, in the order they were joined.'),
    checkins: z
      .array(
        z.object({
          id: Id.describe("The check-in's id."),
          type: z.enum(['event', 'venue']).describe('An event or a venue check-in.'),
          event_id: Nullable(Id, 'The event, or null.'),
          event_title: z.string().nullable().describe("The event's title, or null.").meta({ example: 'Tuesday run' }),
          venue_id: Nullable(Id, 'The venue node, or null.'),
          hat_id: Nullable(Id, 'The hat worn, or null.'),
          location_id: Nullable(Id, 'The location, or null.'),
          visibility: z.enum(['anonymous', 'public']).describe('Who was shown the check-in.'),
          checked_in_at: Timestamp('When.'),
          checked_out_at: Nullable(DateTime, 'When it ended, or null.'),
          device_checked_in_at: Nullable(DateTime, "The phone's time of an offline check-in, or null."),
        }),
      )
      .describe('Every check-in, oldest first.'),
    event_registrations: z
      .array(
        z.object({
          event_id: Id.describe('The event.'),
          event_title: z.string().describe("The event's title.").meta({ example: 'Tuesday run' }),
          external_platform: z.string().nullable().describe('The platform that registered the account, or null.').meta({ example: 'platform_a' }),
          registered_at: Timestamp('When.'),
        }),
      )
      .describe('Events an event platform registered the account for.'),
    connections: z
      .array(
        z.object({
          id: Id.describe("The connection's id."),
          target_node_id: Id.describe('The node of the other person (or place).'),
          target_name: z
            .string()
            .nullable()
            .describe("The other person's name as the caller sees it elsewhere (null where it is private).")
            .meta({ example: 'Grace Hopper' }),
          connection_type: z.enum(['in_event', 'post_event', 'async']).describe('How it was made.'),
          event_id: Nullable(Id, 'The event it was made at, or null.'),
          my_hat_id: Nullable(Id, "The caller's hat, or null."),
          their_hat_id: Nullable(Id, "The other person's hat, or null."),
          notes: z.string().nullable().describe('Notes, or null.').meta({ example: 'Met at the Tuesday run.' }),
          strength: z.enum(['weak', 'medium', 'strong']).nullable().describe('Strength, or null.'),
          tags: z.array(z.string()).describe('Tags.').meta({ example: ['running'] }),
          created_at: Timestamp('When it was made.'),
          updated_at: Timestamp('When it last changed.'),
        }),
      )
      .describe("The caller's connections (those other people made to the caller are theirs)."),
    tasks: z
      .array(
        z.object({
          id: Id.describe("The task's id."),
          inserted_at: Timestamp('When it was made.'),
          updated_at: Timestamp('When it last changed.'),
          meta: z.record(z.string(), z.unknown()).describe('Its attributes as stored.').meta({ example: { title: 'Call Acme', status: 'pending' } }),
        }),
      )
      .describe('The tasks, oldest first.'),
    task_links: z
      .array(
        z.object({
          id: Id.describe("The link's id."),
          type: z.literal('task_transition').describe('Always `task_transition`.'),
          origin_id: Id.describe('The task it starts from.'),
          destination_id: Id.describe('The task that follows.'),
          inserted_at: Timestamp('When it was made.'),
          meta: z.record(z.string(), z.unknown()).describe('Its transition_meta.').meta({ example: {} }),
        }),
      )
      .describe('The links between tasks.'),
    deals: z
      .array(
        z.object({
          id: Id.describe("The deal's id."),
          meta: z
            .object({
              company: z.string().describe('The company.').meta({ example: 'Acme' }),
              deal_value: z.number().nullable().describe('Its value, or null.').meta({ example: 12000 }),
              current_task_id: Nullable(Id, 'Its current task, or null.'),
              next_action: z.string().nullable().describe('Its next action, or null.').meta({ example: 'Call Acme' }),
            })
            .describe("The deal's state."),
          inserted_at: Timestamp('When it was made.'),
          updated_at: Timestamp('When it last changed.'),
        }),
      )
      .describe('The deals.'),
    sessions: z.array(Session).describe('The sessions that can still be refreshed.'),
    api_tokens: z.array(ApiToken).describe('The API tokens, active or not (never their secrets or hashes).'),
    oauth_grants: z
      .array(
        z.object({
          client_id: z.string().describe('The agent application.').meta({ example: 'claude-desktop' }),
          client_name: z.string().nullable().describe('Its name, or null.').meta({ example: 'Claude Desktop' }),
          scopes: z.array(z.string()).describe('What it may do.').meta({ example: ['mcp:read', 'mcp:write'] }),
          created_at: Timestamp('When it was granted.'),
          expires_at: Timestamp('When its latest token expires.'),
          active: z.boolean().describe('Whether a token of it still works.'),
        }),
      )
      .describe('The OAuth grants to agents (never a token or a hash).'),
    calendar_feed: z
      .object({
        exists: z.boolean().describe('Whether a personal calendar feed URL exists (never the URL).'),
        created_at: Nullable(DateTime, 'When it was made, or null.'),
      })
      .describe('The personal calendar feed.'),
    stored_files: z
      .array(
        z.object({
          bucket: z.string().describe('The bucket.').meta({ example: 'avatars' }),
          path: z.string().describe('The path in it.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
          size: z.number().int().describe('Its size in bytes.').meta({ example: 48213 }),
          content_type: z.string().describe('Its type.').meta({ example: 'image/png' }),
          created_at: Timestamp('When it was stored.'),
        }),
      )
      .describe('The stored files (paths and sizes).'),
    webhook_endpoints: z.array(Webhook).describe('The webhook endpoints of the communities the caller manages (never their secrets).'),
    agent: z
      .object({
        created_at: Timestamp('When an agent made the account.'),
        attributes: z.record(z.string(), z.unknown()).describe('What the agent recorded about the account.').meta({ example: { source: 'meetup' } }),
      })
      .nullable()
      .describe('Whether an agent made (and still manages) the account, with what it recorded; null otherwise.'),
    agent_calls: z
      .array(
        z.object({
          tool: z.string().describe('The tool.').meta({ example: 'get_member' }),
          outcome: z.string().describe('ok or error.').meta({ example: 'ok' }),
          called_at: Timestamp('When.'),
          credential_kind: z.enum(['api_token', 'oauth']).describe('The credential it was called with.'),
          arguments: z.unknown().describe('Its arguments, as recorded (capped).').meta({ example: { member_id: EXAMPLE_USER_ID } }),
        }),
      )
      .describe("The newest 1,000 tool calls of agents acting with the caller's credentials."),
    api_test_results: z
      .array(
        z.object({
          request_method: z.string().describe('The method tried.').meta({ example: 'GET' }),
          request_path: z.string().describe('The path tried.').meta({ example: '/api/mobile/profile' }),
          response_status: z.number().int().describe('Its status.').meta({ example: 200 }),
          success: z.boolean().describe('Whether it succeeded.'),
          executed_at: Timestamp('When.'),
        }),
      )
      .describe('The newest 1,000 live tests of the API run with the caller\'s tokens.'),
  })
  .meta({
    id: 'AccountExport',
    description: 'Everything the service holds about the caller, in one document.',
    example: {
      exported_at: '2026-05-14T18:30:00.000Z',
      account: { user_id: EXAMPLE_USER_ID, email: 'ada@example.com', has_password: true, created_at: '2026-01-02T09:00:00.000Z', updated_at: '2026-01-02T09:00:00.000Z', pending_email_change: null },
      profile: { name: 'Ada Lovelace', name_source: 'chosen', subscription_type: 'basic', node_id: '07207504-b13c-48d0-8de8-3cad6141f360', created_at: '2026-01-02T09:00:00.000Z', updated_at: '2026-01-02T09:00:00.000Z' },
      hats: [],
      memberships: [{ community_id: '1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b', community_name: 'Run Club', role: 'member', joined_at: '2026-01-03T10:00:00.000Z' }],
      checkins: [],
      event_registrations: [],
      connections: [],
      tasks: [],
      task_links: [],
      deals: [],
      sessions: [{ id: '9c5b94b1-35ad-49bb-b118-8e8fc24abf80', created_at: '2026-05-14T08:00:00.000Z', last_used_at: '2026-05-14T18:00:00.000Z', user_agent: 'CommunityApp/2.3 (iPhone; iOS 18.1)', ip: '203.0.113.7', current: true }],
      api_tokens: [],
      oauth_grants: [],
      calendar_feed: { exists: false, created_at: null },
      stored_files: [],
      webhook_endpoints: [],
      agent: null,
      agent_calls: [],
      api_test_results: [],
    },
  });

const Message = (text: string) => z.string().describe('What happened, for a person.').meta({ example: text });

// ---------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------

export const accountRoutes = [
  defineRoute({
    method: 'delete',
    path: '/api/mobile/account',
    summary: "Delete the caller's account and everything of it (the password confirms; an account without one gets an e-mailed link).",
    description:
      "Deletes the caller's account for good: its profile, hats, memberships (the communities' member counts fall at once), check-ins, " +
      'connections on both sides, tasks, links and deals, API tokens, OAuth grants, sessions, calendar feed, agent data and stored files. ' +
      'Every access token, refresh token, API token, stream and websocket of it stops working at once; the e-mail address can register again. ' +
      "The password confirms it (200). An account without a password is not deleted here: a link to confirm the deletion is e-mailed to its address (202). " +
      'The only manager of a community cannot delete the account until another member is made a manager (409, naming the communities). ' +
      'What others keep is listed in docs/api/accounts.md ("Your account").',
    limits: [REAUTHENTICATION_LIMIT, 'At most 5 deletion links an hour are e-mailed to an account without a password.', ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    idempotencyKey: false,
    body: z
      .object({
        password: z
          .string()
          .min(1)
          .max(1024)
          .optional()
          .describe("The account's password (an account without one leaves it out: it confirms by e-mail).")
          .meta({ example: 'correct horse battery staple' }),
      })
      .meta({ example: { password: 'correct horse battery staple' } })
      .optional(),
    invalidStatus: 422,
    responses: {
      200: succeeded({ user_id: Id.describe('The deleted account.'), message: Message('account deleted') }),
      202: succeeded({
        link_sent: z.literal(true).describe('A link to confirm the deletion was e-mailed to the account (it has no password).'),
        message: Message('the account has no password: a link to confirm the deletion was e-mailed to its address'),
      }),
      401: errors('invalid_credentials'),
      409: errors('last_manager_of_communities'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const check = await reauthenticate(ctx, ctx.body?.password, 'body.password');
      if (check.kind === 'no_password') {
        await ctx.db((tx) => tx`select api.account_delete_link_send(${ctx.services.publicUrl})`);
        return {
          status: 202,
          body: { success: true, link_sent: true, message: 'the account has no password: a link to confirm the deletion was e-mailed to its address' },
        };
      }
      const [row] = await ctx.db((tx) => tx<{ result: { user_id: string } }[]>`select api.account_delete(${check.proof}) as result`);
      return { status: 200, body: { success: true, user_id: row!.result.user_id, message: 'account deleted' } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/account/export',
    summary: 'Everything the service holds about the caller, as one JSON document (a download).',
    description:
      'Everything the service holds about the caller, as one JSON document sent as an attachment: account, profile, hats, memberships ' +
      'with roles, check-ins, event registrations, connections (the other person as the caller sees them elsewhere), tasks, links and ' +
      'deals, sessions, API tokens and OAuth grants (names, permissions, dates: never a secret or a hash), the calendar feed (whether ' +
      'one exists), stored files (paths and sizes), the webhook endpoints of the communities the caller manages (never their secrets), ' +
      "what an agent recorded about the account, and the newest agent calls and live tests made with the caller's credentials.",
    limits: ['At most 5 exports an hour per account; past them: 429 with Retry-After.', ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    readWrite: true,
    responses: { 200: ExportDocument, 429: errors('rate_limited') },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ doc: string }[]>`select api.account_export()::text as doc`);
      return {
        status: 200,
        json: row!.doc,
        headers: { 'Content-Disposition': 'attachment; filename="account-export.json"', 'Cache-Control': 'no-store' },
      };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/account/email',
    summary: 'Change the e-mail address: a confirmation link goes to the new address, a notice to the current one (202).',
    description:
      'Asks to change the e-mail address the account signs in with. The password confirms the request; then a link (valid 24 hours, ' +
      'single use) goes to the new address and a notice to the current one. The account keeps signing in with the current address ' +
      'until the link is confirmed. The answer is the same whether or not another account has the new address (its link page then ' +
      'says it cannot be used).',
    limits: [REAUTHENTICATION_LIMIT, 'At most 5 e-mail changes an hour per account; past them: 429 with Retry-After.', ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    idempotencyKey: false,
    body: z
      .object({
        email: Email.describe('The new e-mail address.').meta({ example: 'ada@new.example.com' }),
        password: z.string().min(1).max(1024).describe("The account's password.").meta({ example: 'correct horse battery staple' }),
      })
      .meta({ example: { email: 'ada@new.example.com', password: 'correct horse battery staple' } }),
    invalidStatus: 422,
    responses: {
      202: succeeded({ message: Message('a link to confirm the new address is on its way to it; until then, sign in with the current one') }),
      401: errors('invalid_credentials'),
      422: errors('invalid_email'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const check = await reauthenticate(ctx, ctx.body.password, 'body.password');
      if (check.kind === 'no_password') throw new HttpError(401, 'invalid_credentials', 'this account has no password: set one first (POST /api/auth/recover)');
      await ctx.db((tx) => tx`select api.account_email_change(${check.proof}, ${ctx.body.email}, ${ctx.services.publicUrl})`);
      return {
        status: 202,
        body: { success: true, message: 'a link to confirm the new address is on its way to it; until then, sign in with the current one' },
      };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/account/password',
    summary: 'Change the password: every other session and OAuth grant ends; this session and the API tokens stay.',
    description:
      'Changes the password. The current password confirms it, checked as a sign-in is. Every other session of the account ends at once ' +
      '(their access and refresh tokens, streams and websockets), and so does every OAuth grant to an agent and every signed storage URL the account made. The calling session stays ' +
      'signed in; API tokens and the calendar feed are separate credentials and stay (the answer says how many API tokens are active: ' +
      'end them with DELETE /api/docs/tokens/{id}).',
    limits: [REAUTHENTICATION_LIMIT, `The new password is at least ${LIMITS.passwordMinLength} characters.`, ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    idempotencyKey: false,
    body: z
      .object({
        current_password: z.string().min(1).max(1024).describe('The password now.').meta({ example: 'correct horse battery staple' }),
        new_password: Password.describe(`The new password: at least ${LIMITS.passwordMinLength} characters.`).meta({ example: 'a much longer passphrase' }),
      })
      .meta({ example: { current_password: 'correct horse battery staple', new_password: 'a much longer passphrase' } }),
    invalidStatus: 422,
    responses: {
      200: succeeded({
        sessions_ended: z.number().int().min(0).describe('How many other sessions ended.').meta({ example: 2 }),
        api_tokens: z.number().int().min(0).describe('How many active API tokens the account has (they keep working).').meta({ example: 1 }),
        message: Message('password changed'),
      }),
      401: errors('invalid_credentials'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const check = await reauthenticate(ctx, ctx.body.current_password, 'body.current_password');
      if (check.kind === 'no_password') throw new HttpError(401, 'invalid_credentials', 'this account has no password: set one first (POST /api/auth/recover)');
      const hash = await ctx.services.passwords.hash(ctx.clientIp, ctx.body.new_password);
      const [row] = await ctx.db(
        (tx) => tx<{ result: { sessions_ended: number; api_tokens: number } }[]>`select api.account_password_change(${check.proof}, ${hash}) as result`,
      );
      return { status: 200, body: { success: true, ...row!.result, message: 'password changed' } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/account/sessions',
    summary: "The account's sessions that can still be refreshed, most recently used first.",
    description:
      "The account's sessions (sign-ins) that can still be refreshed, most recently used first, with where and with what each was last " +
      "used (its sign-in or latest refresh); `current` marks the request's own.",
    limits: [ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    responses: { 200: z.array(Session).describe('The sessions, most recently used first.') },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ list: string }[]>`select api.account_sessions()::text as list`);
      return { status: 200, json: row!.list };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/account/sessions/:id',
    summary: 'End one session of the account: its tokens, streams and websockets stop at once.',
    description:
      'Ends one session of the account: its refresh token, its access tokens (401 `session_ended` from the next request) and its ' +
      'streams and websockets, at once. Ending the calling session signs this device out.',
    limits: [ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    params: z.object({ id: Uuid.describe("The session's id (from GET /api/mobile/account/sessions).") }),
    invalidParamsStatus: 404,
    responses: {
      200: succeeded({ id: Id.describe('The session ended.'), current: z.boolean().describe('Whether it was the calling session.') }),
      404: errors('session_not_found'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ result: { id: string; current: boolean } }[]>`select api.account_session_end(${params.id}) as result`);
      return { status: 200, body: { success: true, ...row!.result } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/account/sessions',
    summary: 'End every session of the account but the calling one.',
    description: 'Ends every other session of the account (sign-ins on other devices): their tokens, streams and websockets stop at once.',
    limits: [ACCESS_TOKEN_ONLY],
    auth: 'user',
    security: ['bearerAuth'],
    responses: { 200: succeeded({ sessions_ended: z.number().int().min(0).describe('How many sessions ended.').meta({ example: 2 }) }) },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ result: { sessions_ended: number } }[]>`select api.account_sessions_end_others() as result`);
      return { status: 200, body: { success: true, ...row!.result } };
    },
  }),
];
