-- Storage: the buckets, who owns which folder (users, managers of a
-- community, managers of an event's community), what an upload is checked
-- for before a byte is read (bucket, path, right to write, existing object,
-- size, quota, rate), the object appearing only when its upload finishes,
-- the bucket's rules and the quota held by triggers whatever the path,
-- row-level security between users, signed URLs (made, tampered, expired,
-- ended with the signer's credentials), garbage, expiry and purge, and the
-- images of profiles, communities and events.
begin;
select plan(103);

select tests.create_user('st_alice');
select tests.create_user('st_bob');
select tests.create_user('st_manager');
select set_config('tests.community', admin.create_community('Storage club', null, '{}', tests.email('st_manager'))::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'Storage night', now() + interval '1 day')::text, true);

-- Begins an upload as the current role and finishes it as the gateway (the owner), as the gateway does.
create function pg_temp.begin_upload(bucket text, path text, upsert boolean default false, size bigint default 10)
  returns text language sql as $$
    select upload_id::text || ' ' || storage_key from api.storage_upload_begin(bucket, path, upsert, size) $$;
create function pg_temp.finish(started text, size bigint default 10, content_type text default 'image/png', width integer default 1)
  returns jsonb language sql as $$
    select private.storage_upload_finish(split_part(started, ' ', 1)::uuid, size, '"etag"', content_type, null, null, width, width) $$;
grant execute on function pg_temp.begin_upload(text,text,boolean,bigint) to authenticated;

-- The buckets ------------------------------------------------------------------

select results_eq(
  $$select id, public, folder_owner, file_size_limit, images, download_as_attachment from app.storage_buckets
     where id in ('attachments', 'avatars', 'community-images', 'event-images') order by id$$,
  $$values ('attachments', false, 'user', 26214400::bigint, false, true),
           ('avatars', true, 'user', 5242880::bigint, true, false),
           ('community-images', true, 'community', 10485760::bigint, true, false),
           ('event-images', true, 'event', 10485760::bigint, true, false)$$,
  'the migrations make avatars (public, 5 MB images), community-images and event-images (public, 10 MB images) and attachments (private, 25 MB, any type, served as attachments)');

-- Who owns a folder -------------------------------------------------------------

select ok(private.storage_folder_owned('avatars', tests.user_id('st_alice') || '/me.png', tests.user_id('st_alice')),
  'a user owns the avatars folder named by their id');
select ok(not private.storage_folder_owned('avatars', tests.user_id('st_bob') || '/me.png', tests.user_id('st_alice')),
  'not another user''s');
select ok(not private.storage_folder_owned('avatars', upper(tests.user_id('st_alice')::text) || '/me.png', tests.user_id('st_alice')),
  'the folder is the id in canonical lower case only');
select ok(not private.storage_folder_owned('avatars', tests.user_id('st_alice')::text, tests.user_id('st_alice')),
  'an object is inside a folder (the id alone names none)');
select ok(private.storage_folder_owned('community-images', current_setting('tests.community') || '/logo.png', tests.user_id('st_manager')),
  'a manager owns the community''s folder in community-images');
select ok(not private.storage_folder_owned('community-images', current_setting('tests.community') || '/logo.png', tests.user_id('st_alice')),
  'a non-manager does not');
select ok(private.storage_folder_owned('event-images', current_setting('tests.event') || '/cover.png', tests.user_id('st_manager')),
  'a manager of the event''s community owns the event''s folder in event-images');
select ok(not private.storage_folder_owned('event-images', current_setting('tests.event') || '/cover.png', tests.user_id('st_bob')),
  'others do not');
select ok(not private.storage_folder_owned('avatars', tests.user_id('st_alice') || '/me.png', null), 'nobody signed in owns nothing');

-- Beginning an upload: everything is checked before a byte is read ---------------

select tests.authenticate_as('st_alice');
select is(tests.error_of($$select pg_temp.begin_upload('nope', 'a/b.png')$$), 'PT404 bucket_not_found', 'an unknown bucket: PT404 bucket_not_found');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L)$$, tests.user_id('st_alice') || '/../x.png')),
  'PT400 invalid_key', 'a .. segment: PT400 invalid_key');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L)$$, tests.user_id('st_alice') || '//x.png')),
  'PT400 invalid_key', 'an empty segment: PT400 invalid_key');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L)$$, tests.user_id('st_alice') || E'/x\n.png')),
  'PT400 invalid_key', 'a control character: PT400 invalid_key');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L)$$, tests.user_id('st_bob') || '/me.png')),
  'PT403 storage_access_denied', 'another user''s folder: PT403 storage_access_denied');
