-- Connections: a user's notes about people they met, owned by the user's
-- node. Creating through api.connection_create (defaults and refusals), the
-- hat rules (mine must be mine, theirs must be theirs, whatever the insert
-- path), changing only notes, strength and tags, the limits, and row-level
-- security: nobody reads or changes another user's connections.
begin;
select plan(28);

select tests.create_user('ann');
select tests.create_user('ben');
select tests.create_user('cal');
select set_config('tests.community', admin.create_community('Connectors')::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'meetup', now() - interval '1 hour')::text, true);
select set_config('tests.event_node', (select node_id::text from app.events where id = current_setting('tests.event')::uuid), true);

select tests.authenticate_as('ben');
select set_config('tests.ben_hat', (select id::text from api.hat_create('ben at work', 'professional')), true);
select tests.authenticate_as('ann');
select set_config('tests.ann_hat', (select id::text from api.hat_create('ann at work', 'professional')), true);

-- Creating ------------------------------------------------------------------

select is(
  (select connection_type || ' ' || owner_node_id || ' ' || cardinality(tags) from api.connection_create(tests.node_id('ben'))),
  'async ' || tests.node_id('ann') || ' 0', 'connection_create: without an event it is async, owned by the caller''s node');
select set_config('tests.at_event', (select id::text from api.connection_create(tests.node_id('ben'), null, current_setting('tests.event_node')::uuid,
  current_setting('tests.ann_hat')::uuid, current_setting('tests.ben_hat')::uuid, 'met at the meetup', 'strong', array['rust'])), true);
select results_eq(
  format('select connection_type, event_id, my_hat_id, their_hat_id, strength from api.connection_get(%L)', current_setting('tests.at_event')),
  format('values (%L, %L::uuid, %L::uuid, %L::uuid, %L)', 'in_event', current_setting('tests.event'), current_setting('tests.ann_hat'),
         current_setting('tests.ben_hat'), 'strong'),
  'connection_create: with an event (by node id) it is in_event, with both hats');
select throws_ok(
  format('select api.connection_create(%L)', gen_random_uuid()),
  'PT422', 'target node not found', 'connection_create: an unknown target node is PT422');
select throws_ok(
  format('select api.connection_create(%L, null, %L)', tests.node_id('ben'), gen_random_uuid()),
  'PT422', 'event not found', 'connection_create: an unknown event is PT422');
select throws_ok(
  format('select api.connection_create(%L, null, null, %L)', tests.node_id('cal'), current_setting('tests.ben_hat')),
  'PT422', 'my_hat_id is not one of your hats', 'connection_create: my_hat_id must be one of the caller''s hats');
select throws_ok(
  format('select api.connection_create(%L, null, null, null, %L)', tests.node_id('cal'), current_setting('tests.ann_hat')),
  'PT422', 'their_hat_id is not a hat of the target user', 'connection_create: their_hat_id must be one of the target''s hats');
select throws_ok(
  format('select api.connection_create(%L, %L)', tests.node_id('cal'), 'online'),
  '23514', null, 'connection_create: connection_type is in_event, post_event or async');
select throws_ok(
  format('select api.connection_create(%L, null, null, null, null, null, %L)', tests.node_id('cal'), 'lukewarm'),
  '23514', null, 'connection_create: strength is weak, medium or strong');
select throws_ok(
  format('select api.connection_create(%L, tags => %L)', tests.node_id('cal'), array(select 't' || g from generate_series(1, 51) g)),
  '23514', null, 'connection_create: at most 50 tags');
select throws_ok(
  format('select api.connection_create(%L, notes => %L)', tests.node_id('cal'), repeat('n', 5001)),
  '23514', null, 'connection_create: notes of at most 5000 characters');

-- Changing and listing ------------------------------------------------------

select is(
  (select notes || ' ' || strength || ' ' || array_to_string(tags, ',')
     from api.connection_update(current_setting('tests.at_event')::uuid, '{"strength": "medium", "tags": ["go", "sql"]}')),
  'met at the meetup medium go,sql', 'connection_update: changes only the keys given');
