-- Storage for the operator (the service-role key: role service_role, claims
-- with no user): private.storage_operator, the storage rule that recognises
-- it, uploads past the folder rules but not past the bucket's limits, the
-- bucket API (create, update, empty, delete; the built-in buckets stay),
-- refused to users; list v2.
begin;
select plan(29);

select tests.create_user('op_alice');
select tests.create_user('op_bob');

create function pg_temp.as_operator() returns void language sql as $$
  select set_config('request.jwt.claims', '{"role": "service_role"}', true), set_config('role', 'service_role', true) $$;
grant execute on function pg_temp.as_operator() to authenticated, service_role;

-- Who is the operator -------------------------------------------------------------

select ok(not private.storage_operator(), 'the database owner is not the operator');
select ok(not private.storage_folder_owned('attachments', tests.user_id('op_alice') || '/a.txt', null), 'no user owns nothing');
select tests.authenticate_as('op_alice');
select ok(not private.storage_operator(), 'a user is not the operator');
select is(tests.error_of($$select api.storage_bucket_create('alice-bucket', false, null, null)$$), 'PT403 storage_access_denied',
  'a user creates no bucket');
select is(tests.error_of($$select api.storage_bucket_delete('attachments')$$), 'PT403 storage_access_denied', 'nor deletes one');
select is(tests.error_of($$select api.storage_bucket_empty('attachments')$$), 'PT403 storage_access_denied', 'nor empties one');
select is(tests.error_of($$select api.storage_bucket_update('attachments', '{"public": true}')$$), 'PT403 storage_access_denied', 'nor changes one');
reset role;
select set_config('request.jwt.claims', '{"role": "service_role", "sub": "00000000-0000-0000-0000-000000000001"}', true);
select ok(not private.storage_operator(), 'claims of role service_role with a user are not the operator''s');

select pg_temp.as_operator();
select ok(private.storage_operator(), 'the service-role key''s claims are the operator''s');
select ok(private.storage_folder_owned('attachments', tests.user_id('op_alice') || '/a.txt', auth.uid()), 'who owns every folder');
select ok(private.storage_folder_owned('attachments', 'anywhere/a.txt', auth.uid()), 'and paths outside any user''s');
select ok(not private.storage_folder_owned('attachments', tests.user_id('op_alice') || '/a.txt', tests.user_id('op_bob')),
  'the rule for a named user is unchanged');

-- Buckets ---------------------------------------------------------------------------

select is(api.storage_bucket_create('op-receipts', false, 1024, array['text/plain']), '{"name": "op-receipts"}'::jsonb, 'the operator creates a bucket');
select is(api.storage_bucket_get('op-receipts') - 'created_at' - 'updated_at',
  '{"id": "op-receipts", "name": "op-receipts", "owner": "", "public": false, "file_size_limit": 1024, "allowed_mime_types": ["text/plain"]}'::jsonb,
  'private, with its limits');
reset role;
select is((select folder_owner from app.storage_buckets where id = 'op-receipts'), 'user', 'its folders are its users''');
select pg_temp.as_operator();
select is(tests.error_of($$select api.storage_bucket_create('op-receipts', false, null, null)$$), 'PT409 bucket_exists', 'once');
select is(tests.error_of($$select api.storage_bucket_create('Op Receipts', false, null, null)$$), 'PT400 invalid_bucket_name', 'with a valid id');
select is(tests.error_of($$select api.storage_bucket_create('op-x', false, 0, null)$$), 'PT400 invalid_bucket_limits', 'and sound limits');
select is(api.storage_bucket_create('op-default', true, null, null)->>'name', 'op-default', 'another');
select is(api.storage_bucket_get('op-default')->'file_size_limit', '52428800'::jsonb, 'without a size limit, 50 MB');
select lives_ok($$select api.storage_bucket_update('op-receipts', '{"public": true, "allowed_mime_types": null}')$$, 'the operator changes it');
select is(api.storage_bucket_get('op-receipts') - 'created_at' - 'updated_at',
  '{"id": "op-receipts", "name": "op-receipts", "owner": "", "public": true, "file_size_limit": 1024, "allowed_mime_types": null}'::jsonb,
  'what was named, and only that');
select is(tests.error_of($$select api.storage_bucket_update('avatars', '{"allowed_mime_types": ["text/plain"]}')$$), 'PT400 invalid_bucket_limits',
  'an image bucket keeps to image types');

-- Uploads past the folders, not past the limits
select is(tests.error_of($$select api.storage_upload_begin('op-receipts', 'shared/big.txt', false, 2048)$$), 'PT413 object_too_large',
  'the operator''s uploads keep to the size limit');
select set_config('tests.upload', (select u.upload_id::text from api.storage_upload_begin('op-receipts', 'shared/a.txt', false, 5) u), true);
reset role;
select lives_ok($$select private.storage_upload_finish(current_setting('tests.upload')::uuid, 5, '"e"', 'text/plain', null, null, null, null)$$,
  'and write outside any user''s folder (finished by the gateway)');
select pg_temp.as_operator();
select is((select owner_id from app.storage_objects where bucket_id = 'op-receipts' and name = 'shared/a.txt'), null::uuid, 'owned by no user');

select is(tests.error_of($$select api.storage_bucket_delete('op-receipts')$$), 'PT409 bucket_not_empty', 'a bucket with objects stays');
select is(api.storage_bucket_empty('op-receipts') || api.storage_bucket_delete('op-receipts'),
  '{"message": "Successfully deleted"}'::jsonb, 'emptied, it goes');
select is(tests.error_of($$select api.storage_bucket_delete('avatars')$$), 'PT409 bucket_builtin', 'the built-in buckets stay');

reset role;
select * from finish();
rollback;