select is(tests.error_of(format($$select pg_temp.begin_upload('community-images', %L)$$, current_setting('tests.community') || '/logo.png')),
  'PT403 storage_access_denied', 'a community folder, not being its manager: PT403 storage_access_denied');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L, false, 5242881)$$, tests.user_id('st_alice') || '/big.png')),
  'PT413 object_too_large', 'a declared size over the bucket''s limit: PT413 object_too_large');
select is(tests.error_of(format($$select pg_temp.begin_upload('attachments', %L, false, 104857601)$$, tests.user_id('st_alice') || '/huge.bin')),
  'PT413 object_too_large', 'the bucket''s limit first (25 MB)');
reset role;
select tests.authenticate_as('st_alice');
select set_config('tests.started', pg_temp.begin_upload('avatars', tests.user_id('st_alice') || '/me.png'), false);
reset role;
select is((select count(*)::integer from app.storage_objects where owner_id = tests.user_id('st_alice')), 0,
  'a begun upload is no object yet');
select is((select kind || ' ' || (expires_at > now() + interval '59 minutes')::text from app.storage_uploads
            where id = split_part(current_setting('tests.started'), ' ', 1)::uuid), 'direct true',
  'it is registered as an upload under way, expiring in an hour');
select ok(split_part(current_setting('tests.started'), ' ', 2) ~ '^objects/[0-9a-f-]{36}$', 'its bytes get a fresh key');
select set_config('tests.avatar', (pg_temp.finish(current_setting('tests.started')) ->> 'id'), false);
select is((select name::text from app.storage_objects where id = current_setting('tests.avatar')::uuid), tests.user_id('st_alice') || '/me.png',
  'the finish makes the object, in one transaction');
select is((select bytes || '/' || objects from app.storage_usage where user_id = tests.user_id('st_alice')), '10/1',
  'the owner''s usage counts it');
select is(tests.error_of(format($$select pg_temp.finish(%L)$$, current_setting('tests.started'))), 'PT404 upload_not_found',
  'an upload finishes once');

select tests.authenticate_as('st_alice');
select is(tests.error_of(format($$select pg_temp.begin_upload('avatars', %L)$$, tests.user_id('st_alice') || '/me.png')),
  'PT409 object_exists', 'a taken path without upsert: PT409 object_exists');
select lives_ok(format($$select pg_temp.begin_upload('avatars', %L, true)$$, tests.user_id('st_alice') || '/me.png'), 'with upsert it begins');
reset role;

-- Two uploads to one path: the second to finish without upsert is refused, its bytes are garbage.
select tests.authenticate_as('st_alice');
select set_config('tests.race_a', pg_temp.begin_upload('attachments', tests.user_id('st_alice') || '/race.txt'), false);
select set_config('tests.race_b', pg_temp.begin_upload('attachments', tests.user_id('st_alice') || '/race.txt'), false);
reset role;
select lives_ok($$select pg_temp.finish(current_setting('tests.race_a'), 10, 'text/plain', null)$$, 'the first to finish makes the object');
select is(tests.error_of($$select pg_temp.finish(current_setting('tests.race_b'), 10, 'text/plain', null)$$), 'PT409 object_exists',
  'the other is refused (PT409 object_exists)');
select private.storage_upload_abort(split_part(current_setting('tests.race_b'), ' ', 1)::uuid, split_part(current_setting('tests.race_b'), ' ', 2));
select is((select count(*)::integer from app.storage_garbage where storage_key = split_part(current_setting('tests.race_b'), ' ', 2)), 1,
  'the refused upload''s bytes go to the garbage (abort)');
select private.storage_upload_abort(split_part(current_setting('tests.race_a'), ' ', 1)::uuid, split_part(current_setting('tests.race_a'), ' ', 2));
select is((select count(*)::integer from app.storage_garbage where storage_key = split_part(current_setting('tests.race_a'), ' ', 2)), 0,
  'an abort never takes the bytes of a visible object (a finish whose answer was lost)');

