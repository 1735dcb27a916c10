-- The agent interface (the api.mcp_* functions the MCP tools call): an agent
-- sees only the communities it manages and the members it created (anything
-- else is PT404 not_found, never a hint that it exists), community-scoped
-- tokens are refused, the hourly limits per tool, admission per client
-- address and minute, the audit of tool calls (secrets redacted, each user
-- reads their own), and stored records pruned after 30 days.
begin;
select plan(50);

select tests.create_user('agent');
select tests.create_user('rival');
select tests.create_user('taken');
select set_config('tests.tag', substr(md5(gen_random_uuid()::text), 1, 10), true);
select set_config('tests.community', admin.create_community('Agents'' club ' || current_setting('tests.tag'), null, '{}', tests.email('agent'))::text, true);
select set_config('tests.other_community', admin.create_community('Rival club', null, '{}', tests.email('rival'))::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'launch', now() + interval '1 day')::text, true);

-- Communities the agent manages ---------------------------------------------

select tests.authenticate_as('agent');
select is(
  (select r ->> 'id' || ' ' || (r ->> 'accepts_handoffs') from api.mcp_community_profile(current_setting('tests.community')::uuid) r),
  current_setting('tests.community') || ' false', 'community_profile: a community the caller manages');
select throws_ok(
  format('select api.mcp_community_profile(%L)', current_setting('tests.other_community')),
  'PT404', 'community not found', 'community_profile: another''s community is not found');
select is(
  api.mcp_event_get(current_setting('tests.event')::uuid, 'https://x.test') ->> 'status', 'upcoming',
  'get_event: an event of a managed community, with its status');
select throws_ok(
  format('select api.mcp_community_events(%L, %L)', current_setting('tests.other_community'), 'https://x.test'),
  'PT404', 'community not found', 'list_community_events: only of managed communities');
select throws_ok(
  format('select api.mcp_community_set_onboarding(%L, null)', current_setting('tests.community')),
  'PT400', 'accepts_handoffs must be true or false', 'set_onboarding_opt_in: true or false');
select is(
  api.mcp_community_set_onboarding(current_setting('tests.community')::uuid, true) -> 'accepts_handoffs', 'true'::jsonb,
  'set_onboarding_opt_in: opts the community in');
select is(
  jsonb_path_query_array(api.mcp_onboarding_communities(), '$.communities[*].id'),
  jsonb_build_array(current_setting('tests.community')), 'search_onboarding_communities: the managed communities that opted in');

-- Members the agent creates -------------------------------------------------

select set_config('tests.member_email', 'Member-' || current_setting('tests.tag') || '@Example.TEST', true);
select set_config('tests.member', api.mcp_member_create(current_setting('tests.member_email'), 'Mia', '{"source": "chat"}', 'https://x.test') ->> 'id', true);
select is(
  api.mcp_member_get(current_setting('tests.member')::uuid) - 'id' - 'node_id' - 'created_at' - 'updated_at',
  jsonb_build_object('email', lower(current_setting('tests.member_email')), 'name', 'Mia', 'data', '{"source": "chat"}'::jsonb,
                     'attributes', '{}'::jsonb, 'password_set', false, 'communities', '[]'::jsonb),
  'create_member: a password-less account with the signup data; get_member reads it back');
select set_config('tests.member_node', api.mcp_member_get(current_setting('tests.member')::uuid) ->> 'node_id', true);
select is(
  api.mcp_member_get(current_setting('tests.member_node')::uuid) ->> 'id', current_setting('tests.member'),
  'get_member: by node id as by user id');
select is(
  api.mcp_member_create(upper(current_setting('tests.member_email')), null, null, 'https://x.test') ->> 'id',
  current_setting('tests.member'),
  'create_member: the e-mail of a member the agent created gives that member again (and a new link)');
select isnt(
  api.mcp_member_create(upper(tests.email('rival')), null, null, 'https://x.test') ->> 'id',
  tests.user_id('rival')::text,
  'create_member: the e-mail of someone else''s account answers as a new member would, naming no account (the person gets a link)');
select throws_ok(
  format('select api.mcp_member_create(%L, null, %L, %L)', 'x-' || current_setting('tests.tag') || '@example.test', '[1]', 'https://x.test'),
  'PT400', 'data must be an object', 'create_member: data must be an object');
select is(
  api.mcp_member_set_attributes(current_setting('tests.member')::uuid, '{"tier": "gold", "lang": "en"}') -> 'attributes',
  '{"tier": "gold", "lang": "en"}'::jsonb, 'set_member_attributes: merges the keys');
