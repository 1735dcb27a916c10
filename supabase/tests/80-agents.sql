-- The agent interface (the api.mcp_* functions the MCP tools call): an agent
-- sees only the communities it manages and the members it created (anything
-- else is PT404 not_found, never a hint that it exists), community-scoped
-- tokens are refused, the hourly limits per tool, and the audit of tool
-- calls (secrets redacted, each user reads their own).
begin;
select plan(31);

select tests.create_user('agent');
select tests.create_user('rival');
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

select * from finish();
rollback;