-- Upsert replaces: the old bytes wait for the collector.
select set_config('tests.old_key', (select storage_key from app.storage_objects where id = current_setting('tests.avatar')::uuid), false);
select tests.authenticate_as('st_alice');
select set_config('tests.replace', pg_temp.begin_upload('avatars', tests.user_id('st_alice') || '/me.png', true, 30), false);
reset role;
select is((pg_temp.finish(current_setting('tests.replace'), 30) ->> 'id'), current_setting('tests.avatar'),
  'an upsert keeps the object''s id');
select ok((select collect_after > now() from app.storage_garbage where storage_key = current_setting('tests.old_key')),
  'the replaced bytes go to the garbage, collected after a grace period for downloads under way');
select is((select bytes::integer from app.storage_usage where user_id = tests.user_id('st_alice')), 40,
  'usage: the replacement''s size (30) and the attachment (10)');

-- The bucket's rules and the quota, whatever the path --------------------------

select tests.authenticate_as('st_alice');
select set_config('tests.not_image', pg_temp.begin_upload('avatars', tests.user_id('st_alice') || '/doc.png'), false);
select set_config('tests.too_big', pg_temp.begin_upload('avatars', tests.user_id('st_alice') || '/big.png', false, null), false);
select set_config('tests.wrong_type', pg_temp.begin_upload('avatars', tests.user_id('st_alice') || '/x.txt'), false);
reset role;
select is(tests.error_of($$select pg_temp.finish(current_setting('tests.not_image'), 10, 'image/png', null)$$), 'PT415 invalid_mime_type',
  'an image bucket holds only images the gateway processed (a width)');
select is(tests.error_of($$select pg_temp.finish(current_setting('tests.too_big'), 5242881)$$), 'PT413 object_too_large',
  'the size limit holds at the finish too (an upload without Content-Length)');
select is(tests.error_of($$select pg_temp.finish(current_setting('tests.wrong_type'), 10, 'text/plain')$$), 'PT415 invalid_mime_type',
  'and the bucket''s types');

select admin.storage_set_limits(tests.email('st_alice'), 100, 1000);
select tests.authenticate_as('st_alice');
select is(tests.error_of(format($$select pg_temp.begin_upload('attachments', %L, false, 61)$$, tests.user_id('st_alice') || '/q.bin')),
  'PT413 quota_exceeded', 'a declared size past the quota: PT413 quota_exceeded before a byte is read');
select set_config('tests.quota', pg_temp.begin_upload('attachments', tests.user_id('st_alice') || '/q.bin', false, null), false);
reset role;
select is(tests.error_of($$select pg_temp.finish(current_setting('tests.quota'), 61, 'application/octet-stream')$$), 'PT413 quota_exceeded',
  'the real size past the quota at the finish: PT413 quota_exceeded (the usage trigger)');
select admin.storage_set_limits(tests.email('st_alice'), null, 2);
update app.storage_usage set window_start = null where user_id = tests.user_id('st_alice');
select tests.authenticate_as('st_alice');
select lives_ok(format($$select pg_temp.begin_upload('attachments', %L)$$, tests.user_id('st_alice') || '/r1'), 'uploads per minute: the first');
select lives_ok(format($$select pg_temp.begin_upload('attachments', %L)$$, tests.user_id('st_alice') || '/r2'), 'the second');
select is(tests.error_of(format($$select pg_temp.begin_upload('attachments', %L)$$, tests.user_id('st_alice') || '/r3')), 'PT429 too_many_uploads',
  'past the limit: PT429 too_many_uploads');
reset role;
select admin.storage_set_limits(tests.email('st_alice'), null, null);

-- Row-level security between users -----------------------------------------------

select tests.authenticate_as('st_bob');
select is((select count(*)::integer from app.storage_objects), 0, 'another user sees none of alice''s objects');
select is(api.storage_objects_list('attachments', tests.user_id('st_alice')::text, 100, 0, '', 'name', 'asc'), '[]'::jsonb,
  'nor lists her folder');
select is(api.storage_objects_remove('attachments', array[tests.user_id('st_alice') || '/race.txt']), '[]'::jsonb,
  'nor removes her objects (nothing there for him)');
select is(tests.error_of(format($$select api.storage_object_move('attachments', %L, null, %L)$$,
    tests.user_id('st_alice') || '/race.txt', tests.user_id('st_bob') || '/mine.txt')),
  'PT404 object_not_found', 'nor moves them into his folder');
