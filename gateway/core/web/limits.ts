// Limits the database enforces that the edge checks too (the zod schemas of
// the routes and of the MCP tools), so that a client gets a validation error
// naming the field before any SQL runs. The numbers live here once; the
// schemas read them, and test/sql/limits.test.ts reads the database's check
// constraints and function bodies and fails when one of them says otherwise.
// (Limits only the edge has, such as a task title's 500 characters, stay
// with their schema.)
export const LIMITS = {
  /** identity.users (users_email_shape), api.platform_attendee_register. */
  emailMaxLength: 320,
  /** private.create_account, api.auth_set_password (weak_password). */
  passwordMinLength: 8,
  /** app.profiles (profiles_name_check); private.create_account, api.profile_update, api.mcp_member_create. */
  profileNameMaxLength: 200,
  /** app.hats (hats_name_check). */
  hatNameMaxLength: 100,
  /** app.hats (hats_description_check). */
  hatDescriptionMaxLength: 2000,
  /** app.connections (connections_notes_check). */
  connectionNotesMaxLength: 5000,
  /** app.connections (connections_tags_check). */
  connectionTagsMaxCount: 50,
  /** `limit` of a page: app.check_page (communities), api.tasks_list, api.mcp_tool_calls_mine. */
  pageLimitMax: 100,
  /** private.task_chain_max_depth(), read by api.task_chain. */
  taskChainMaxDepth: 1000,
  /** transition_meta as JSON, at most; the stored link's meta may be twice that (app.task_transitions task_transitions_meta_size). */
  transitionMetaMaxBytes: 16_384,
  /** A deal's company, from a task's deal_context (app.deals deals_company_check). */
  companyMaxLength: 200,
  /** app.api_tokens (api_tokens_name_check), api.api_token_create. */
  apiTokenNameMaxLength: 200,
  /** app.api_tokens (api_tokens_permissions_check), api.api_token_create. */
  apiTokenPermissionsMaxCount: 50,
  /** private.api_token_pattern_valid. */
  apiTokenPatternMaxLength: 500,
  /** app.events (events_external_platform_check), api.platform_event_create. */
  externalIdMaxLength: 200,
  /** app.events (events_title_check), api.platform_event_create. */
  eventTitleMaxLength: 300,
  /** app.venues (venues_name_check), private.platform_venue. */
  venueNameMaxLength: 200,
  /** app.api_test_results (api_test_results_request_path_check). */
  liveTestPathMaxLength: 2048,
} as const;