select is(
  (select strength is null and notes is null from api.connection_update(current_setting('tests.at_event')::uuid, '{"strength": null, "notes": null}')),
  true, 'connection_update: null clears a field');
select throws_ok(
  format('select api.connection_update(%L, %L)', gen_random_uuid(), '{"notes": "x"}'),
  'PT404', 'connection not found', 'connection_update: an unknown connection is PT404');
select is(
  (select array_agg(id::text) from api.event_connections(current_setting('tests.event')::uuid)),
  array[current_setting('tests.at_event')], 'event_connections: the caller''s connections made at the event');
select is((select count(*)::int from api.connections_list()), 2, 'connections_list: the caller''s two connections');

-- Row-level security ----------------------------------------------------------

select tests.authenticate_as('ben');
select lives_ok(format('select api.connection_create(%L)', tests.node_id('ann')), 'ben makes his own connection');
select is((select count(*)::int from app.connections), 1, 'ben reads only his own connection');
select is((select count(*)::int from api.event_connections(current_setting('tests.event')::uuid)), 0,
  'event_connections: not ann''s, though ben is their target');
select throws_ok(
  format('select api.connection_get(%L)', current_setting('tests.at_event')),
  'PT404', 'connection not found', 'connection_get: another user''s connection is not found');
select throws_ok(
  format('select api.connection_update(%L, %L)', current_setting('tests.at_event'), '{"notes": "mine now"}'),
  'PT404', 'connection not found', 'connection_update: nor can it be changed');
select throws_ok(
  format('insert into app.connections (owner_node_id, target_node_id) values (%L, %L)', tests.node_id('ann'), tests.node_id('cal')),
  '42501', 'new row violates row-level security policy for table "connections"', 'ben cannot create a connection owned by ann');
select tests.authenticate_as('ann');
select throws_ok(
  format('update app.connections set owner_node_id = %L where id = %L', tests.node_id('ben'), current_setting('tests.at_event')),
  '42501', 'permission denied for table connections', 'the owner cannot hand a connection over (owner_node_id is not updatable)');

-- Row-level security between two users, and tags bounded in the table -------------

reset role;
select tests.create_user('con_alice');
select tests.create_user('con_bob');
select tests.authenticate_as('con_alice');
select set_config('tests.mine', (select id::text from api.connection_create(tests.node_id('con_bob'))), true);
select tests.authenticate_as('con_bob');
select api.connection_create(tests.node_id('con_alice'));
select tests.authenticate_as('con_alice');
select is(
  (select jsonb_agg(jsonb_build_object('id', id, 'owner_node_id', owner_node_id)) from app.connections),
  jsonb_build_array(jsonb_build_object('id', current_setting('tests.mine')::uuid, 'owner_node_id', tests.node_id('con_alice'))),
  'a user reads only their own connections');
select tests.authenticate_as('con_bob');
select throws_ok(
  format('insert into app.connections (owner_node_id, target_node_id) values (%L, %L)', tests.node_id('con_alice'), tests.node_id('con_bob')),
  '42501', null, 'a user cannot create a connection owned by someone else');
with touched as (update app.connections set notes = 'x' where id = current_setting('tests.mine')::uuid returning 1)
select is((select count(*)::int from touched), 0, 'nor change someone else''s');
select throws_ok(format('select api.connection_get(%L)', current_setting('tests.mine')), 'PT404', null, 'nor read it through connection_get (PT404)');
select tests.authenticate_as('con_alice');
select throws_ok(
  format('update app.connections set owner_node_id = %L where id = %L', tests.node_id('con_bob'), current_setting('tests.mine')),
  '42501', null, 'the owner column cannot be changed, even by the owner');
reset role;
select throws_ok(
  format('insert into app.connections (owner_node_id, target_node_id, connection_type, tags) values (%L, %L, %L, array[repeat(%L, 5001)])',
         tests.node_id('con_alice'), tests.node_id('con_bob'), 'async', 'x'),
  '23514', null, 'a tag of 5001 characters is refused whatever writes it');

select * from finish();
rollback;