select is(tests.error_of(format($$select * from api.storage_object_get('attachments', %L)$$, tests.user_id('st_alice') || '/race.txt')),
  'PT404 object_not_found', 'nor reads her private attachment: not found, as if absent');
select is((select size from api.storage_object_get('avatars', tests.user_id('st_alice') || '/me.png')), 30::bigint,
  'but reads her avatar (a public bucket)');
select throws_ok($$insert into app.storage_objects (bucket_id, name, storage_key, size, content_type, etag)
                   values ('attachments', 'x/y', 'objects/forged', 1, 'text/plain', 'e')$$,
  '42501', null, 'no request role inserts an object row (its bytes key is the gateway''s)');
select throws_ok(format($$update app.storage_objects set storage_key = 'objects/stolen' where name like %L$$, tests.user_id('st_bob') || '%'),
  '42501', null, 'nor changes where an object''s bytes are');
select tests.authenticate_as_anon();
select is((select size from api.storage_object_get('avatars', tests.user_id('st_alice') || '/me.png')), 30::bigint,
  'anyone reads a public bucket''s object');
select is(tests.error_of(format($$select * from api.storage_object_get('attachments', %L, true)$$, tests.user_id('st_alice') || '/race.txt')),
  'PT404 object_not_found', 'the public routes serve public buckets only');
reset role;

select tests.authenticate_as('st_alice');
select is(jsonb_array_length(api.storage_objects_list('attachments', tests.user_id('st_alice')::text, 100, 0, '', 'name', 'asc')), 1,
  'the owner lists her folder');
select is(api.storage_objects_list('attachments', '', 100, 0, '', 'name', 'asc') -> 0 ->> 'name', tests.user_id('st_alice')::text,
  'the bucket''s root shows her folder (id null)');
select is(tests.error_of(format($$select api.storage_object_move('attachments', %L, null, %L)$$,
    tests.user_id('st_alice') || '/race.txt', tests.user_id('st_bob') || '/gift.txt')),
  'PT403 storage_access_denied', 'a move into another user''s folder: PT403 storage_access_denied');
select lives_ok(format($$select api.storage_object_move('attachments', %L, null, %L)$$,
    tests.user_id('st_alice') || '/race.txt', tests.user_id('st_alice') || '/moved/race.txt'), 'a move within her folder');
select is(tests.error_of(format($$select api.storage_object_move('attachments', %L, 'avatars', %L)$$,
    tests.user_id('st_alice') || '/moved/race.txt', tests.user_id('st_alice') || '/race.png')),
  'PT415 invalid_mime_type', 'a move into an image bucket of what is not an image: PT415');
select is(tests.error_of(format($$select * from api.storage_object_copy_begin('attachments', %L, 'avatars', %L, false)$$,
    tests.user_id('st_alice') || '/moved/race.txt', tests.user_id('st_alice') || '/copy.png')),
  'PT415 invalid_mime_type', 'a copy neither');
reset role;

-- Signed URLs ------------------------------------------------------------------

select tests.authenticate_as('st_alice');
select set_config('tests.signed', api.storage_sign('attachments', array[tests.user_id('st_alice') || '/moved/race.txt', tests.user_id('st_alice') || '/none'], 60)::text, false);
select set_config('tests.upload_url', api.storage_sign_upload('attachments', tests.user_id('st_alice') || '/via-url.txt', false)::text, false);
select is(tests.error_of(format($$select api.storage_sign_upload('attachments', %L, false)$$, tests.user_id('st_bob') || '/x.txt')),
  'PT403 storage_access_denied', 'a signed upload URL only for a path the caller may write');
reset role;
select set_config('tests.token', split_part(current_setting('tests.signed')::jsonb -> 0 ->> 'signedURL', 'token=', 2), false);
select ok((current_setting('tests.signed')::jsonb -> 0 ->> 'signedURL') like '/object/sign/attachments/%/moved/race.txt?token=%',
  'a signed URL for a readable object');
select is(current_setting('tests.signed')::jsonb -> 1 ->> 'error', 'Either the object does not exist or you do not have access to it',
  'and an error for what is not there');
select tests.authenticate_as_anon();
select is((select size from api.storage_object_signed('attachments', tests.user_id('st_alice') || '/moved/race.txt', current_setting('tests.token'))),
  10::bigint, 'anyone with the URL reads the private object');
