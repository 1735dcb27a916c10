-- Operator functions (schema admin, sql/areas/admin.sql): what a database
-- owner runs in psql or through `npm run admin`. Users, communities with and
-- without a manager, managers, plans, community flags, venues and events
-- with their shortlinks; unknown references are P0002 and create nothing.
begin;
select plan(43);

select set_config('tests.ada_email', 'ada-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select set_config('tests.grace_email', 'grace-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);

-- Users ------------------------------------------------------------------------

select set_config('tests.ada', admin.create_user(current_setting('tests.ada_email'), 'password123', 'Ada Admin')::text, true);
select set_config('tests.grace', admin.create_user(current_setting('tests.grace_email'), 'password123', 'Ada Admin')::text, true);
select is(
  (select jsonb_build_object('name', p.name, 'kind', n.kind)
     from app.profiles p join app.nodes n on n.id = p.node_id where p.id = current_setting('tests.ada')::uuid),
  '{"name": "Ada Admin", "kind": "user"}'::jsonb,
  'create_user makes the same user, profile and node that register makes');

select is(admin.user_get(current_setting('tests.ada')::uuid) ->> 'email', current_setting('tests.ada_email'),
  'user_get: the account as Supabase Auth''s User object');
select is(tests.error_of(format('select admin.user_get(%L)', gen_random_uuid())), 'PT404 not_found', 'user_get: an unknown id is not found');
select is(jsonb_array_length(admin.users_list(1, 1) -> 'users'), 1, 'users_list: per_page users a page');
select ok((admin.users_list(1, 1) ->> 'total')::int >= 2, 'users_list: the total of every account');
select is(tests.error_of('select admin.users_list(0, 10)'), 'PT400 validation_error', 'users_list: page 0 is refused');
select set_config('tests.gone', admin.create_user('gone-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', 'password123')::text, true);
select is(admin.user_delete(current_setting('tests.gone')::uuid) ->> 'user_id', current_setting('tests.gone'), 'user_delete deletes the account as delete_user does');
select is(tests.error_of(format('select admin.user_delete(%L)', current_setting('tests.gone'))), 'PT404 not_found', 'user_delete: an id no longer there is not found');