select is(
  api.mcp_member_set_attributes(current_setting('tests.member')::uuid, '{"lang": null}') -> 'attributes',
  '{"tier": "gold"}'::jsonb, 'set_member_attributes: null removes a key');
select throws_ok(
  format('select api.mcp_member_set_attributes(%L, %L)', current_setting('tests.member'), '"gold"'),
  'PT400', 'attributes must be an object', 'set_member_attributes: attributes must be an object');
select is(
  api.mcp_member_add_to_community(current_setting('tests.member')::uuid, current_setting('tests.community')::uuid) -> 'added',
  'true'::jsonb, 'add_member_to_community: joins the member to a managed community');
select is(
  api.mcp_member_add_to_community(current_setting('tests.member')::uuid, current_setting('tests.community')::uuid) -> 'added',
  'false'::jsonb, 'add_member_to_community: again, already a member');
select throws_ok(
  format('select api.mcp_member_add_to_community(%L, %L)', current_setting('tests.member'), current_setting('tests.other_community')),
  'PT404', 'community not found', 'add_member_to_community: not to a community the caller does not manage');
reset role;
select is(
  (select count(*)::int from app.email_outbox o where o.user_id = current_setting('tests.member')::uuid),
  2, 'create_member queued the set-password e-mail, and a link again when the e-mail was given a second time');
select is(
  (select count(*)::int from app.community_members m join app.profiles p on p.node_id = m.member_node_id
    where p.id = current_setting('tests.member')::uuid),
  0, 'a member handed to a community is not in it before the person claims the account');

-- An address that has an account: a placeholder, answered as a created member ---------------

select tests.authenticate_as('agent');
select set_config('tests.placeholder', api.mcp_member_create(upper(tests.email('taken')), 'Probe', '{"k": 1}', 'https://x.test') ->> 'id', true);
select is(
  api.mcp_member_get(current_setting('tests.placeholder')::uuid) - 'id' - 'node_id' - 'created_at' - 'updated_at',
  jsonb_build_object('email', tests.email('taken'), 'name', 'Probe', 'data', '{"k": 1}'::jsonb,
                     'attributes', '{}'::jsonb, 'password_set', false, 'communities', '[]'::jsonb),
  'get_member: the placeholder an address with an account got reads as a created member does');
select is(
  api.mcp_member_set_attributes(current_setting('tests.placeholder')::uuid, '{"tier": "gold"}') -> 'attributes',
  '{"tier": "gold"}'::jsonb, 'set_member_attributes: on the placeholder as on a member');
select is(
  api.mcp_member_add_to_community(current_setting('tests.placeholder')::uuid, current_setting('tests.community')::uuid) - 'joined_at',
  jsonb_build_object('member_id', current_setting('tests.placeholder')::uuid, 'community_id', current_setting('tests.community')::uuid,
                     'role', 'member', 'added', true,
                     'member_count', (select c.member_count from app.communities c where c.id = current_setting('tests.community')::uuid)),
  'add_member_to_community: the placeholder is handed over as a member is; the community does not change');
reset role;
select is(
  (select count(*)::int from app.community_members m join app.profiles p on p.node_id = m.member_node_id where p.id = tests.user_id('taken')),
  0, 'and the account is in no community for it');
-- The claim: the member joins what it was handed to.
select private.agent_member_claim(current_setting('tests.member')::uuid);
select is(
  (select array_agg(m.community_id) from app.community_members m join app.profiles p on p.node_id = m.member_node_id
    where p.id = current_setting('tests.member')::uuid),
  array[current_setting('tests.community')::uuid], 'claimed, the member joins the community it was handed to');

-- Another agent ---------------------------------------------------------------

select tests.authenticate_as('rival');
select throws_ok(
  format('select api.mcp_member_get(%L)', current_setting('tests.member')),
  'PT404', 'member not found', 'get_member: another agent''s member is not found');
select throws_ok(
  format('select api.mcp_member_set_attributes(%L, %L)', current_setting('tests.member'), '{"tier": "lead"}'),
  'PT404', 'member not found', 'set_member_attributes: nor can it be changed');
select is((select count(*)::int from app.agent_members), 0, 'row-level security: another agent''s members are not readable');

-- The signup data an agent collected for its member is the agent's alone: not
-- readable from app.nodes (its data column is not granted), nor through
-- private.mcp_member_json (not executable by request roles; the api.mcp_member_*
-- functions check the caller). Each probe returns null however it is refused.
reset role;
create function pg_temp.node_data_seen(node uuid) returns jsonb language plpgsql as $$
begin
  return (select n.data from app.nodes n where n.id = node);
exception when insufficient_privilege or undefined_column then
  return null;