select is(tests.error_of(format($$select * from api.storage_object_signed('attachments', %L, %L)$$,
    tests.user_id('st_alice') || '/moved/race.txt', current_setting('tests.token') || 'x')),
  'PT400 invalid_signature', 'a tampered token: PT400 invalid_signature');
select is(tests.error_of(format($$select * from api.storage_object_signed('attachments', %L, %L)$$,
    tests.user_id('st_alice') || '/other.txt', current_setting('tests.token'))),
  'PT400 invalid_signature', 'a token for another path: PT400 invalid_signature');
select is(tests.error_of(format($$select * from api.storage_upload_begin_signed('attachments', %L, %L, 10)$$,
    tests.user_id('st_alice') || '/moved/race.txt', current_setting('tests.token'))),
  'PT400 invalid_signature', 'a download token does not upload');
reset role;
select set_config('tests.expired', private.storage_token(jsonb_build_object('scope', 'download',
  'url', 'attachments/' || tests.user_id('st_alice') || '/moved/race.txt', 'sub', tests.user_id('st_alice')), -1), false);
select tests.authenticate_as_anon();
select is(tests.error_of(format($$select * from api.storage_object_signed('attachments', %L, %L)$$,
    tests.user_id('st_alice') || '/moved/race.txt', current_setting('tests.expired'))),
  'PT400 signature_expired', 'an expired token: PT400 signature_expired');
select is((select file_size_limit from api.storage_upload_begin_signed('attachments', tests.user_id('st_alice') || '/via-url.txt',
    split_part(current_setting('tests.upload_url')::jsonb ->> 'url', 'token=', 2), 10)), 26214400::bigint,
  'a signed upload URL begins an upload without a credential');
reset role;
select is((select owner_id from app.storage_uploads where name = tests.user_id('st_alice') || '/via-url.txt'), tests.user_id('st_alice'),
  'as the user who signed it');
select private.end_credentials(tests.user_id('st_alice'));
select tests.authenticate_as_anon();
select is(tests.error_of(format($$select * from api.storage_object_signed('attachments', %L, %L)$$,
    tests.user_id('st_alice') || '/moved/race.txt', current_setting('tests.token'))),
  'PT400 signature_expired', 'a signed URL ends with its signer''s credentials (a password reset)');
reset role;

-- Security review round 5 ----------------------------------------------------------

-- A signed upload URL uploads once; an upload given up gives it back.
select tests.authenticate_as('st_bob');
select set_config('tests.once', api.storage_sign_upload('attachments', tests.user_id('st_bob') || '/once.txt', true)::text, false);
reset role;
select set_config('tests.once_begin', format($$select upload_id from api.storage_upload_begin_signed('attachments', %L, %L, 10)$$,
  tests.user_id('st_bob') || '/once.txt', split_part(current_setting('tests.once')::jsonb ->> 'url', 'token=', 2)), false);
select tests.authenticate_as_anon();
select lives_ok(current_setting('tests.once_begin'), 'a signed upload URL begins an upload');
select is(tests.error_of(current_setting('tests.once_begin')), 'PT409 signed_url_used', 'and no second one, upsert or not: PT409 signed_url_used');
reset role;
select private.storage_upload_abort(u.id, u.storage_key) from app.storage_uploads u where u.name = tests.user_id('st_bob') || '/once.txt';
select tests.authenticate_as_anon();
select lives_ok(current_setting('tests.once_begin'), 'an upload given up gives the token back');
reset role;
select set_config('tests.bob_token',
  private.storage_token(jsonb_build_object('scope', 'download', 'url', 'attachments/x', 'sub', tests.user_id('st_bob')), 60), false);
select private.storage_signed_urls_end(tests.user_id('st_bob'));
select is(tests.error_of(format($$select private.storage_token_claims(%L, 'download', 'attachments/x')$$, current_setting('tests.bob_token'))),
  'PT400 signature_expired', 'private.storage_signed_urls_end: what the user signed before is refused');
delete from app.storage_uploads where owner_id = tests.user_id('st_bob');

