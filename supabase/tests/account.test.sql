-- An account its owner controls (sql/areas/account.sql): the password
-- checked again through the login throttle and its single-use proof, who may
-- act on an account (the access token of a sign-in only), deleting an account
-- (the last manager refused, everything of the person gone, its sessions kept
-- ended, member.deleted with ids only, its files' job), e-mailed deletion
-- links, e-mail changes confirmed by a token_hash, password changes,
-- sessions, the export's limit and the operator's delete_user.
begin;
select plan(72);

select tests.create_user('alice');
select tests.create_user('bob');
select tests.create_user('carol');
select tests.create_user('dave');
select tests.create_user_named_by_email('nopass');
select tests.create_user('erin');

-- A session of a test user, as a sign-in makes one; then act with its access token's claims.
create function pg_temp.sign_in(identifier text, agent text default null) returns uuid language sql as $$
  select s.session_id from private.start_session(tests.user_id(identifier), agent, '203.0.113.9') s
$$;
create function pg_temp.act_as(identifier text, session uuid) returns void language sql as $$
  select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', tests.user_id(identifier),
                    'aud', 'authenticated', 'session_id', session)::text, true),
         set_config('role', 'authenticated', true);
$$;
-- A proof of a password check, as the gateway gets one (the comparison is the process's: matched is given).
create function pg_temp.proof(identifier text, session uuid) returns text language plpgsql as $$
declare
  started record;
begin
  select * into strict started from private.reauthenticate_start(tests.user_id(identifier), session, '198.51.100.7', 10, 10, 100, 1000, 900);
  return (select f.reauthentication from private.reauthenticate_finish(tests.user_id(identifier), started.attempt, true, null) f);
end;
$$;
grant execute on function pg_temp.act_as(text, uuid) to public;
select set_config('tests.alice_session', pg_temp.sign_in('alice', 'phone')::text, true);
select set_config('tests.alice_laptop', pg_temp.sign_in('alice', 'laptop')::text, true);

-- The password checked again --------------------------------------------------------------

select is(tests.error_of(format('select private.reauthenticate_start(%L, null, %L, 10, 10, 100, 1000, 900)', tests.user_id('alice'), '198.51.100.7')),
  'PT403 forbidden', 'no session (an API token): an account is not managed with it');
select is(
  (select jsonb_build_object('status', status, 'same_hash', password_hash = (select u.password_hash from identity.users u where u.id = tests.user_id('alice')))
     from private.reauthenticate_start(tests.user_id('alice'), current_setting('tests.alice_session')::uuid, '198.51.100.7', 10, 10, 100, 1000, 900)),
  '{"status": "check", "same_hash": true}'::jsonb, 'a session: an attempt of the account''s e-mail at door reauthenticate, with its hash to compare');
select is(
  (select status from private.reauthenticate_start(tests.user_id('nopass'), pg_temp.sign_in('nopass'), '198.51.100.7', 10, 10, 100, 1000, 900)),
  'no_password', 'an account without a password confirms by e-mail');
select is(
  (select status from private.reauthenticate_start(tests.user_id('alice'), current_setting('tests.alice_session')::uuid, '198.51.100.7', 10, 10, 100, 1000, 900, false)),
  'password_required', 'an account with a password must send it');
select is(
  (select f.status from private.reauthenticate_start(tests.user_id('alice'), current_setting('tests.alice_session')::uuid, '198.51.100.8', 10, 10, 100, 1000, 900) s,
          private.reauthenticate_finish(tests.user_id('alice'), s.attempt, false, null) f),
  'invalid', 'a wrong password is invalid');
select is((select count(*)::int from private.auth_failures where scope = 'email' and key = tests.email('alice')), 1,
  'and counts as a failed sign-in of the account''s e-mail (the login throttle)');
select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select matches(current_setting('tests.proof'), '^[A-Za-z0-9_-]{43}$', 'a right password: a proof');
select is((select count(*)::int from identity.reauthentications where proof_hash = identity.token_hash(current_setting('tests.proof'))), 1,
  'stored as its hash');
select is(tests.error_of(format('select private.reauthenticate_start(%L, %L, %L, 10, 10, 100, 1000, 900)', tests.user_id('alice'),
                                current_setting('tests.alice_laptop'), '198.51.100.7')), 'no error', 'a live session may check');

-- Who may act --------------------------------------------------------------------------------

select tests.authenticate_as('alice');
select is(tests.error_of(format('select api.account_delete(%L)', current_setting('tests.proof'))), 'PT403 forbidden',
  'claims without a session (an API token, an agent): PT403 forbidden');
select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', tests.user_id('alice'),
  'session_id', current_setting('tests.alice_session'), 'oauth_client_id', 'agent')::text, true);