end;
$$;
create function pg_temp.member_json_seen(member uuid) returns jsonb language plpgsql as $$
begin
  return private.mcp_member_json(member);
exception when insufficient_privilege or undefined_function or sqlstate 'PT404' then
  return null;
end;
$$;
grant execute on function pg_temp.node_data_seen(uuid), pg_temp.member_json_seen(uuid) to public;
select tests.authenticate_as('rival');
select is(pg_temp.node_data_seen(current_setting('tests.member_node')::uuid), null,
  'app.nodes.data: another user reads none of the signup data an agent collected');
select is(pg_temp.member_json_seen(current_setting('tests.member')::uuid), null,
  'private.mcp_member_json: another user gets nothing of a member they did not create');

-- Community-scoped tokens and limits ------------------------------------------

select tests.authenticate_as('agent');
select set_config('tests.scoped', (select token_value from api.api_token_create('scoped', array['/mcp'], null,
                                     current_setting('tests.community')::uuid)), true);
select tests.authenticate_with_api_token(current_setting('tests.scoped'), '/mcp');
select throws_ok(
  format('select api.mcp_community_profile(%L)', current_setting('tests.community')),
  'PT403', 'community-scoped tokens cannot use the agent interface; use a personal token', 'a community-scoped token is refused (PT403)');
reset role;

update private.agent_tool_limits set per_hour = 1 where tool = 'create_member';
select tests.authenticate_as('rival');
select lives_ok(
  format('select api.mcp_member_create(%L, null, null, %L)', 'r1-' || current_setting('tests.tag') || '@example.test', 'https://x.test'),
  'create_member within the hourly allowance');
select throws_like(
  format('select api.mcp_member_create(%L, null, null, %L)', 'r2-' || current_setting('tests.tag') || '@example.test', 'https://x.test'),
  'create_member is limited to 1 calls per hour; retry in % seconds', 'create_member past the allowance is refused');
select throws_ok(
  format('select api.mcp_member_create(%L, null, null, %L)', 'r2-' || current_setting('tests.tag') || '@example.test', 'https://x.test'),
  'PT429', null, 'with PT429');
reset role;
update private.agent_tool_usage set called_at = called_at - interval '61 minutes' where agent_id = tests.user_id('rival');
select tests.authenticate_as('rival');
select lives_ok(
  format('select api.mcp_member_create(%L, null, null, %L)', 'r3-' || current_setting('tests.tag') || '@example.test', 'https://x.test'),
  'calls older than an hour no longer count');

-- The audit of tool calls -----------------------------------------------------

reset role;
select private.mcp_record_call(tests.user_id('agent'), 'api_token', null, 'client', null, 'create_member',
  '{"email": "a@b.c", "password": "hunter2", "nested": {"api_key": "k"}}', 'ok', null, 1.5);
select tests.authenticate_as('agent');
select is(
  api.mcp_tool_calls_mine(10, null) -> 'data' -> 0 -> 'arguments',
  '{"email": "a@b.c", "password": "[redacted]", "nested": {"api_key": "[redacted]"}}'::jsonb,
  'tool calls are recorded with secrets redacted, and read by their user');
select tests.authenticate_as('rival');
select is(api.mcp_tool_calls_mine(10, null) -> 'data', '[]'::jsonb, 'another user reads none of them');

-- Scoping, with the hints ---------------------------------------------------------------

reset role;
select tests.create_user('sc_a');
select tests.create_user('sc_b');
select set_config('tests.sc_c', admin.create_community('Scoped', null, '{}', tests.email('sc_a'))::text, true);
select tests.authenticate_as('sc_a');
select is(
  (select jsonb_build_object('id', r -> 'id', 'accepts_handoffs', r -> 'accepts_handoffs') from api.mcp_community_profile(current_setting('tests.sc_c')::uuid) r),
  jsonb_build_object('id', current_setting('tests.sc_c'), 'accepts_handoffs', false), 'mcp_community_profile of a community the agent manages');
select set_config('tests.sc_member',
  api.mcp_member_create('m-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', null, null, 'http://x') ->> 'id', true);
select tests.authenticate_as('sc_b');
select is(tests.error_of(format('select api.mcp_community_profile(%L)', current_setting('tests.sc_c'))), 'PT404 not_found',
  'another agent: PT404 not_found for the community');
select is(tests.error_of(format('select api.mcp_member_get(%L)', current_setting('tests.sc_member'))), 'PT404 not_found',
  'and for the member the first agent created');
select is((select count(*)::int from app.agent_members where member_id = current_setting('tests.sc_member')::uuid), 0,
  'whose row is not even readable (row-level security)');
select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', tests.user_id('sc_a'),
  'token_id', gen_random_uuid(), 'token_community_id', current_setting('tests.sc_c'))::text, true);