-- What uploads under way declared is reserved against the quota.
select admin.storage_set_limits(tests.email('st_bob'), 100, 1000);
select tests.authenticate_as('st_bob');
select set_config('tests.reserve', pg_temp.begin_upload('attachments', tests.user_id('st_bob') || '/r60.bin', false, 60), false);
select is(tests.error_of(format($$select pg_temp.begin_upload('attachments', %L, false, 41)$$, tests.user_id('st_bob') || '/r41.bin')),
  'PT413 quota_exceeded', 'a declared size is reserved while the upload is under way: 60 + 41 is past 100');
select lives_ok(format($$select pg_temp.begin_upload('attachments', %L, false, 40)$$, tests.user_id('st_bob') || '/r40.bin'), 'and 60 + 40 is not');
reset role;
select private.storage_upload_abort(split_part(current_setting('tests.reserve'), ' ', 1)::uuid, split_part(current_setting('tests.reserve'), ' ', 2));
select tests.authenticate_as('st_bob');
select lives_ok(format($$select pg_temp.begin_upload('attachments', %L, false, 60)$$, tests.user_id('st_bob') || '/r60-again.bin'),
  'an upload given up frees what it reserved');
reset role;
delete from app.storage_uploads where owner_id = tests.user_id('st_bob');
select admin.storage_set_limits(tests.email('st_bob'), null, 1000);
select tests.authenticate_as('st_bob');
select count(*) from (select api.storage_upload_begin('attachments', tests.user_id('st_bob') || '/open-' || i, false, 1, 'resumable')
                        from generate_series(1, 10) i) started;
select is(tests.error_of(format($$select api.storage_upload_begin('attachments', %L, false, 1, 'resumable')$$, tests.user_id('st_bob') || '/open-11')),
  'PT429 too_many_open_uploads', 'at most 10 resumable uploads open at once: PT429 too_many_open_uploads');
reset role;
delete from app.storage_uploads where owner_id = tests.user_id('st_bob');
select admin.storage_set_limits(tests.email('st_bob'), null, null);

-- The cache of transformations: bounded per object version and in all; misses counted per address.
select is(private.storage_render_begin('objects/r5', 'a.png', '203.0.113.1', 100, 2), '{}'::text[], 'a miss is recorded');
select is(private.storage_render_stored('objects/r5', 'a.png', 100, 1000), '{}'::text[], 'with its size');
select private.storage_render_begin('objects/r5', 'b.png', '203.0.113.2', 100, 2), private.storage_render_stored('objects/r5', 'b.png', 100, 1000);
update app.storage_renders set created_at = created_at - interval '1 minute' * (case variant when 'a.png' then 2 else 1 end) where storage_key = 'objects/r5';
select is(private.storage_render_begin('objects/r5', 'c.png', '203.0.113.3', 100, 2), array['renders/r5/a.png'],
  'past the variants of a version, its oldest is evicted');
select is(private.storage_render_stored('objects/r5', 'c.png', 950, 1000), array['renders/r5/b.png'],
  'past the budget in all, the oldest of any version is evicted');
select is((select array_agg(storage_key order by storage_key) from app.storage_garbage where storage_key like 'renders/r5/%'),
  array['renders/r5/a.png', 'renders/r5/b.png'], 'what is evicted waits in the garbage until the gateway deletes it');
select private.storage_render_begin('objects/r5', 'd' || i || '.png', '203.0.113.9', 2, 100) from generate_series(1, 2) i;
select is(tests.error_of($$select private.storage_render_begin('objects/r5', 'd3.png', '203.0.113.9', 2, 100)$$), 'PT429 too_many_renders',
  'past its transformations a minute, an address is refused: PT429 too_many_renders');
select private.storage_garbage_done(array['objects/r5']);
select is((select count(*)::integer from app.storage_renders where storage_key = 'objects/r5'), 0, 'a version''s bytes collected, its transformations are forgotten');

-- Images of profiles, communities and events -------------------------------------

select tests.authenticate_as('st_alice');
select ok((select avatar_url from api.profile_patch(jsonb_build_object('avatar_path', tests.user_id('st_alice') || '/me.png')))
            like '%/storage/v1/object/public/avatars/' || tests.user_id('st_alice') || '/me.png',
  'profile_patch: avatar_path of her own avatar; avatar_url is its public URL');
