// The register of error codes: every value the `error` field of an answer can
// take, with the HTTP statuses it comes with and what it means. It is the one
// list; everything else reads it:
//   - HttpError (core/web/errors.ts) and a route's errors('code', ...) (http/
//     responses.ts) accept only these codes (the type ErrorCode);
//   - the OpenAPI document's `error` enums are the codes each route declares
//     plus those of the pipeline (http/openapi.ts routeErrors);
//   - docs/errors.md is generated from it and the route table
//     (`npm run docs:errors`; `--check` fails when the file is stale);
//   - test/unit/error-codes.test.ts checks that every snake_case `hint` the SQL
//     migrations raise with a PTxxx SQLSTATE (which core/web/errors.ts turns into
//     the `error` code) is registered with that status, that every route's
//     declared codes are registered with the status they are declared at,
//     and that every entry is used somewhere (or says in `note` why not).
//
// Besides the REST routes (their codes and routes come from the route table),
// an entry names the other places that answer it in `also`.

/** Places besides the REST routes' declared responses that answer a code. */
export type ErrorSurface =
  /** The gateway itself, before or around any route: unknown path, start-up, malformed request, unexpected failure. */
  | 'gateway'
  /** The realtime websocket (/realtime/v1/websocket), refusing an upgrade. */
  | 'realtime'
  /** The agent interface's HTTP answers at /mcp (the Error body). */
  | 'mcp'
  /** A tool error: the JSON text of a tools/call result with `isError: true`. */
  | 'mcp-tool'
  /** The OAuth endpoints of the agent interface (/authorize, /token, /register, /revoke): OAuth's own `error` field. */
  | 'oauth';

export interface ErrorCodeEntry {
  /** The HTTP statuses it is answered with (302: in a redirect's query string; none: only inside a 200 answer). */
  readonly status: readonly number[];
  /** What it means for the client, and what to do. */
  readonly meaning: string;
  /** Where it is answered besides the routes that declare it. */
  readonly also?: readonly ErrorSurface[];
  /** Why no route declares it, or why it is kept although no answer gives it (the register's exceptions). */
  readonly note?: string;
  /**
   * The `error` of Supabase Storage's body when a /storage/v1 route answers
   * it (`Duplicate`, `not_found`, ...; core/web/errors.ts STORAGE_ERRORS gives
   * one per status otherwise).
   */
  readonly storage?: string;
}

