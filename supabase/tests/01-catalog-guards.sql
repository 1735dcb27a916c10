-- Catalog guards: what must hold for every table and function of the
-- application schemas, checked from the catalog so that a new table, function
-- or grant that breaks a rule shows up here (pgTAP prints the offending rows,
-- or the extra and missing ones against the literal lists below).
--
-- Application schemas: api, app, identity, private, admin (the first test
-- fails when the migrations create another one: add it to the lists).
-- Not checked: auth and extensions (the Supabase compatibility layer; on a
-- Supabase project they belong to Supabase), graphile_migrate and
-- graphile_worker (the migration tool's and the job queue's own schemas; no
-- request role may use the job queue's: see below), and the test
-- schemas (tests, tap, and the scratch schema of test/sql/plpgsql-check.test.ts).
begin;
select plan(19);

-- 1. The schemas ------------------------------------------------------------

select set_eq(
  $$select n.nspname::text
      from pg_catalog.pg_namespace n
     where n.nspowner = (select nspowner from pg_catalog.pg_namespace where nspname = 'app')
       and n.nspname not in ('public', 'information_schema', 'auth', 'extensions', 'graphile_migrate', 'graphile_worker', 'supabase_migrations', 'tests', 'tap')
       and n.nspname !~ '^pg_'
       and n.nspname !~ '^plpgsql_check_' -- a scratch schema of test/sql/plpgsql-check.test.ts, there for milliseconds
       and not exists (select from pg_catalog.pg_extension e where e.extnamespace = n.oid)$$,
  array['admin', 'api', 'app', 'identity', 'private'],
  'the application schemas are api, app, identity, private and admin');

select is_empty(
  $$select n.nspname || ': ' || r.rolname
      from pg_catalog.pg_namespace n, (values ('anon'), ('authenticated'), ('service_role'), ('public')) r(rolname)
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and case when r.rolname = 'public'
                then exists (select from aclexplode(n.nspacl) a where a.grantee = 0 and a.privilege_type = 'CREATE')
                else pg_catalog.has_schema_privilege(r.rolname, n.oid, 'CREATE') end$$,
  'no request role (nor PUBLIC) may create objects in an application schema');

select is_empty(
  $$select n.nspname || ': ' || r.rolname
      from pg_catalog.pg_namespace n, (values ('anon'), ('authenticated'), ('service_role')) r(rolname)
     where n.nspname = 'admin' and pg_catalog.has_schema_privilege(r.rolname, n.oid, 'USAGE')$$,
  'the admin schema (operator functions) is not usable by any request role');

-- The job queue: jobs are added only through private.enqueue_job, by SQL
-- running as the owner; a request role reaching graphile_worker could add,
-- read or remove any job (webhook payloads, e-mails).
select is_empty(
  $$select n.nspname || ': ' || r.rolname
      from pg_catalog.pg_namespace n, (values ('anon'), ('authenticated'), ('service_role')) r(rolname)
     where n.nspname = 'graphile_worker'
       and (pg_catalog.has_schema_privilege(r.rolname, n.oid, 'USAGE') or pg_catalog.has_schema_privilege(r.rolname, n.oid, 'CREATE'))$$,
  'the job queue''s schema (graphile_worker) is not usable by any request role');

-- 2. Tables: row-level security ---------------------------------------------
--
-- Rule: every table of an application schema has row-level security enabled,
-- except tables of `private` that no request role holds any privilege on
-- (table or column): those are reached only through security definer
-- functions, so a policy would never be consulted. The exceptions are listed
-- by name, so a new one is a decision made here:
--   private.agent_tool_limits   per-tool hourly allowance of the agent interface (operator data)
--   private.agent_tool_usage    the calls counted against that allowance
--   private.auth_failures       failed sign-ins per e-mail / IP for throttling
--   private.mcp_request_counts  per-IP admission counts of the MCP endpoint
--   private.mcp_sessions        MCP transport sessions (written by the MCP server as owner)
--   private.service_settings    settings the service records for SQL outside requests (PUBLIC_URL)

select is_empty(
  $$select c.oid::regclass::text
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and c.relkind in ('r', 'p')
       and not c.relrowsecurity
       and c.oid::regclass::text <> all (array[
         'private.agent_tool_limits', 'private.agent_tool_usage', 'private.auth_failures',
         'private.mcp_request_counts', 'private.mcp_sessions', 'private.service_settings'])$$,
  'every table of the application schemas has row-level security enabled (but the listed private ones)');

select is_empty(
  $$select c.oid::regclass::text || ': ' || r.rolname
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace,
           (values ('anon'), ('authenticated')) r(rolname)
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and c.relkind in ('r', 'p')
       and not c.relrowsecurity
       and (pg_catalog.has_table_privilege(r.rolname, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
            or pg_catalog.has_any_column_privilege(r.rolname, c.oid, 'SELECT, INSERT, UPDATE, REFERENCES'))$$,
  'no request role holds any privilege on a table without row-level security');

select is_empty(
  $$select c.oid::regclass::text
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and c.relkind in ('v', 'm')
       and (pg_catalog.has_table_privilege('anon', c.oid, 'SELECT') or pg_catalog.has_table_privilege('authenticated', c.oid, 'SELECT'))
       and (c.relkind = 'm' or not coalesce('security_invoker=true' = any (c.reloptions), false))$$,
  'no view readable by a request role bypasses row-level security (views are security_invoker, no materialized views)');

-- A privilege a request role holds on a table with row-level security is
-- useless without a policy for that role and command: a forgotten policy.
select is_empty(
  $$select c.oid::regclass::text || ': ' || r.rolname || ' ' || p.priv
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace,
           (values ('anon'), ('authenticated')) r(rolname),
           (values ('SELECT', 'r'), ('INSERT', 'a'), ('UPDATE', 'w'), ('DELETE', 'd')) p(priv, cmd)
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and c.relkind in ('r', 'p') and c.relrowsecurity
       and (pg_catalog.has_table_privilege(r.rolname, c.oid, p.priv)
            or (p.priv <> 'DELETE' and pg_catalog.has_any_column_privilege(r.rolname, c.oid, p.priv)))
       and not exists (
         select from pg_catalog.pg_policy pol
          where pol.polrelid = c.oid and pol.polcmd in ('*', p.cmd)
            and (0::oid = any (pol.polroles) or (select oid from pg_catalog.pg_roles where rolname = r.rolname) = any (pol.polroles)))$$,
  'every table privilege of a request role has a policy for that role and command');

-- What the request roles may do to tables directly (row-level security then
-- picks the rows). Column lists where the grant is by column.
select set_eq(
  $$select r.rolname || ' ' || c.oid::regclass::text || ' ' || p.priv ||
           case when pg_catalog.has_table_privilege(r.rolname, c.oid, p.priv) then ''
                else ' (' || (select string_agg(a.attname, ', ' order by a.attnum)
                                from pg_catalog.pg_attribute a
                               where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
                                 and pg_catalog.has_column_privilege(r.rolname, c.oid, a.attnum, p.priv)) || ')' end
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace,
           (values ('anon'), ('authenticated'), ('service_role')) r(rolname),
           unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and c.relkind in ('r', 'p', 'v', 'm', 'f')
       and (pg_catalog.has_table_privilege(r.rolname, c.oid, p.priv)
            or (p.priv in ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES') and pg_catalog.has_any_column_privilege(r.rolname, c.oid, p.priv)))$$,
  array[
    'anon app.api_endpoints SELECT',
    'anon app.communities SELECT (id, node_id, name, description, tags, member_count, is_sandbox, is_draft, accepts_handoffs, created_at, updated_at, search_text, timezone, image_object_id)',
    'authenticated app.agent_members SELECT',
    'authenticated app.api_endpoints SELECT',
    'authenticated app.api_test_results INSERT (api_endpoint_id, api_token_id, user_id, request_method, request_path, request_headers, request_params, request_payload, response_status, response_time_ms, response_headers, response_body, error_message, success)',
    'authenticated app.api_test_results SELECT',
    'authenticated app.api_tokens SELECT (id, user_id, community_id, name, permissions, created_at, expires_at, active, last_used_at, usage_count)',
    'authenticated app.api_tokens UPDATE (active)',
    'authenticated app.checkins INSERT (user_id, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at)',
    'authenticated app.checkins SELECT',
    'authenticated app.checkins UPDATE (checked_out_at)',
    'authenticated app.communities SELECT (id, node_id, name, description, tags, member_count, is_sandbox, is_draft, accepts_handoffs, created_at, updated_at, search_text, timezone, image_object_id)',
    'authenticated app.community_members DELETE',
    'authenticated app.community_members INSERT (community_id, member_node_id)',
    'authenticated app.community_members SELECT',
    'authenticated app.connections INSERT (owner_node_id, target_node_id, connection_type, event_id, my_hat_id, their_hat_id, notes, strength, tags)',
    'authenticated app.connections SELECT',
    'authenticated app.connections UPDATE (notes, strength, tags)',
    'authenticated app.deals INSERT (created_by, company, deal_value, current_task_id, next_action)',
    'authenticated app.deals SELECT',
    'authenticated app.deals UPDATE (deal_value, current_task_id, next_action)',
    'authenticated app.event_attendees SELECT',
    'authenticated app.event_streams INSERT (user_id, gateway, kind, expires_at)',
    'authenticated app.event_streams SELECT',
    'authenticated app.events SELECT',
    'authenticated app.hat_types SELECT',
    'authenticated app.hats INSERT (user_id, name, hat_type, description)',
    'authenticated app.hats SELECT',
    'authenticated app.mcp_tool_calls SELECT',
    -- not data: the signup data agents collect is theirs alone (agents.test.sql)
    'authenticated app.nodes SELECT (id, kind, created_at)',
    'authenticated app.profiles SELECT',
    -- objects of folders the caller owns (row-level security); no insert: an object appears only through an upload (storage.test.sql)
    'authenticated app.storage_objects DELETE',
    'authenticated app.storage_objects SELECT',
    'authenticated app.storage_objects UPDATE (bucket_id, name)',
    'authenticated app.subscription_plans SELECT',
    'authenticated app.task_transitions INSERT (origin_id, destination_id, created_by, meta)',
    'authenticated app.task_transitions SELECT',
    'authenticated app.tasks DELETE',
    'authenticated app.tasks INSERT (created_by, meta)',
    'authenticated app.tasks SELECT',
    'authenticated app.tasks UPDATE (meta)',
    'authenticated app.venues SELECT',
    'authenticated identity.users SELECT (id, email, created_at, updated_at)',
    'service_role app.storage_objects SELECT',
    'service_role app.storage_objects DELETE',
    'service_role app.storage_objects UPDATE (bucket_id, name)'
  ],
  'the table privileges of anon, authenticated and service_role are exactly the listed ones');

-- 3. Functions --------------------------------------------------------------

select is_empty(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and p.prosecdef
       and not exists (select from unnest(p.proconfig) c where c like 'search_path=%')$$,
  'every security definer function sets search_path');

-- ... to schemas a request role cannot create objects in, so that nothing it
-- creates can stand in for what the function means ($user and public are
-- refused outright: on PostgreSQL 14 and older PUBLIC may create in public).
select is_empty(
  $$select p.oid::regprocedure::text || ': ' || s.schema
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace,
           unnest(p.proconfig) c,
           unnest(string_to_array(substr(c, length('search_path=') + 1), ',')) s0(entry),
           lateral (select btrim(btrim(s0.entry), '"') as schema) s
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and p.prosecdef and c like 'search_path=%'
       and (s.schema in ('$user', 'public')
            or exists (select from pg_catalog.pg_namespace sn
                        where sn.nspname = s.schema
                          and (pg_catalog.has_schema_privilege('anon', sn.oid, 'CREATE')
                               or pg_catalog.has_schema_privilege('authenticated', sn.oid, 'CREATE'))))$$,
  'the search_path of every security definer function names only schemas no request role can create in');

select is_empty(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and (p.proacl is null or exists (select from aclexplode(p.proacl) a where a.grantee = 0 and a.privilege_type = 'EXECUTE'))$$,
  'no function of the application schemas is executable by PUBLIC (grants go to roles, one by one)');

select set_eq(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and pg_catalog.has_function_privilege('anon', p.oid, 'EXECUTE')$$,
  array[
    'api.account_delete_confirm(text)',
    'api.account_delete_link(text)',
    'api.account_delete_request(text,text,text,integer,integer)',
    'api.account_email_change_confirm(text)',
    'api.account_email_change_link(text)',
    'api.api_endpoints_list()',
    'api.api_token_authenticate(text,text)',
    'api.auth_logout(text)',
    'api.auth_password_link_valid(text)',
    'api.auth_recover(text,text,text,integer,integer)',
    'api.auth_refresh(text,text,text)',
    'api.auth_recovery_verify(text,text,text)',
    'api.auth_refresh_throttled(text,text,integer,integer,text)',
    'api.auth_register(text,text,text)',
    'api.auth_set_password(text,text)',
    'api.auth_verify_failed(text)',
    'api.auth_verify_wait(text,integer,integer)',
    'api.calendar_community(uuid,text,text,text[],timestamp with time zone)',
    'api.calendar_event(text,text,text,text[],timestamp with time zone)',
    'api.calendar_personal(text,text,text,text[],timestamp with time zone)',
    'api.community_page(uuid,text)',
    'api.community_public(uuid)',
    'api.event_page(text,text)',
    'api.event_public(text,text)',
    'api.event_public_by_node(uuid,text)',
    'api.form_submit(text)',
    'api.link_event_checkin(uuid,text,text)',
    'api.link_event_shortlink(text,text,text)',
    'api.link_venue_checkin(uuid)',
    'api.storage_object_get(text,text,boolean)',
    'api.storage_object_signed(text,text,text)',
    'api.storage_upload_begin_signed(text,text,text,bigint)',
    'app.community_json(app.communities)',
    'app.contains_pattern(text)',
    'app.iso(timestamp with time zone)',
    'app.my_node_id()',
    'app.pagination(bigint,integer,integer)',
    'app.storage_public_url(uuid)',
    'private.check_session(uuid)',
    'private.app_metadata()',
    'api.auth_magic_link_verify(text,text,text)',
    'api.auth_otp_request(text,text,text,integer,integer)',
    'api.auth_otp_verify(text,text,text,text,integer,integer,integer,integer)',
    'api.auth_guest_sign_in(text,integer,integer,text,jsonb)'
  ],
  'the functions anon may execute are exactly the listed ones');

select is_empty(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and pg_catalog.has_function_privilege('anon', p.oid, 'EXECUTE')
       and not pg_catalog.has_function_privilege('authenticated', p.oid, 'EXECUTE')$$,
  'a signed-in user may execute whatever anon may');

select set_eq(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and pg_catalog.has_function_privilege('authenticated', p.oid, 'EXECUTE')
       and not pg_catalog.has_function_privilege('anon', p.oid, 'EXECUTE')$$,
  array[
    'api.account_delete(text)',
    'api.account_delete_link_send(text)',
    'api.account_email_change(text,text,text)',
    'api.account_export()',
    'api.account_password_change(text,text)',
    'api.account_session_end(uuid)',
    'api.account_sessions()',
    'api.account_sessions_end_others()',
    'api.account_sign_out(text)',
    'api.api_test_prepare(uuid,text,text)',
    'api.api_test_record(uuid,text,text,jsonb,jsonb,jsonb,integer,integer,jsonb,jsonb,text)',
    'api.api_token_create(text,text[],timestamp with time zone,uuid)',
    'api.api_token_deactivate(uuid)',
    'api.api_tokens_list()',
    'api.auth_recovery_password_set(text)',
    'api.auth_user()',
    'api.auth_user_metadata_update(jsonb)',
    'api.auth_user_update(text,text,text,text,text,jsonb)',
    'api.auth_verify()',
    'api.calendar_feed_create(text)',
    'api.calendar_feed_revoke()',
    'api.checkins_current()',
    'api.communities_mine(integer,integer)',
    'api.communities_search(text,integer,integer)',
    'api.community_get(uuid)',
    'api.community_join(uuid)',
    'api.community_leave(uuid)',
    'api.community_members(uuid,integer,integer)',
    'api.community_update(uuid,jsonb)',
    'api.connection_create(uuid,text,uuid,uuid,uuid,text,text,text[])',
    'api.connection_get(uuid)',
    'api.connection_update(uuid,jsonb,text[])',
    'api.connections_list()',
    'api.connections_recent()',
    'api.deal_complete_task(uuid,text)',
    'api.deal_get(uuid)',
    'api.deal_start_task(uuid)',
    'api.deals_list()',
    'api.event_checkin(uuid,uuid,uuid,text,timestamp with time zone)',
    'api.event_checkout(uuid)',
    'api.event_connections(uuid)',
    'api.etag(timestamp with time zone)',
    'api.event_etag(uuid)',
    'api.event_get(uuid,text)',
    'api.event_stream_changes(bigint,bigint,text)',
    'api.event_stream_open(text,bigint,text,integer)',
    'api.event_update(uuid,jsonb,text,text[])',
    'api.events_upcoming(text)',
    'api.events_upcoming_page(text)',
    'api.hat_create(text,text,text)',
    'api.hat_types_list()',
    'api.hats_list()',
    'api.idempotency_claim(text,text)',
    'api.idempotency_store(text,integer,jsonb)',
    'api.mcp_community_events(uuid,text)',
    'api.mcp_community_profile(uuid)',
    'api.mcp_community_set_onboarding(uuid,boolean)',
    'api.mcp_event_get(uuid,text)',
    'api.mcp_member_add_to_community(uuid,uuid)',
    'api.mcp_member_create(text,text,jsonb,text)',
    'api.mcp_member_get(uuid)',
    'api.mcp_member_set_attributes(uuid,jsonb)',
    'api.mcp_onboarding_communities()',
    'api.mcp_tool_calls_mine(integer,bigint)',
    'api.platform_attendee_register(uuid,text,text)',
    'api.platform_checkin(uuid,text)',
    'api.platform_event_create(uuid,text,text,text,text,timestamp with time zone,timestamp with time zone,text,text,text,text,double precision,double precision,text)',
    'api.platform_event_delete(uuid,text,text)',
    'api.platform_event_update(uuid,text,text,jsonb)',
    'api.profile_get()',
    'api.profile_patch(jsonb,text[])',
    'api.profile_update(text)',
    'api.realtime_columns()',
    'api.realtime_connect(text,integer)',
    'api.realtime_event_changes(bigint,bigint)',
    'api.storage_bucket_get(text)',
    'api.storage_buckets_list()',
    'api.storage_object_copy_begin(text,text,text,text,boolean)',
    'api.storage_object_move(text,text,text,text)',
    'api.storage_objects_list(text,text,integer,integer,text,text,text)',
    'api.storage_objects_remove(text,text[])',
    'api.storage_resumable_upload(uuid)',
    'api.storage_sign(text,text[],integer,jsonb)',
    'api.storage_sign_upload(text,text,boolean)',
    'api.storage_upload_begin(text,text,boolean,bigint,text)',
    'api.task_chain(uuid,text,integer)',
    'api.task_complete(uuid)',
    'api.task_complete_and_link(uuid,text,text,text)',
    'api.task_create(text,text,text,jsonb)',
    'api.task_delete(uuid,text[])',
    'api.task_get(uuid)',
    'api.task_link(uuid,uuid,jsonb)',
    'api.task_next(uuid)',
    'api.task_previous(uuid)',
    'api.task_start(uuid)',
    'api.task_update(uuid,jsonb,text[])',
    'api.tasks_by_company()',
    'api.tasks_list(text,integer,integer)',
    'api.tasks_search(text)',
    'api.venue_checkin(uuid,uuid,text)',
    'api.venue_checkout(uuid)',
    'api.webhook_create(uuid,text,text[],text)',
    'api.webhook_deliveries(uuid,integer,integer,text,timestamp with time zone,timestamp with time zone)',
    'api.webhook_delete(uuid)',
    'api.webhook_delivery_replay(uuid,uuid)',
    'api.webhook_ping(uuid)',
    'api.webhook_recover(uuid,timestamp with time zone,timestamp with time zone)',
    'api.webhook_rotate_secret(uuid)',
    'api.webhook_update(uuid,jsonb)',
    'api.webhooks_list(uuid)',
    'app.check_if_match(text[],timestamp with time zone,jsonb)',
    'app.check_page(integer,integer)',
    'app.node_display_name(uuid)',
    'app.node_display_names(uuid[])',
    'app.require_community(uuid)',
    'app.require_my_node()',
    'private.agent_quota_take(text)',
    'private.api_token_json(app.api_tokens)',
    'private.caller_community_ids()',
    'private.change_log_position()',
    'private.check_in(uuid,uuid,uuid,uuid,text,timestamp with time zone)',
    'private.check_in_user(uuid,uuid,uuid,uuid,uuid,text,timestamp with time zone)',
    'private.checkin_device_time(app.events,timestamp with time zone,timestamp with time zone)',
    'private.checkin_json(app.checkins)',
    'private.connection_json(app.connections)',
    'private.deal_json_meta(app.deals)',
    'private.deal_lock(uuid)',
    'private.endpoint_path_pattern(text)',
    'private.event_effective_end(timestamp with time zone,timestamp with time zone)',
    'private.event_json(app.events,text)',
    'private.event_log_range(bigint,bigint)',
    'private.event_object(app.events,uuid,boolean,text)',
    'private.event_readable(uuid)',
    'private.event_snapshot(uuid,text,timestamp with time zone)',
    'private.event_status(timestamp with time zone,timestamp with time zone,timestamp with time zone)',
    'private.event_stream_register(text,text,integer)',
    'private.event_streams_register(text,text,integer,uuid[])',
    'private.find_event(uuid)',
    'private.hat_belongs_to(uuid,uuid)',
    'private.is_community_manager(uuid,uuid)',
    'private.json_capped(jsonb,integer)',
    'private.lock_task_links(uuid)',
    'private.max_event_streams()',
    'private.mcp_agent()',
    'private.mcp_call_json(app.mcp_tool_calls)',
    'private.mcp_community_json(app.communities)',
    'private.mcp_managed_community(uuid)',
    'private.mcp_member_of_agent(uuid,boolean)',
    'private.my_upcoming_events()',
    'private.platform_authorize(uuid)',
    'private.storage_bucket(text)',
    'private.storage_check_name(text)',
    'private.storage_folder_owned(text,text,uuid)',
    'private.storage_object_json(app.storage_objects)',
    'private.storage_object_metadata(app.storage_objects)',
    'private.storage_object_name(uuid)',
    'private.task_chain_max_depth()',
    'private.task_chain_walk(uuid,boolean,integer)',
    'private.task_complete(uuid)',
    'private.task_exists(uuid)',
    'private.task_json(app.tasks)',
    'private.task_link(uuid,uuid,jsonb)',
    'private.task_link_would_cycle(uuid,uuid)',
    'private.task_start(uuid)',
    'private.upcoming_events_of(uuid)',
    'private.venue_concurrent_events(uuid,timestamp with time zone)',
    'private.sync_log(text,bigint,bigint)',
    'private.sync_rows(text,text)',
    'api.storage_bucket_delete(text)',
    'api.storage_bucket_create(text,boolean,bigint,text[])',
    'api.storage_objects_list_v2(text,text,integer,text,boolean,text,text)',
    'api.storage_bucket_update(text,jsonb)',
    'private.storage_base64url_decode(text)',
    'api.storage_bucket_empty(text)',
    'private.storage_operator()',
    'private.sync_was_member(uuid,uuid[],uuid[])',
    'private.sync_community_events(uuid[])',
    'api.sync_changes(text,bigint,text)',
    'api.sync_snapshot(text,text)',
    'private.synced_events_of(uuid)',
    'private.storage_base64url(bytea)',
    'api.auth_guest_convert(text,text,jsonb)',
    'private.require_full_account()'
  ],
  'the functions authenticated may execute (besides anon''s) are exactly the listed ones');

select set_eq(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('api', 'app', 'identity', 'private', 'admin')
       and pg_catalog.has_function_privilege('service_role', p.oid, 'EXECUTE')$$,
  array[
    'private.check_session(uuid)',
    'api.storage_objects_list(text,text,integer,integer,text,text,text)',
    'app.iso(timestamp with time zone)',
    'api.storage_object_copy_begin(text,text,text,text,boolean)',
    'api.storage_bucket_delete(text)',
    'api.storage_bucket_create(text,boolean,bigint,text[])',
    'api.storage_sign(text,text[],integer,jsonb)',
    'api.storage_objects_list_v2(text,text,integer,text,boolean,text,text)',
    'api.storage_upload_begin(text,text,boolean,bigint,text)',
    'private.storage_check_name(text)',
    'api.storage_bucket_update(text,jsonb)',
    'private.storage_base64url_decode(text)',
    'api.storage_upload_begin_signed(text,text,text,bigint)',
    'api.storage_objects_remove(text,text[])',
    'api.storage_object_get(text,text,boolean)',
    'private.storage_object_metadata(app.storage_objects)',
    'api.storage_sign_upload(text,text,boolean)',
    'api.storage_bucket_empty(text)',
    'private.storage_operator()',
    'private.storage_object_json(app.storage_objects)',
    'private.storage_folder_owned(text,text,uuid)',
    'api.storage_object_move(text,text,text,text)',
    'api.storage_buckets_list()',
    'private.storage_bucket(text)',
    'api.storage_resumable_upload(uuid)',
    'private.storage_base64url(bytea)',
    'api.storage_object_signed(text,text,text)',
    'api.storage_bucket_get(text)'
  ],
  'service_role may execute only private.check_session and the storage functions, where it acts as the operator (it bypasses row-level security but holds no other grant)');

-- 4. Comments ---------------------------------------------------------------

select is_empty(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'api'
       and coalesce(btrim(obj_description(p.oid, 'pg_proc')), '') = ''$$,
  'every api function has a comment');

select is_empty(
  $$select p.oid::regprocedure::text
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'admin'
       and coalesce(btrim(obj_description(p.oid, 'pg_proc')), '') = ''$$,
  'every admin function has a comment');

select is_empty(
  $$select d.classoid::regclass::text || ' ' || d.objoid::text
      from pg_catalog.pg_description d
     where d.description ~* '(spec section|DESIGN\.md|\.\./shared)'$$,
  'no comment in the database points at a document outside the repository');

select * from finish();
rollback;