select is((select avatar_url from api.profile_get()), (select avatar_url from api.profile_patch('{}')), 'profile_get answers it too');
reset role;
select tests.authenticate_as('st_bob');
select is(tests.error_of(format($$select api.profile_patch(jsonb_build_object('avatar_path', %L))$$, tests.user_id('st_alice') || '/me.png')),
  'PT422 invalid_image_path', 'another user''s avatar is not his to use');
select is((select avatar_url from api.profile_patch('{"avatar_path": null}')), null, 'null clears it');
reset role;
delete from app.storage_objects where id = current_setting('tests.avatar')::uuid;
select tests.authenticate_as('st_alice');
select is((select avatar_url from api.profile_get()), null, 'a deleted avatar object clears the avatar');
reset role;

select tests.authenticate_as('st_manager');
select set_config('tests.logo', pg_temp.begin_upload('community-images', current_setting('tests.community') || '/logo.png'), false);
select set_config('tests.cover', pg_temp.begin_upload('event-images', current_setting('tests.event') || '/cover.png'), false);
reset role;
select pg_temp.finish(current_setting('tests.logo')), pg_temp.finish(current_setting('tests.cover'));
select tests.authenticate_as('st_manager');
select ok(api.community_update(current_setting('tests.community')::uuid, jsonb_build_object('image_path', current_setting('tests.community') || '/logo.png'))
            ->> 'image_url' like '%/storage/v1/object/public/community-images/%/logo.png',
  'community_update: a manager sets the image; image_url is its public URL');
select is(api.event_update(current_setting('tests.event')::uuid, jsonb_build_object('image_path', current_setting('tests.event') || '/cover.png'), 'https://x.test')
            ->> 'image_path', current_setting('tests.event') || '/cover.png',
  'event_update: a manager sets the event''s image; image_path is the object''s path');
select ok((select (api.event_page(e.shortlink, 'https://x.test') ->> 'og_image') like '%/storage/v1/render/image/public/event-images/%/cover.png?width=1200&height=630&resize=cover'
             from app.events e where e.id = current_setting('tests.event')::uuid),
  'the event page''s og:image is a 1200x630 transformation of it');
reset role;
select tests.authenticate_as('st_alice');
select is(tests.error_of(format($$select api.community_update(%L, '{"image_path": null}')$$, current_setting('tests.community'))),
  'PT403 not_community_manager', 'a member who does not manage the community may not');
select is(tests.error_of(format($$select api.event_update(%L, '{"image_path": null}', 'https://x.test')$$, current_setting('tests.event'))),
  'PT403 not_community_manager', 'nor change an event''s image');
reset role;

-- Garbage, expiry and purge ----------------------------------------------------

update app.storage_uploads set expires_at = now() - interval '1 second' where owner_id = tests.user_id('st_alice');
select ok(private.storage_uploads_expire() >= 1, 'expired uploads are forgotten');
select is((select count(*)::integer from app.storage_uploads where owner_id = tests.user_id('st_alice')), 0, 'none of hers is left');
select ok((select count(*) from private.storage_garbage_take(1000) g where g.storage_key = split_part(current_setting('tests.quota'), ' ', 2)) = 1,
  'their keys are garbage due now');
select private.storage_garbage_done(array[split_part(current_setting('tests.quota'), ' ', 2)]);
select is((select count(*)::integer from app.storage_garbage where storage_key = split_part(current_setting('tests.quota'), ' ', 2)), 0,
  'a collected key is forgotten');

select is((select count(*)::integer from graphile_worker.jobs where key = 'storage_purge:event:' || current_setting('tests.event')), 0,
  'no purge before the event goes');
delete from app.events where id = current_setting('tests.event')::uuid;
select is((select count(*)::integer from graphile_worker.jobs where key = 'storage_purge:event:' || current_setting('tests.event')), 1,
  'deleting an event queues the purge of its folder');
select is(private.storage_purge('event', current_setting('tests.event')::uuid), 1, 'which deletes its objects');
delete from identity.users where id = tests.user_id('st_alice');
select is((select count(*)::integer from graphile_worker.jobs where key = 'storage_purge:user:' || tests.user_id('st_alice')), 1,
  'deleting an account queues the purge of its folders');
select ok(private.storage_purge('user', tests.user_id('st_alice')) >= 1, 'which deletes its objects in every user bucket');
select is((select count(*)::integer from app.storage_objects where name like tests.user_id('st_alice') || '/%'), 0, 'none is left');

select * from finish();
rollback;