select set_config('tests.made_email', 'made-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select set_config('tests.made', admin.user_create(current_setting('tests.made_email'), null, '{"name": "Made", "drop": null}'::jsonb) ->> 'id', true);
select is(admin.user_get(current_setting('tests.made')::uuid) -> 'user_metadata', '{"name": "Made"}'::jsonb,
  'user_create: user_metadata merged as PUT /auth/v1/user merges it (a null key is not kept)');
select ok((select password_hash is null from identity.users where id = current_setting('tests.made')::uuid),
  'user_create without a hash: an account that signs in after a set-password link');
select is(tests.error_of(format('select admin.user_create(%L)', upper(current_setting('tests.made_email')))), 'PT409 email_taken',
  'user_create: a taken address (in any case) is refused');
select is(tests.error_of(format('select admin.user_update(%L, %L, null, %L::jsonb)', current_setting('tests.made'), current_setting('tests.ada_email'), '{"name": "Changed"}')),
  'PT409 email_taken', 'user_update: another account''s address is refused');
select is(admin.user_get(current_setting('tests.made')::uuid) -> 'user_metadata', '{"name": "Made"}'::jsonb,
  'user_update is all or nothing: the refused call merged no metadata');
select is(tests.error_of(format('select admin.user_update(%L, null, %L)', current_setting('tests.made'), 'not-a-hash')),
  'PT400 invalid_password_hash', 'user_update: only a bcrypt hash the gateway made is a password');
select private.start_session(current_setting('tests.made')::uuid);
select is(
  (select jsonb_build_object('email', u ->> 'email', 'name', u -> 'user_metadata' ->> 'name')
     from admin.user_update(current_setting('tests.made')::uuid, 'Renamed-' || current_setting('tests.made_email'),
                            identity.hash_password('a new password'), '{"name": "Renamed"}'::jsonb) u),
  jsonb_build_object('email', lower('renamed-' || current_setting('tests.made_email')), 'name', 'Renamed'),
  'user_update: the address at once (normalised), the password and the metadata in one call');
select is((select name from app.profiles where id = current_setting('tests.made')::uuid), lower('renamed-' || split_part(current_setting('tests.made_email'), '@', 1)),
  'user_update: a name derived from the old address is derived from the new one');
select is((select count(*)::int from identity.refresh_tokens where user_id = current_setting('tests.made')::uuid and revoked_at is null), 0,
  'user_update with a password ends every session of the account');
select is(tests.error_of(format('select admin.user_update(%L, null, null, %L::jsonb)', gen_random_uuid(), '{}')), 'PT404 not_found',
  'user_update: an unknown id is not found');

-- Communities ------------------------------------------------------------------

select set_config('tests.runners',
  admin.create_community('Runners', 'We run', array['sport', 'outdoor'], current_setting('tests.ada_email'))::text, true);
select is(
  (select jsonb_build_object('name', c.name, 'description', c.description, 'tags', c.tags, 'member_count', c.member_count,
                             'kind', n.kind, 'role', m.role)
     from app.communities c join app.nodes n on n.id = c.node_id
     join app.community_members m on m.community_id = c.id
     join app.profiles p on p.node_id = m.member_node_id
    where c.id = current_setting('tests.runners')::uuid and p.id = current_setting('tests.ada')::uuid),
  '{"name": "Runners", "description": "We run", "tags": ["sport", "outdoor"], "member_count": 1, "kind": "community", "role": "manager"}'::jsonb,
  'create_community with a manager: its node, the manager''s membership as manager, member_count 1');

select set_config('tests.solo', admin.create_community('Solo')::text, true);
select is(
  (select jsonb_build_object('member_count', member_count, 'tags', tags, 'is_sandbox', is_sandbox, 'is_draft', is_draft)
     from app.communities where id = current_setting('tests.solo')::uuid),
  '{"member_count": 0, "tags": [], "is_sandbox": false, "is_draft": false}'::jsonb,
  'create_community without a manager: no member, no tags, neither sandbox nor draft');
select set_config('tests.ghost', 'ghost-' || gen_random_uuid(), true);
select throws_ok(
  format('select admin.create_community(%L, null, %L, %L)', current_setting('tests.ghost'), '{}', 'nobody@example.com'),
  'P0002', null, 'create_community with an unknown manager is P0002');
select is((select count(*)::int from app.communities where name = current_setting('tests.ghost')), 0, 'and creates nothing');

-- Managers -----------------------------------------------------------------------

select set_config('tests.chess', admin.create_community('Chess', null, '{}', current_setting('tests.ada_email'))::text, true);
select lives_ok(
  format('select admin.add_manager(%L, %L)', current_setting('tests.chess'), current_setting('tests.grace_email')),
  'add_manager joins a non-member as manager');
select lives_ok(
  format('select admin.add_manager(%L, %L)', current_setting('tests.chess'), current_setting('tests.grace_email')),
  'add_manager again changes nothing (idempotent)');
select is((select member_count from app.communities where id = current_setting('tests.chess')::uuid), 2, 'the community has two members');
select is(
  (select array_agg(role::text) from app.community_members where community_id = current_setting('tests.chess')::uuid),
  array['manager', 'manager'], 'both managers');
select throws_ok(
  format('select admin.add_manager(%L, %L)', gen_random_uuid(), current_setting('tests.grace_email')),
  'P0002', null, 'add_manager for an unknown community is P0002');

-- Plans ---------------------------------------------------------------------------

select admin.set_subscription(current_setting('tests.grace_email'), 'premium');
select is(
  (select jsonb_build_object('max_hats', s.max_hats, 'is_premium', s.is_premium)
     from app.profiles p join app.subscription_plans s on s.id = p.subscription_type where p.id = current_setting('tests.grace')::uuid),
  '{"max_hats": 10, "is_premium": true}'::jsonb,
  'set_subscription changes the plan, and with it max_hats');
select throws_ok(
  format('select admin.set_subscription(%L, %L)', current_setting('tests.grace_email'), 'gold'),
  'PT400', null, 'set_subscription to an unknown plan is PT400');
select throws_ok($$select admin.set_subscription('nobody@example.com', 'basic')$$, 'P0002', null, 'set_subscription of an unknown user is P0002');

-- Community flags --------------------------------------------------------------------

select set_config('tests.flags', admin.create_community('Flags')::text, true);
select admin.set_community_flags(current_setting('tests.flags')::uuid, true, null);
select is(
  (select jsonb_build_object('is_sandbox', is_sandbox, 'is_draft', is_draft) from app.communities where id = current_setting('tests.flags')::uuid),
  '{"is_sandbox": true, "is_draft": false}'::jsonb, 'set_community_flags sets sandbox; a null draft leaves it');
select admin.set_community_flags(current_setting('tests.flags')::uuid, false, true);
select is(
  (select jsonb_build_object('is_sandbox', is_sandbox, 'is_draft', is_draft) from app.communities where id = current_setting('tests.flags')::uuid),
  '{"is_sandbox": false, "is_draft": true}'::jsonb, 'set_community_flags sets both');
select throws_ok(
  format('select admin.set_community_flags(%L, true, true)', gen_random_uuid()),
  'P0002', null, 'set_community_flags of an unknown community is P0002');

-- Venues and events --------------------------------------------------------------------

select set_config('tests.events', admin.create_community('Events')::text, true);
select set_config('tests.hall', admin.create_venue('The Hall', '1 Main St', 52.5, 13.4)::text, true);
select set_config('tests.meetup',
  admin.create_event(current_setting('tests.events')::uuid, 'Meetup', '2030-01-01T18:00:00Z', '2030-01-01T20:00:00Z',
                     current_setting('tests.hall')::uuid, 'Talks')::text, true);
select is(
  (select jsonb_build_object('title', e.title, 'location', e.location, 'venue_node_id', e.venue_node_id, 'kind', n.kind, 'venue_kind', vn.kind)
     from app.events e join app.nodes n on n.id = e.node_id join app.nodes vn on vn.id = e.venue_node_id
    where e.id = current_setting('tests.meetup')::uuid),
  jsonb_build_object('title', 'Meetup', 'location', 'The Hall', 'venue_node_id', current_setting('tests.hall')::uuid,
                     'kind', 'event', 'venue_kind', 'venue'),
  'create_venue and create_event: nodes for both, the location taken from the venue');
select matches(
  (select shortlink from app.events where id = current_setting('tests.meetup')::uuid), '^[A-Za-z0-9]{8}$',
  'the event has a shortlink of 8 letters and digits');
select throws_ok(
  format('select admin.create_event(%L, %L, now())', gen_random_uuid(), 'x'),
  'P0002', null, 'create_event in an unknown community is P0002');
select throws_ok(
  format('select admin.create_event(%L, %L, now(), null, %L)', current_setting('tests.events'), 'x', gen_random_uuid()),
  'P0002', null, 'create_event at an unknown venue is P0002');
select throws_ok(
  format('select admin.create_event(%L, %L, %L, %L)', current_setting('tests.events'), 'x', '2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z'),
  'PT400', null, 'create_event ending before it starts is PT400');

select set_config('tests.many', admin.create_community('Many events')::text, true);
select count(*) from (
  select admin.create_event(current_setting('tests.many')::uuid, 'e' || i, now()) from generate_series(1, 300) i) made;
select is(
  (select jsonb_build_object('n', count(*), 'd', count(distinct shortlink)) from app.events where community_id = current_setting('tests.many')::uuid),
  '{"n": 300, "d": 300}'::jsonb, 'shortlinks are unique across 300 events');

-- storage_collect: the bytes of a deleted object wait 10 minutes; due_now makes them due at once, and the job is queued now.
select set_config('tests.garbage', 'objects/' || gen_random_uuid(), true);
insert into app.storage_garbage (storage_key) values (current_setting('tests.garbage'));
select ok((select collect_after > now() from app.storage_garbage where storage_key = current_setting('tests.garbage')),
  'a deleted object''s bytes wait for their collect_after (10 minutes)');
select cmp_ok(admin.storage_collect(true), '>=', 1, 'storage_collect(due_now => true) counts the keys due');
select ok((select collect_after <= now() from app.storage_garbage where storage_key = current_setting('tests.garbage')),
  'with due_now, the key is due at once');
select is((select count(*)::integer from graphile_worker.jobs where key = 'cron_storage_collect' and run_at <= now() and attempts = 0), 1,
  'the storage_collect job is queued to run now (in place of the crontab''s next one)');

select * from finish();
rollback;