select is(tests.error_of(format('select api.mcp_community_profile(%L)', current_setting('tests.sc_c'))), 'PT403 community_scope_violation',
  'a community-scoped API token is refused: PT403 community_scope_violation');
reset role;
select set_config('request.jwt.claims', '', true);

-- Admission per client address and minute; the session's owner ------------------------------

select set_config('tests.ip', '192.0.2.' || (1 + floor(random() * 249))::int, true);
select set_config('tests.session', private.mcp_session_open(tests.user_id('sc_a'), 'c', '1', '2025-03-26')::text, true);
create temporary table admitted (n int, allowed boolean, remaining int, session_user_id uuid);
insert into admitted select 1, allowed, remaining, session_user_id from private.mcp_admit(current_setting('tests.ip'), 3, current_setting('tests.session')::uuid);
insert into admitted select 2, allowed, remaining, session_user_id from private.mcp_admit(current_setting('tests.ip'), 3, current_setting('tests.session')::uuid);
insert into admitted select 3, allowed, remaining, session_user_id from private.mcp_admit(current_setting('tests.ip'), 3, current_setting('tests.session')::uuid);
insert into admitted select 4, allowed, remaining, session_user_id from private.mcp_admit(current_setting('tests.ip'), 3, current_setting('tests.session')::uuid);
select is((select array_agg(allowed order by n) from admitted), array[true, true, true, false], 'mcp_admit: 3 a minute per address, then refused');
select is((select array_agg(remaining order by n) from admitted), array[2, 1, 0, 0], 'counting down what remains');
select is((select session_user_id from admitted where n = 1), tests.user_id('sc_a'), 'and naming the owner of the session');
select private.mcp_session_end(current_setting('tests.session')::uuid, tests.user_id('sc_a'));
select is((select session_user_id from private.mcp_admit(current_setting('tests.ip') || '-x', 3, current_setting('tests.session')::uuid)), null,
  'an ended session has no owner');

-- Secrets are redacted from what is audited -----------------------------------------------------

select is(
  private.redact_secrets('{"a": 1, "Password": "x", "list": [{"api_key": "k", "keep": true}], "deep": {"refresh_token": "t", "client_secret": "s", "note": "n"}}'),
  '{"a": 1, "Password": "[redacted]", "list": [{"api_key": "[redacted]", "keep": true}], "deep": {"refresh_token": "[redacted]", "client_secret": "[redacted]", "note": "n"}}'::jsonb,
  'redact_secrets replaces the values under secret-looking keys, at any depth');

-- Stored records are pruned after 30 days, a batch at a time -----------------------------------

select tests.create_user('pruned');
insert into app.api_endpoints (http_method, path, controller, action) values ('GET', '/pgtap/prune/' || gen_random_uuid(), 'Test', 'prune');
insert into app.api_tokens (user_id, name, permissions, token_hash)
values (tests.user_id('pruned'), 'prune', array['*'], extensions.digest(gen_random_uuid()::text, 'sha256'));
insert into app.api_test_results (api_endpoint_id, api_token_id, user_id, request_method, request_path, response_status, response_time_ms, success, executed_at)
select (select id from app.api_endpoints where path like '/pgtap/prune/%'), (select id from app.api_tokens where user_id = tests.user_id('pruned')), tests.user_id('pruned'),
       'GET', '/x', 200, 1, true, now() - age::interval
  from unnest(array['31 days', '31 days', '31 days', '29 days', '1 minute']) age;
insert into app.mcp_tool_calls (user_id, credential_kind, tool, outcome, duration_ms, called_at)
select tests.user_id('pruned'), 'api_token', 'get_member', 'ok', 1, now() - age::interval
  from unnest(array['31 days', '31 days', '31 days', '29 days', '1 minute']) age;
create function pg_temp.left_of_pruned() returns jsonb language sql as $$
  select jsonb_build_object(
    'tests', (select count(*) from app.api_test_results where user_id = tests.user_id('pruned')),
    'calls', (select count(*) from app.mcp_tool_calls where user_id = tests.user_id('pruned')))
$$;
select private.stored_records_prune(interval '30 days', 2);
select is(pg_temp.left_of_pruned(), '{"tests": 3, "calls": 3}'::jsonb, 'stored_records_prune: a batch of 2 of the old rows of each table at a time');
select cmp_ok(private.stored_records_prune(), '>=', 2, 'the default batch takes the rest');
select is(pg_temp.left_of_pruned(), '{"tests": 2, "calls": 2}'::jsonb, 'and leaves what is younger than 30 days');

select * from finish();
rollback;