export const ERROR_CODES = {
  // -------------------------------------------------------------------------
  // The pipeline's own codes (core/web/errors.ts DEFAULT_CODES, http/*)
  // -------------------------------------------------------------------------
  bad_request: {
    status: [400],
    meaning:
      'The request is malformed: a field fails validation on a route whose invalid status is 400, a path that is not valid percent-encoding, a body that could not be read, or a value the database cannot read (a malformed uuid or date, a number out of range).',
    also: ['gateway', 'realtime', 'mcp'],
  },
  invalid_json: { status: [400], meaning: 'The request body is not valid JSON.' },
  headers_too_large: {
    status: [431],
    meaning: 'The request line and headers are larger than 16 KB (answered before any route).',
    also: ['gateway'],
  },
  unauthorized: {
    status: [401, 403],
    meaning:
      'No credential, or an access token that is not valid (signature, expiry, audience). Sign in again or refresh the access token. (On /auth/v1, as Supabase Auth answers: no credential is 401 `no_authorization`, one that is not valid 403 `bad_jwt`.)',
    also: ['mcp', 'mcp-tool'],
  },
  invalid_token: {
    status: [401, 403],
    meaning:
      'A credential that was understood but is not valid: an unknown, deactivated or expired API token; a token whose user no longer exists; an agent credential issued for another resource; the token given to /api/auth/verify. (403 `bad_jwt` on /auth/v1.)',
    also: ['mcp'],
  },
  session_ended: {
    status: [401, 403],
    meaning: "The access token's session was ended (logout, or a refresh token used twice). Sign in again. (403 `session_not_found` on /auth/v1, as Supabase Auth answers.)",
  },
  forbidden: {
    status: [403],
    meaning:
      "Signed in but not allowed: an API token whose permissions do not include the path; an API token creating tokens; a database privilege the caller's role lacks.",
    also: ['mcp', 'mcp-tool'],
  },
  not_found: {
    status: [404],
    meaning:
      'No route for this method and path, a path id that cannot name anything (not a uuid), or an object outside the caller\'s reach (agent interface).',
    also: ['gateway', 'realtime', 'mcp', 'mcp-tool'],
  },
  conflict: {
    status: [409],
    meaning: 'The request conflicts with stored data (a unique or reference rule), or a stream opened by a user without a profile.',
    note:
      "No route declares it: the SQL functions check their rules first and answer their own codes. It is the backstop of the database's unique and reference constraints, and the event stream's answer (GET /api/mobile/events/upcoming/stream, the websocket) to a user without a profile.",
  },
  payload_too_large: { status: [413], meaning: 'The request body is larger than 1 MB (a form: 64 KB).', also: ['gateway', 'mcp'] },
  unsupported_media_type: {
    status: [415],
    meaning: 'A request body in a charset other than UTF-8, or with a Content-Encoding the gateway does not decode.',
  },
  validation_error: {
    status: [400, 422],
    meaning:
      'A field fails validation, at the edge (details.issues names each field) or by a rule in the database. The status is the route\'s: 422 on most routes.',
  },
  rate_limited: {
    status: [429],
    meaning:
      'Too many requests: failed sign-ins, refreshes or verifications of this e-mail or address; a client past its fair share of the database; the agent interface per address or per tool and hour; realtime connections per address. Retry-After (and details.retry_after) say when to try again.',
    also: ['realtime', 'mcp', 'mcp-tool'],
  },
  internal_error: {
    status: [500],
    meaning: 'An unexpected failure. Nothing about it is answered; the server log has the details.',
    also: ['gateway', 'mcp', 'mcp-tool'],
  },
  service_unavailable: {
    status: [503],
    meaning:
      'The service is starting or stopping, or the database is unreachable, restarting, busy or switching to another primary (a failover or a planned switchover); nothing of the request was saved. Retry after the Retry-After seconds.',
    also: ['gateway', 'realtime', 'mcp', 'mcp-tool'],
  },
  statement_timeout: {
    status: [504],
    meaning: 'The request ran longer than the statement timeout and was cancelled; nothing was changed.',
    also: ['mcp-tool'],
  },
  outcome_unknown: {
    status: [504],
    meaning:
      'The database stopped answering after the request was sent (its connection died, or no answer came before the deadline): the change may or may not have been saved. Retry with the same Idempotency-Key: a saved request is answered from its record, one that was not runs. Without a key, read to check before retrying.',
    also: ['mcp-tool'],
  },
  error: {
    status: [],
    meaning: 'The fallback code of a status that has no code of its own.',
    note:
      'Every status answered today has its own code (core/web/errors.ts defaultCode); kept so that an unforeseen status still carries a code.',
  },

  // -------------------------------------------------------------------------
  // Accounts and sessions
  // -------------------------------------------------------------------------
  email_taken: {
    status: [400, 409, 422],
    meaning:
      'An account with this e-mail address exists (register: 400, signup: 422, agent create_member: a tool error; the page of an e-mail change link: 409, the address cannot be used).',
    also: ['mcp-tool'],
  },
  invalid_email: { status: [400, 422], meaning: 'The e-mail address is not valid.', also: ['mcp-tool'] },
  weak_password: { status: [400, 422], meaning: 'The password is shorter than 8 characters.' },
  provider_disabled: {
    status: [400, 422],
    meaning:
      'A way of signing in this service does not offer (phone, one-time codes, anonymous, OAuth providers, SSO, PKCE codes): only e-mail and password (docs/supabase-sdks.md#differences-from-supabase-auth).',
  },
  current_password_required: {
    status: [400],
    meaning: 'Changing the password or the e-mail address needs the current password too (`current_password`).',
  },
  invalid_password_hash: {
    status: [400],
    meaning: 'What the process handed SQL as a password hash is not a bcrypt hash (register, signup, set-password).',
    note: 'A backstop in SQL (api.auth_register, api.auth_set_password): the processes always hash first, so no client request gives it; it stops a process that would send a clear password.',
  },
  invalid_door: {
    status: [400],
    meaning: 'A sign-in attempt was started for a door that does not check passwords.',
    note: 'A backstop in SQL (private.password_attempt_start): only the processes call it, with a fixed door (the login, the OAuth consent form).',
  },
  invalid_name: {
    status: [400],
    meaning: 'The display name is longer than 200 characters.',
    also: ['mcp-tool'],
    note: 'A backstop in SQL (private.create_account): the edge refuses such a name first, as validation_error or invalid_arguments.',
  },
  invalid_credentials: { status: [400, 401], meaning: 'Wrong e-mail or password (400 on /auth/v1, as Supabase Auth answers).' },
  invalid_refresh_token: {
    status: [400, 401],
    meaning: 'The refresh token is unknown, expired, used up or revoked. Sign in again.',
  },
  invalid_link: {
    status: [400, 403, 404],
    meaning: 'The e-mailed link (set a password, delete the account, confirm a new e-mail address) is malformed, used up, replaced by a newer one or expired. Ask for a new one.',
  },
  session_not_found: {
    status: [404],
    meaning: "No session with this id can be ended: unknown, already ended, or another account's.",
  },
  last_manager_of_communities: {
    status: [409],
    meaning:
      'The account is the only manager of one or more communities (details.communities names them): make another member a manager of each, then delete the account.',
  },
  user_not_found: {
    status: [404],
    meaning: 'No user with this e-mail who may be checked in to the event (platform check-in: an unknown e-mail and a stranger look the same).',
  },

  // -------------------------------------------------------------------------
  // Profile and hats
  // -------------------------------------------------------------------------
  profile_not_found: { status: [404], meaning: 'The caller has no profile.' },
  hat_limit_reached: { status: [422], meaning: "The caller's subscription plan allows no more hats." },
  unknown_hat_type: { status: [422], meaning: 'hat_type names no known hat type.' },
  invalid_hat: { status: [422], meaning: "hat_id (or my_hat_id) is not one of the caller's hats." },
  invalid_their_hat: { status: [422], meaning: 'their_hat_id is not a hat of the other user.' },

  // -------------------------------------------------------------------------
  // Communities
  // -------------------------------------------------------------------------
  community_not_found: { status: [404], meaning: 'No community with this id.' },
  already_member: { status: [400], meaning: 'The caller is already a member of the community.' },
  not_a_member: { status: [400], meaning: 'The caller is not a member of the community.' },
  last_manager: { status: [400], meaning: 'The last manager of a community cannot leave it.' },
  user_has_no_node: {
    status: [400, 409, 422],
    meaning: 'The user has no node, so cannot join or leave a community (agent add_member_to_community: a tool error).',
    also: ['mcp-tool'],
  },
  invalid_limit: { status: [400], meaning: '`limit` is not between 1 and 100.' },
  invalid_offset: { status: [400], meaning: '`offset` is below 0.' },
  invalid_query: { status: [400], meaning: 'The search needs a non-empty `q`.' },
  not_community_manager: { status: [403], meaning: 'The caller does not manage the community.' },

  // -------------------------------------------------------------------------
  // Events, venues, check-ins and connections
  // -------------------------------------------------------------------------
  event_not_found: {
    status: [404, 422],
    meaning: 'No event with this id, node id or shortlink that the caller may see (422 where the event is a field of the body).',
  },
  venue_not_found: { status: [404], meaning: 'No venue with this id or node id.' },
  not_checked_in: { status: [404], meaning: 'The caller has no open check-in at this event or venue.' },
  checkin_time_in_future: {
    status: [422],
    meaning: "An offline check-in's checked_in_at is more than 5 minutes ahead of the server's clock: send the phone's time of the check-in, not a later one.",
  },
  checkin_time_too_old: {
    status: [422],
    meaning: "An offline check-in's checked_in_at is more than 24 hours old: check-ins kept offline longer are not accepted.",
  },
  checkin_time_outside_event: {
    status: [422],
    meaning: "An offline check-in's checked_in_at is outside the event's check-in window (2 hours before its start to 2 hours after its end).",
  },
  no_concurrent_event: { status: [404], meaning: 'No event is taking place at this venue now (2 hours before its start to 2 hours after its end).' },
  user_node_not_found: { status: [422], meaning: "The caller's node is missing." },
  target_node_not_found: { status: [422], meaning: 'The user to connect with does not exist.' },
  connection_not_found: { status: [404], meaning: "No connection with this id among the caller's." },
  last_event_id_expired: {
    status: [410],
    meaning: 'Last-Event-ID names a change older than the change log keeps: open the stream without it and start from its snapshot.',
  },
  too_many_streams: { status: [429], meaning: 'The user has the most open event streams allowed; close one.' },
  calendar_not_found: {
    status: [404],
    meaning: 'No calendar at this address: the personal feed URL was rotated or revoked, the community does not exist or is a draft.',
  },

  // -------------------------------------------------------------------------
  // Webhooks (routes/webhooks.ts, gateway/jobs/webhooks.ts)
  // -------------------------------------------------------------------------
  webhook_not_found: { status: [404], meaning: 'No webhook endpoint with this id in a community the caller may manage.' },
  delivery_not_found: { status: [404], meaning: 'No delivery with this id for this webhook endpoint.' },
  webhook_inactive: { status: [409], meaning: 'The webhook endpoint is not active (paused, or turned off after 20 failed deliveries): activate it with PATCH first.' },
  webhook_url_changed: {
    status: [409],
    meaning: "The delivery was queued for an earlier URL of the webhook endpoint: it is sent to the URL it was queued for only, never to the one the endpoint has now.",
  },
  invalid_url: {
    status: [422],
    meaning: 'The webhook URL is not an https URL of at most 2,000 characters, or names a private, loopback, link-local, multicast or metadata address.',
  },
  unknown_event_type: { status: [422], meaning: 'An event type the webhooks do not send (see the list in the request schema).' },
  too_many_webhooks: { status: [422], meaning: 'The community has the most webhook endpoints allowed (20).' },

  // -------------------------------------------------------------------------
  // Storage (/storage/v1: gateway/storage/; sql/areas/storage.sql). These
  // routes answer Supabase Storage's body: {statusCode, error, code, message},
  // `error` being Supabase's name and `code` this code.
  // -------------------------------------------------------------------------
  bucket_not_found: { status: [404], meaning: 'No bucket with this id.', storage: 'Bucket not found' },
  bucket_exists: { status: [409], meaning: 'A bucket with this id exists already (the service-role key creates buckets).', storage: 'Duplicate' },
  bucket_builtin: {
    status: [409],
    meaning: 'The bucket is one of the four the service is built on (avatars, community-images, event-images, attachments): it cannot be deleted (it can be emptied).',
    storage: 'InvalidRequest',
  },
  bucket_not_empty: { status: [409], meaning: 'The bucket still holds objects (or uploads under way): empty it first.', storage: 'InvalidRequest' },
  invalid_bucket_name: { status: [400], meaning: 'A bucket id is 1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit.', storage: 'Invalid Input' },
  invalid_bucket_limits: {
    status: [400],
    meaning: "A bucket's file_size_limit is 1 byte to 5 GB (a number of bytes, or a string such as `20MB`), and its allowed_mime_types 1 to 50 lower-case types or type/* patterns (an image bucket's: image types only).",
    storage: 'Invalid Input',
  },
  object_not_found: {
    status: [404],
    meaning: 'No object at this path, or none the caller may read (the two look the same).',
    storage: 'not_found',
  },
  upload_not_found: {
    status: [404],
    meaning: 'No resumable upload under way with this id for the caller (another user\'s, finished, cancelled or expired after 24 hours).',
    storage: 'not_found',
  },
  invalid_key: {
    status: [400],
    meaning: "The object path is not 3 to 1,024 characters of letters, digits and _/!.*'() &$@=;:+,?- with no empty, `.` or `..` segment.",
    storage: 'InvalidKey',
  },
  storage_access_denied: {
    status: [403],
    meaning:
      "The caller may not write this path: a bucket's objects go in folders named by an id (`{user id}/...` in avatars and attachments, `{community id}/...` in community-images for its managers, `{event id}/...` in event-images for the managers of its community).",
    storage: 'Unauthorized',
  },
  object_exists: {
    status: [409],
    meaning: 'An object exists at this path: upload with `x-upsert: true` (or PUT) to replace it, or move to a free path.',
    storage: 'Duplicate',
  },
  object_too_large: { status: [413], meaning: "The object is larger than the bucket's size limit.", storage: 'Payload too large' },
  quota_exceeded: {
    status: [413],
    meaning: "The upload would take the user past their storage quota (their plan's, 100 MB on basic), counting what their uploads under way reserved (their declared sizes); delete objects, or finish or cancel uploads, first.",
    storage: 'Payload too large',
  },
  storage_full: {
    status: [507],
    meaning:
      "The service's storage volume is full: the file was not stored (nothing of it is kept). Downloads and deletions still work; try the upload again later (the operator is paged: docs/operations/backup.md#disk-full).",
    storage: 'InsufficientStorage',
  },
  too_many_uploads: {
    status: [429],
    meaning: "More uploads in a minute than the user's plan allows (30 on basic); Retry-After says when to try again.",
    storage: 'too_many_requests',
  },
  too_many_renders: {
    status: [429],
    meaning: 'This client address had more image transformations made (not served from the cache) in a minute than the service allows (STORAGE_RENDER_MISSES_PER_MINUTE, 120 by default); Retry-After says when to try again. Repeats of cached transformations are not counted.',
    storage: 'too_many_requests',
  },
  too_many_open_uploads: {
    status: [429],
    meaning: 'The user has 10 resumable uploads under way already (not finished, cancelled or expired): finish or cancel one (TUS DELETE). Retry-After says when the oldest expires.',
    storage: 'too_many_requests',
  },
  invalid_mime_type: {
    status: [415],
    meaning: 'The bucket does not take this type (an image bucket takes JPEG, PNG, WebP, AVIF and GIF images only).',
    storage: 'invalid_mime_type',
  },
  mime_type_mismatch: {
    status: [415],
    meaning: 'The declared content type is not what the bytes are (the content is sniffed): declare the right type, or none.',
    storage: 'invalid_mime_type',
  },
  svg_not_allowed: {
    status: [415],
    meaning: 'SVG (which can carry script) is not taken in an image bucket; upload a PNG or WebP instead.',
    storage: 'invalid_mime_type',
  },
  html_not_allowed: { status: [415], meaning: 'HTML is not taken in an image bucket.', storage: 'invalid_mime_type' },
  not_an_image: {
    status: [415],
    meaning: 'The bytes are not a JPEG, PNG, WebP, AVIF or GIF image, which is what an image bucket (and a transformation) takes.',
    storage: 'invalid_mime_type',
  },
  image_too_many_pixels: {
    status: [422],
    meaning: 'The image has more pixels than the service decodes (STORAGE_MAX_IMAGE_PIXELS, 50 million by default): a decompression bomb, or a photo to scale down first.',
    storage: 'invalid_image',
  },
  invalid_image: { status: [422], meaning: 'The image cannot be decoded (truncated or corrupt).', storage: 'invalid_image' },
  invalid_signature: {
    status: [400],
    meaning: 'The signed URL\'s token was not made by this service for this path and use (tampered, or for another object).',
    storage: 'InvalidSignature',
  },
  signature_expired: {
    status: [400],
    meaning: "The signed URL has expired, or its signer's credentials ended since (a password reset): ask for a new one.",
    storage: 'InvalidJWT',
  },
  signed_url_used: {
    status: [409],
    meaning: 'The signed upload URL was used already: it uploads one object, once (an upload through it that was refused or cut off gives it back). Ask its signer for a new one.',
    storage: 'Duplicate',
  },
  invalid_range: { status: [416], meaning: 'The Range asks for bytes past the end of the object.', storage: 'InvalidRange' },
  resumable_upload_refused: {
    status: [400, 409, 412, 415],
    meaning:
      'A resumable upload request breaks the TUS protocol (tus-js-client speaks it): no Tus-Resumable header (412), an Upload-Offset that is not the upload\'s (409: ask HEAD), a chunk without Content-Type application/offset+octet-stream (415), or malformed Upload-Metadata (400).',
    storage: 'TusError',
  },
  invalid_image_path: {
    status: [422],
    meaning: "The path names no object of the bucket that the caller may use here (an avatar in the caller's own avatars folder; a community's or an event's image in its folder).",
  },

  // -------------------------------------------------------------------------
  // Versions of single objects (http/versions.ts, app.check_if_match)
  // -------------------------------------------------------------------------
  precondition_failed: {
    status: [412],
    meaning:
      "The If-Match of a PATCH or DELETE names a version of the object that is no longer current: someone changed it since. Nothing was written; details.current is the object as it is now and details.etag its version: merge, then send the write again with that ETag.",
  },

  // -------------------------------------------------------------------------
  // Idempotency keys (http/idempotency.ts)
  // -------------------------------------------------------------------------
  idempotency_key_in_progress: {
    status: [409],
    meaning:
      'Another request with this Idempotency-Key is still running (on any replica): send it again after the Retry-After seconds (details.retry_after) to get its answer.',
  },
  idempotency_key_reused: {
    status: [422],
    meaning: 'This Idempotency-Key was used in the last 48 hours, by the same credential, for another request (method, path or body): use a new key.',
  },

  // -------------------------------------------------------------------------
  // Tasks and deals
  // -------------------------------------------------------------------------
  task_not_found: { status: [404], meaning: "No task with this id among the caller's." },
  destination_task_not_found: { status: [404], meaning: "destination_task_id names none of the caller's tasks." },
  not_task_creator: { status: [403], meaning: 'Only the creator of a task may delete it.' },
  invalid_status_transition: {
    status: [422],
    meaning: 'The task is not in a state that allows this: start needs pending; complete and complete_and_link need a task that is not completed.',
  },
  circular_dependency: { status: [422], meaning: 'The link would join a task to itself or close a cycle.' },
  deal_not_found: { status: [404], meaning: "No deal with this id among the caller's." },
  no_current_task: { status: [422], meaning: 'The deal has no current task.' },

  // -------------------------------------------------------------------------
  // API tokens, docs and the live test executor
  // -------------------------------------------------------------------------
  community_scope_violation: {
    status: [403],
    meaning:
      "A community-scoped API token reaches only its community's platform endpoints (/api/v1/platform/...): any other path, the agent interface included, or another community's platform endpoints. Use a personal token.",
    also: ['mcp', 'mcp-tool'],
  },
  token_not_found: { status: [404], meaning: "No API token with this id among the caller's." },
  invalid_permissions: {
    status: [422],
    meaning: 'permissions must list 1 to 50 patterns, each `*`, a path starting with / or a prefix ending in *.',
  },
  api_token_required: { status: [401], meaning: 'POST /api/docs/test must be called with an API token.' },
  unknown_endpoint: { status: [400], meaning: 'endpoint_id names no endpoint.' },
  endpoint_deprecated: { status: [400], meaning: 'The endpoint is no longer served.' },
  method_mismatch: { status: [400], meaning: "The method is not the endpoint's." },
  path_mismatch: { status: [400], meaning: "The path is not one of the endpoint's (a value in place of each {parameter})." },
  recursive_test: { status: [400], meaning: 'The live test executor cannot test itself.' },
  invalid_endpoints: {
    status: [400],
    meaning: 'The list of discovered endpoints is not a JSON array.',
    note: 'Raised by api.api_endpoints_sync, which the gateway calls with its own route list at start; never answered to a client.',
  },

  // -------------------------------------------------------------------------
  // Platform integration
  // -------------------------------------------------------------------------
  external_event_in_other_community: {
    status: [422],
    meaning: 'This external_platform and external_id already name an event of another community.',
  },
  invalid_timezone: {
    status: [422],
    meaning: 'timezone is not an IANA time zone name the database knows (pg_timezone_names), such as Europe/Paris or America/New_York.',
  },

  // -------------------------------------------------------------------------
  // Agent interface (MCP)
  // -------------------------------------------------------------------------
  invalid_arguments: {
    status: [400],
    meaning:
      'The tool arguments are not an object, do not match the tool\'s schema, cannot be stored (NUL, lone surrogate, nesting deeper than 64), or fail a rule of the tool\'s SQL function.',
    also: ['mcp-tool'],
  },
  insufficient_scope: {
    status: [403],
    meaning:
      'The agent credential lacks the scope the tool needs (mcp:read for reads, mcp:write for writes). A client speaking MCP 2025-11-25 gets it at /mcp as a 403 whose WWW-Authenticate challenge names the scopes to ask for (step-up); older revisions get it as a tool error.',
    also: ['mcp', 'mcp-tool'],
  },
  unknown_tool: { status: [], meaning: 'params.name names no tool.', also: ['mcp-tool'] },

  // -------------------------------------------------------------------------
  // OAuth for agents (RFC 6749, 7591, 8707): the `error` of the OAuth
  // endpoints' JSON answers and error redirects, most given by the MCP SDK's
  // router.
  // -------------------------------------------------------------------------
  invalid_request: { status: [400], meaning: 'A parameter is missing, repeated or malformed.', also: ['oauth'] },
  invalid_client: {
    status: [400, 401],
    meaning: 'Unknown client_id, or a missing, wrong or expired client secret.',
    also: ['oauth'],
  },
  invalid_client_metadata: {
    status: [400],
    meaning: 'Client registration metadata that is not valid (e.g. a redirect_uri without a usable host).',
    also: ['oauth'],
  },
  invalid_grant: {
    status: [400],
    meaning: 'The authorization code or refresh token is not valid, expired, used twice, or was issued to another client; or code_verifier does not match.',
    also: ['oauth'],
  },
  invalid_scope: {
    status: [302, 400],
    meaning: 'An unknown scope, or more than the original grant on refresh.',
    also: ['oauth'],
  },
  invalid_target: { status: [302], meaning: '`resource` names another resource than this agent interface.', also: ['oauth'] },
  unsupported_grant_type: {
    status: [400],
    meaning: 'grant_type is neither authorization_code nor refresh_token.',
    also: ['oauth'],
  },
  access_denied: { status: [302], meaning: 'The user denied the request on the consent page.', also: ['oauth'] },
  method_not_allowed: { status: [405], meaning: 'The OAuth endpoint does not take this method.', also: ['oauth'] },
  server_error: { status: [302, 500], meaning: 'An unexpected failure in the OAuth endpoints.', also: ['oauth'] },
  request_expired: {
    status: [404],
    meaning: 'The sign-in and consent request has expired.',
    note: 'Raised by private.oauth_request_approve; the consent form answers it as its "request expired" HTML page (400), never as a code.',
  },
} satisfies Record<string, ErrorCodeEntry>;

/** A registered error code. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The register as a map of entries (for iteration). */
export const errorCodeEntries = (): [ErrorCode, ErrorCodeEntry][] => Object.entries(ERROR_CODES) as [ErrorCode, ErrorCodeEntry][];

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CODES, value);
}