select is(tests.error_of('select api.account_sessions()'), 'PT403 forbidden', 'nor an agent''s OAuth credential');
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(tests.error_of(format('select api.account_delete(%L)', 'not-a-proof')), 'PT401 invalid_credentials', 'without a valid proof: PT401');

-- Sessions -----------------------------------------------------------------------------------

select is(
  (select jsonb_agg(jsonb_build_object('agent', s ->> 'user_agent', 'ip', s ->> 'ip', 'current', (s ->> 'current')::boolean) order by s ->> 'user_agent')
     from jsonb_array_elements(api.account_sessions()) s),
  '[{"agent": "laptop", "ip": "203.0.113.9", "current": false}, {"agent": "phone", "ip": "203.0.113.9", "current": true}]'::jsonb,
  'the sessions, with their user agent and address; the current one marked');
reset role;
select set_config('tests.bob_session', pg_temp.sign_in('bob')::text, true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(tests.error_of(format('select api.account_session_end(%L)', current_setting('tests.bob_session'))), 'PT404 session_not_found',
  'another account''s session: PT404');
select is(api.account_session_end(current_setting('tests.alice_laptop')::uuid) ->> 'current', 'false', 'one of the caller''s sessions ends');
select is(jsonb_array_length(api.account_sessions()), 1, 'it is no longer listed');
reset role;
select is(private.session_ended(current_setting('tests.alice_laptop')::uuid), true, 'its access tokens are refused (private.session_ended)');
select is(private.session_ended(current_setting('tests.bob_session')::uuid), false, 'bob''s session lives on');

-- Password change ------------------------------------------------------------------------------

select set_config('tests.alice_tablet', pg_temp.sign_in('alice', 'tablet')::text, true);
select private.oauth_client_register('acct-agent', null, 0, extract(epoch from now())::bigint, '{"redirect_uris": ["http://localhost/cb"], "client_name": "Agent"}');
select private.oauth_issue_tokens('acct-agent', tests.user_id('alice'), gen_random_uuid(), array['mcp:read'], null, 3600);
insert into app.api_tokens (user_id, name, permissions, token_hash) values (tests.user_id('alice'), 'script', array['*'], extensions.gen_random_bytes(32));
select set_config('tests.hash', extensions.crypt(encode(extensions.digest('new password', 'sha256'), 'base64'), extensions.gen_salt('bf', 10)), true);
select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(tests.error_of(format('select api.account_password_change(%L, %L)', current_setting('tests.proof'), 'new password')), 'PT400 invalid_password_hash',
  'a password in clear is refused');
select is(api.account_password_change(current_setting('tests.proof'), current_setting('tests.hash')), '{"api_tokens": 1, "sessions_ended": 1}'::jsonb,
  'a password change ends the other session; says how many API tokens stay');
select is(tests.error_of(format('select api.account_password_change(%L, %L)', current_setting('tests.proof'), current_setting('tests.hash'))),
  'PT401 invalid_credentials', 'a proof works once');
reset role;
select is((select password_hash from identity.users where id = tests.user_id('alice')), current_setting('tests.hash'), 'the new hash is stored');
select is((private.session_ended(current_setting('tests.alice_tablet')::uuid), private.session_ended(current_setting('tests.alice_session')::uuid)),
  (true, false), 'the other session ended, the calling one did not');
select is((select count(*)::int from identity.oauth_tokens where user_id = tests.user_id('alice') and revoked_at is null), 0, 'every OAuth grant ended');
select is((select count(*)::int from app.api_tokens where user_id = tests.user_id('alice') and active), 1, 'the API token stays');

-- E-mail change --------------------------------------------------------------------------------

select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(tests.error_of(format('select api.account_email_change(%L, %L, %L)', current_setting('tests.proof'), 'not an address', 'https://app.example.test')),
  'PT422 invalid_email', 'an invalid address: PT422');
select lives_ok(format('select api.account_email_change(%L, %L, %L)', current_setting('tests.proof'), upper(tests.email('bob')), 'https://app.example.test'),
  'a taken address is asked for as any other');
reset role;
create function pg_temp.token_hash_of(link text) returns text language sql immutable as $$ select split_part(link, 'token_hash=', 2) $$;
select set_config('tests.taken', pg_temp.token_hash_of((select link from app.email_outbox where to_email = tests.email('bob') and purpose = 'email_change')), true);
select is((select jsonb_build_object('to_old', (select count(*)::int from app.email_outbox where to_email = tests.email('alice') and purpose = 'email_change_notice'),
                                     'new_email', (select new_email from identity.account_links where token_hash = identity.token_hash(current_setting('tests.taken'))))),
  jsonb_build_object('to_old', 1, 'new_email', tests.email('bob')), 'a link to the new address (normalised), a notice to the old one');
select tests.authenticate_as_anon();
select is(api.account_email_change_link(current_setting('tests.taken')) ->> 'available', 'false', 'the link''s page learns the address cannot be used');
select is(tests.error_of(format('select api.account_email_change_confirm(%L)', current_setting('tests.taken'))), 'PT409 email_taken',
  'confirming it: PT409 email_taken');
reset role;
select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select api.account_email_change(current_setting('tests.proof'), 'alice-new@example.test', 'https://app.example.test');
reset role;
select set_config('tests.free', pg_temp.token_hash_of((select link from app.email_outbox where to_email = 'alice-new@example.test')), true);
select is((select used_at is not null from identity.account_links where token_hash = identity.token_hash(current_setting('tests.taken'))), true,
  'a newer link of the purpose voids the older one');
select tests.authenticate_as_anon();
select is(api.account_email_change_confirm(current_setting('tests.free')) ->> 'email', 'alice-new@example.test', 'the token_hash confirms the change');
select is(tests.error_of(format('select api.account_email_change_confirm(%L)', current_setting('tests.free'))), 'PT400 invalid_link', 'once');
reset role;
select is((select email from identity.users where id = tests.user_id('alice')), 'alice-new@example.test', 'the account signs in with the new address');

-- Deleting an account ----------------------------------------------------------------------------

select set_config('tests.solo', admin.create_community('Solo', null, '{}', 'alice-new@example.test')::text, true);
select set_config('tests.shared', admin.create_community('Shared', null, '{}', tests.email('carol'))::text, true);
insert into app.community_members (community_id, member_node_id, role)
values (current_setting('tests.shared')::uuid, tests.node_id('alice'), 'member'), (current_setting('tests.shared')::uuid, tests.node_id('bob'), 'member');
insert into app.connections (owner_node_id, target_node_id, notes) values (tests.node_id('bob'), tests.node_id('alice'), 'about alice');
insert into app.webhook_endpoints (community_id, url, events, secret)
values (current_setting('tests.shared')::uuid, 'https://hooks.example.test/x', array['member.left', 'member.deleted'], 'whsec_x');
select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(tests.error_of(format('select api.account_delete(%L)', current_setting('tests.proof'))), 'PT409 last_manager_of_communities',
  'the only manager of a community: PT409 last_manager_of_communities');
reset role;
create function pg_temp.detail_of(query text) returns jsonb language plpgsql as $$
declare
  d text;
begin
  execute query;
  return null;
exception when others then
  get stacked diagnostics d = pg_exception_detail;
  return d::jsonb;
end;
$$;
select is(pg_temp.detail_of(format('select private.account_delete(%L)', tests.user_id('alice'))),
  jsonb_build_object('communities', jsonb_build_array(jsonb_build_object('id', current_setting('tests.solo')::uuid, 'name', 'Solo'))),
  'its detail names the communities');
insert into app.community_members (community_id, member_node_id, role) values (current_setting('tests.solo')::uuid, tests.node_id('dave'), 'manager');
select set_config('tests.counts', (select jsonb_object_agg(id, member_count) from app.communities
                                    where id in (current_setting('tests.solo')::uuid, current_setting('tests.shared')::uuid))::text, true);
select set_config('tests.proof', pg_temp.proof('alice', current_setting('tests.alice_session')::uuid), true);
select pg_temp.act_as('alice', current_setting('tests.alice_session')::uuid);
select is(api.account_delete(current_setting('tests.proof')) ->> 'user_id', tests.user_id('alice')::text, 'once another member manages it, the account is deleted');
reset role;
select is((select count(*)::int from identity.users where id = tests.user_id('alice'))
          + (select count(*)::int from app.profiles where id = tests.user_id('alice'))
          + (select count(*)::int from app.nodes where id = tests.node_id('alice'))
          + (select count(*)::int from app.community_members where member_node_id = tests.node_id('alice'))
          + (select count(*)::int from app.connections where target_node_id = tests.node_id('alice'))
          + (select count(*)::int from app.api_tokens where user_id = tests.user_id('alice'))
          + (select count(*)::int from identity.oauth_tokens where user_id = tests.user_id('alice'))
          + (select count(*)::int from identity.account_links where user_id = tests.user_id('alice')), 0,
  'the identity, profile, node, memberships, others'' connections to it, tokens, grants and links are gone');
select is((select jsonb_object_agg(id, member_count) from app.communities
            where id in (current_setting('tests.solo')::uuid, current_setting('tests.shared')::uuid)),
  (select jsonb_object_agg(key, value::int - 1) from jsonb_each_text(current_setting('tests.counts')::jsonb)),
  'the member counts fell by one, in the same transaction');
select is(
  (select jsonb_agg(distinct jsonb_build_object('user', user_id, 'agent', user_agent, 'ip', ip, 'reason', revoked_reason))
     from identity.refresh_tokens where session_id = current_setting('tests.alice_session')::uuid),
  '[{"user": null, "agent": null, "ip": null, "reason": "logout"}]'::jsonb,
  'its sessions stay, revoked and without the person, until pruned');
select is(private.session_ended(current_setting('tests.alice_session')::uuid), true, 'so their access tokens stay refused');
select is(
  (select jsonb_agg(d.event_type || ' ' || (d.payload -> 'data' -> 'member')::text)
     from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id
    where e.community_id = current_setting('tests.shared')::uuid),
  jsonb_build_array('member.deleted ' || jsonb_build_object('id', tests.node_id('alice'))::text),
  'member.deleted with ids only, and no member.left');
select is((select count(*)::int from graphile_worker.jobs where key = 'storage_purge:user:' || tests.user_id('alice')), 1,
  'a job deletes its stored files');
select lives_ok(format('select tests.create_user(%L)', 'alice2'), 'its e-mail address and name are free again');

-- Links for an account without a password, and the web page's request ---------------------------

select set_config('tests.nopass_session', pg_temp.sign_in('nopass')::text, true);
select pg_temp.act_as('nopass', current_setting('tests.nopass_session')::uuid);
select is(api.account_delete_link_send('https://app.example.test'), '{"link_sent": true}'::jsonb, 'an account without a password gets a deletion link');
reset role;
select tests.authenticate_as_anon();
select api.account_delete_request(upper(tests.email('nopass')), 'https://app.example.test', '203.0.113.3', 100, 900);
select lives_ok(format('select api.account_delete_request(%L, %L, %L, 100, 900)', 'nobody-' || gen_random_uuid() || '@example.test', 'https://app.example.test', '203.0.113.3'),
  'the web page''s request: the same for an unknown address');
reset role;
select is((select count(*)::int from graphile_worker.jobs where key = 'email_link:delete_account:' || tests.email('nopass') and task_identifier = 'email_link'), 1,
  'the request queues the email_link job that looks the address up');
-- The job, run again and again.
select private.email_link_send('delete_account', tests.email('nopass'), 'https://app.example.test') from generate_series(1, 6);
select is((select count(*)::int from app.email_outbox where user_id = tests.user_id('nopass') and purpose = 'delete_account'), 5,
  'at most 5 deletion links an hour per account');
select set_config('tests.link', (select split_part(o.link, 'token=', 2) from app.email_outbox o
                                   join identity.account_links l on l.token_hash = identity.token_hash(split_part(o.link, 'token=', 2))
                                  where o.user_id = tests.user_id('nopass') and l.used_at is null), true);
select tests.authenticate_as_anon();
select is(api.account_delete_link(current_setting('tests.link')) ->> 'email', tests.email('nopass'), 'the newest link names its account');
select is(api.account_delete_confirm(current_setting('tests.link')) ->> 'user_id', tests.user_id('nopass')::text, 'confirming it deletes the account');
reset role;

-- Supabase Auth's sign-out scopes, its User object and user_metadata ------------------------------

select set_config('tests.erin_a', pg_temp.sign_in('erin')::text, true);
select set_config('tests.erin_b', pg_temp.sign_in('erin')::text, true);
select set_config('tests.erin_c', pg_temp.sign_in('erin')::text, true);
select pg_temp.act_as('erin', current_setting('tests.erin_a')::uuid);
select is(tests.error_of('select api.account_sign_out(''everything'')'), 'PT422 validation_error', 'sign-out: another scope is refused');
select is(api.account_sign_out('others'), '{"sessions_ended": 2}'::jsonb, 'scope others ends every session but the calling one');
select is(api.auth_user() ->> 'email', tests.email('erin'), 'the calling session still works: the User object of the caller');
select is(api.auth_user() -> 'app_metadata', '{"provider": "email", "providers": ["email"]}'::jsonb, 'the User object says the provider is e-mail');
select is(api.auth_user_metadata_update('{"city": "Berlin", "nick": "E"}'::jsonb) -> 'user_metadata', '{"city": "Berlin", "nick": "E"}'::jsonb,
  'user_metadata takes the keys given');
select is(api.auth_user_metadata_update('{"nick": null}'::jsonb) -> 'user_metadata', '{"city": "Berlin"}'::jsonb, 'a key given as null is removed');
select is(tests.error_of(format('select api.auth_user_metadata_update(%L::jsonb)', jsonb_build_object('big', repeat('x', 17000)))),
  'PT422 validation_error', 'user_metadata holds at most 16 KB');
select is(api.auth_user_update(null, null, null, null, null, '{"nick": "Z"}'::jsonb) -> 'user_metadata', '{"city": "Berlin", "nick": "Z"}'::jsonb,
  'auth_user_update with data alone merges it');
select is(tests.error_of($$select api.auth_user_update(null, 'not-a-proof', null, 'erin-next@example.test', 'https://app.example.test', '{"nick": "Y"}'::jsonb)$$),
  'PT401 invalid_credentials', 'auth_user_update: an e-mail change without a valid proof is refused');
select is(api.auth_user() -> 'user_metadata', '{"city": "Berlin", "nick": "Z"}'::jsonb, 'and nothing of the same call is saved (every change or none)');
select is(tests.error_of($$select api.auth_user_update(null, null, '$2a$10$abcdefghijklmnopqrstuuJ7d0m2Yd1o5o2H3xA6q7j2lKj8rU3s.', null, null, '{}'::jsonb)$$),
  'PT400 current_password_required', 'auth_user_update: a new password without a proof outside a recovery session is refused');
select is(api.account_sign_out('local'), '{"sessions_ended": 1}'::jsonb, 'scope local ends the calling session');
reset role;
select is((select count(*)::int from identity.refresh_tokens where user_id = tests.user_id('erin') and revoked_at is null), 0,
  'and then no session of the account is left');
-- A global sign-out ends the signed storage URLs the account made (a local or others one does not).
select set_config('tests.erin_url', private.storage_token(jsonb_build_object('scope', 'download', 'url', 'attachments/x', 'sub', tests.user_id('erin')), 60), true);
select set_config('tests.erin_g', pg_temp.sign_in('erin')::text, true);
select pg_temp.act_as('erin', current_setting('tests.erin_g')::uuid);
select api.account_sign_out('global');
reset role;
select is(tests.error_of(format($$select private.storage_token_claims(%L, 'download', 'attachments/x')$$, current_setting('tests.erin_url'))),
  'PT400 signature_expired', 'a global sign-out ends the signed storage URLs the account made');

-- A recovery link signs in once; that session sets the password once without the current one.
select private.email_link_send('recover', tests.email('erin'), 'https://app.example.test');
select set_config('tests.erin_link', (select split_part(o.link, 'token=', 2) from app.email_outbox o
                                        where o.user_id = tests.user_id('erin') and o.link like '%set-password%' order by o.created_at desc limit 1), true);
select tests.authenticate_as_anon();
select set_config('tests.erin_r', (select session_id::text from api.auth_recovery_verify(current_setting('tests.erin_link'), 'phone', '203.0.113.5')), true);
select is(tests.error_of(format('select api.auth_recovery_verify(%L)', current_setting('tests.erin_link'))), 'PT400 invalid_link', 'a recovery link works once');
reset role;
select set_config('tests.erin_d', pg_temp.sign_in('erin')::text, true);
select set_config('tests.hash_1', identity.hash_password('a brand new passphrase'), true);
select set_config('tests.hash_2', identity.hash_password('another passphrase'), true);
select pg_temp.act_as('erin', current_setting('tests.erin_d')::uuid);
select is(tests.error_of(format('select api.auth_recovery_password_set(%L)', current_setting('tests.hash_1'))),
  'PT400 current_password_required', 'another session needs the current password');
reset role;
select pg_temp.act_as('erin', current_setting('tests.erin_r')::uuid);
select is(api.auth_recovery_password_set(current_setting('tests.hash_1')) ->> 'email', tests.email('erin'),
  'the recovery session sets the password without the current one');
select is(tests.error_of(format('select api.auth_recovery_password_set(%L)', current_setting('tests.hash_2'))),
  'PT400 current_password_required', 'once');
reset role;
select is((select count(*)::int from identity.refresh_tokens where user_id = tests.user_id('erin') and revoked_at is null
            and session_id <> current_setting('tests.erin_r')::uuid), 0, 'and every other session ended');

-- The export's limit, the operator ----------------------------------------------------------------

select set_config('tests.bob_session', pg_temp.sign_in('bob')::text, true);
select pg_temp.act_as('bob', current_setting('tests.bob_session')::uuid);
select api.account_export() from generate_series(1, 5);
select is(tests.error_of('select api.account_export()'), 'PT429 rate_limited', 'at most 5 exports an hour');
reset role;
select is(tests.error_of(format('select admin.delete_user(%L)', 'nobody@example.test')), 'P0002', 'admin.delete_user: an unknown address is P0002');
select is(admin.delete_user(upper(tests.email('bob'))) ->> 'user_id', tests.user_id('bob')::text, 'and deletes the account of a known one');

select * from finish();
rollback;
