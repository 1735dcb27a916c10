-- =============================================================================
-- Storage: buckets, objects, uploads, signed URLs, quotas
-- =============================================================================
-- Files and images behind the Supabase Storage interface (/storage/v1). A
-- bucket says who owns an object's first folder (`{id}/...`: the user of that
-- id; the managers of that community; the managers of that event's
-- community), how large an object may be, which types it takes, and whether
-- anyone may read it (public) or only the folder's owners. That one rule,
-- private.storage_folder_owned, is both the row-level security of
-- app.storage_objects (list, remove, move as the caller) and the check of
-- the functions that write.
--
-- Bytes live in the gateway's byte store, under a fresh key for every
-- version. An upload is begun here (api.storage_upload_begin: the bucket, the
-- path, the caller's right to write it, the size limit, the quota and the
-- upload rate are checked before a byte is read) and recorded in
-- app.storage_uploads; the gateway writes the bytes, and the object appears
-- only in the transaction that finishes the upload
-- (private.storage_upload_finish), once its bytes are durable. An upload that
-- never finishes expires, and keys no object uses any more (replaced,
-- deleted, expired) wait in app.storage_garbage for the storage_collect job.
-- Deleting a user, a community or an event queues a storage_purge job that
-- deletes the objects of their folders.
--
-- Signed URLs are HS256 JWTs made and checked here with a key that never
-- leaves the database; a user's signed URLs end with their credentials
-- (a password reset).
--
-- Code: gateway/storage/routes/, gateway/storage/uploader.ts,
--   gateway/storage/downloads.ts, gateway/storage/jobs.ts
-- pgTAP: supabase/tests/storage.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.storage_buckets (
    id text NOT NULL,
    public boolean DEFAULT false NOT NULL,
    folder_owner text NOT NULL,
    file_size_limit bigint NOT NULL,
    allowed_mime_types text[],
    images boolean DEFAULT false NOT NULL,
    download_as_attachment boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT storage_buckets_allowed_mime_types_check CHECK (((cardinality(allowed_mime_types) >= 1) AND (cardinality(allowed_mime_types) <= 50))),
    CONSTRAINT storage_buckets_file_size_limit_check CHECK (((file_size_limit >= 1) AND (file_size_limit <= '5368709120'::bigint))),
    CONSTRAINT storage_buckets_folder_owner_check CHECK ((folder_owner = ANY (ARRAY['user'::text, 'community'::text, 'event'::text]))),
    CONSTRAINT storage_buckets_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'::text)),
    CONSTRAINT storage_buckets_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.storage_buckets IS 'Storage buckets (made by migrations, more by admin.storage_bucket_create): who owns their folders, size and type limits, public or private.';
ALTER TABLE app.storage_buckets ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_garbage (
    storage_key text NOT NULL,
    collect_after timestamp with time zone DEFAULT (now() + '00:10:00'::interval) NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    CONSTRAINT storage_garbage_pkey PRIMARY KEY (storage_key)
);
COMMENT ON TABLE app.storage_garbage IS 'Byte-store keys no object uses any more (replaced, deleted, orphaned uploads), with their transformations: deleted by the storage_collect job.';
ALTER TABLE app.storage_garbage ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_objects (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    bucket_id text NOT NULL,
    name text NOT NULL COLLATE pg_catalog."C",
    owner_id uuid,
    storage_key text NOT NULL,
    size bigint NOT NULL,
    content_type text NOT NULL,
    cache_control text DEFAULT 'max-age=3600'::text NOT NULL,
    etag text NOT NULL,
    width integer,
    height integer,
    user_metadata jsonb,
    version uuid DEFAULT gen_random_uuid() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT storage_objects_cache_control_check CHECK (((length(cache_control) >= 1) AND (length(cache_control) <= 255))),
    CONSTRAINT storage_objects_content_type_check CHECK (((length(content_type) >= 1) AND (length(content_type) <= 255))),
    CONSTRAINT storage_objects_name_check CHECK (((length(name) BETWEEN 3 AND 1024) AND (name ~ '^[A-Za-z0-9_/!.*''() &$@=;:+,?-]+$'::text) AND (name !~ '(^|/)\.{0,2}(/|$)'::text))),
    CONSTRAINT storage_objects_size_check CHECK ((size >= 0)),
    CONSTRAINT storage_objects_user_metadata_check CHECK (((user_metadata IS NULL) OR (octet_length((user_metadata)::text) <= 8192))),
    CONSTRAINT storage_objects_bucket_name_key UNIQUE (bucket_id, name),
    CONSTRAINT storage_objects_pkey PRIMARY KEY (id),
    CONSTRAINT storage_objects_storage_key_key UNIQUE (storage_key),
    CONSTRAINT storage_objects_bucket_id_fkey FOREIGN KEY (bucket_id) REFERENCES app.storage_buckets(id),
    CONSTRAINT storage_objects_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES identity.users(id) ON DELETE SET NULL
);
COMMENT ON TABLE app.storage_objects IS 'One stored object (file) of a bucket: its path, owner, size, type, digest and where its bytes are. Visible only once its bytes are durable.';
ALTER TABLE app.storage_objects ENABLE ROW LEVEL SECURITY;
GRANT SELECT,DELETE ON TABLE app.storage_objects TO authenticated;
GRANT SELECT,DELETE ON TABLE app.storage_objects TO service_role;
GRANT UPDATE(bucket_id) ON TABLE app.storage_objects TO authenticated;
GRANT UPDATE(bucket_id) ON TABLE app.storage_objects TO service_role;
GRANT UPDATE(name) ON TABLE app.storage_objects TO authenticated;
GRANT UPDATE(name) ON TABLE app.storage_objects TO service_role;

CREATE TABLE app.storage_render_misses (
    client_ip text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    misses integer NOT NULL,
    CONSTRAINT storage_render_misses_pkey PRIMARY KEY (client_ip)
);
COMMENT ON TABLE app.storage_render_misses IS 'Transformations made (not served from the cache) per client address in its current one-minute window.';
ALTER TABLE app.storage_render_misses ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_renders (
    storage_key text NOT NULL COLLATE pg_catalog."C",
    variant text NOT NULL COLLATE pg_catalog."C",
    size bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT storage_renders_pkey PRIMARY KEY (storage_key, variant)
);
COMMENT ON TABLE app.storage_renders IS 'Transformations kept in the byte store (renders/...): per object version and in all at most what the gateway''s configuration says, the oldest evicted first.';
ALTER TABLE app.storage_renders ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_signed_uploads (
    token_hash bytea NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT storage_signed_uploads_pkey PRIMARY KEY (token_hash)
);
COMMENT ON TABLE app.storage_signed_uploads IS 'Signed upload URLs used (or in use): the digest of each token that began an upload, until the token expires, so that it uploads once.';
ALTER TABLE app.storage_signed_uploads ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_uploads (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    bucket_id text NOT NULL,
    name text NOT NULL COLLATE pg_catalog."C",
    owner_id uuid,
    upsert boolean DEFAULT false NOT NULL,
    kind text NOT NULL,
    storage_key text NOT NULL,
    declared_size bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    signed_token_hash bytea,
    CONSTRAINT storage_uploads_kind_check CHECK ((kind = ANY (ARRAY['direct'::text, 'signed'::text, 'resumable'::text, 'copy'::text]))),
    CONSTRAINT storage_uploads_pkey PRIMARY KEY (id),
    CONSTRAINT storage_uploads_storage_key_key UNIQUE (storage_key),
    CONSTRAINT storage_uploads_bucket_id_fkey FOREIGN KEY (bucket_id) REFERENCES app.storage_buckets(id)
);
COMMENT ON TABLE app.storage_uploads IS 'Uploads under way: the key their bytes are written to before the object exists. One that expires (cut off, gateway killed) has its bytes collected. owner_id null: the operator''s (the service-role key), which no rule of folders, quota or rate holds.';
ALTER TABLE app.storage_uploads ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.storage_usage (
    user_id uuid NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    objects integer DEFAULT 0 NOT NULL,
    quota_bytes bigint,
    uploads_per_minute integer,
    window_start timestamp with time zone,
    window_uploads integer DEFAULT 0 NOT NULL,
    signed_urls_valid_after timestamp with time zone,
    CONSTRAINT storage_usage_quota_bytes_check CHECK ((quota_bytes >= 0)),
    CONSTRAINT storage_usage_uploads_per_minute_check CHECK ((uploads_per_minute >= 0)),
    CONSTRAINT storage_usage_pkey PRIMARY KEY (user_id),
    CONSTRAINT storage_usage_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.storage_usage IS 'Per user: bytes and objects stored (kept by a trigger), quota overrides, the upload rate window, and when their signed URLs stopped counting.';
ALTER TABLE app.storage_usage ENABLE ROW LEVEL SECURITY;

CREATE TABLE private.storage_signing_keys (
    id integer DEFAULT 1 NOT NULL,
    secret bytea DEFAULT extensions.gen_random_bytes(32) NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT storage_signing_keys_one CHECK ((id = 1)),
    CONSTRAINT storage_signing_keys_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE private.storage_signing_keys IS 'The HMAC key of signed URLs (made once, never leaves the database).';
ALTER TABLE private.storage_signing_keys ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX storage_garbage_due_idx ON app.storage_garbage USING btree (collect_after);
CREATE INDEX storage_objects_owner_idx ON app.storage_objects USING btree (owner_id) WHERE (owner_id IS NOT NULL);
CREATE INDEX storage_renders_created_idx ON app.storage_renders USING btree (created_at);
CREATE INDEX storage_signed_uploads_expires_idx ON app.storage_signed_uploads USING btree (expires_at);
CREATE INDEX storage_uploads_expires_idx ON app.storage_uploads USING btree (expires_at);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER storage_buckets_set_updated_at BEFORE UPDATE ON app.storage_buckets FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER storage_objects_bucket_rules BEFORE INSERT OR UPDATE OF bucket_id, size, content_type, width ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__bucket_rules();
CREATE TRIGGER storage_objects_garbage AFTER DELETE OR UPDATE OF storage_key ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__garbage();
CREATE TRIGGER storage_objects_set_updated_at BEFORE UPDATE ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER storage_objects_usage AFTER INSERT OR DELETE OR UPDATE OF owner_id, size ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__usage();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Objects in folders the caller owns" ON app.storage_objects TO authenticated USING (private.storage_folder_owned(bucket_id, name, auth.uid())) WITH CHECK (private.storage_folder_owned(bucket_id, name, auth.uid()));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.storage_object_get(bucket text, path text, public_only boolean DEFAULT false) RETURNS TABLE(id uuid, bucket_id text, name text, storage_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb, version uuid, created_at timestamp with time zone, updated_at timestamp with time zone, public boolean, images boolean, download_as_attachment boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  b app.storage_buckets := private.storage_bucket(storage_object_get.bucket);
begin
  -- Not readable and absent look the same.
  if (storage_object_get.public_only and not b.public)
     or not (b.public or private.storage_folder_owned(b.id, storage_object_get.path, auth.uid())) then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
  return query
    select o.id, o.bucket_id, o.name::text, o.storage_key, o.size, o.content_type, o.cache_control, o.etag, o.width, o.height,
           o.user_metadata, o.version, o.created_at, o.updated_at, b.public, b.images, b.download_as_attachment
      from app.storage_objects o
     where o.bucket_id = b.id and o.name = storage_object_get.path;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.storage_object_get(bucket text, path text, public_only boolean) IS 'Downloads, info and transformations of /storage/v1/object and /render/image: the object if the caller may read it (a public bucket: anyone; else the owners of its folder). public_only: the /public/ routes, which serve public buckets only. PT404 bucket_not_found or object_not_found (also when it may not be read).';
GRANT EXECUTE ON FUNCTION api.storage_object_get(bucket text, path text, public_only boolean) TO anon;
GRANT EXECUTE ON FUNCTION api.storage_object_get(bucket text, path text, public_only boolean) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_object_get(bucket text, path text, public_only boolean) TO service_role;

CREATE FUNCTION api.storage_object_signed(bucket text, path text, token text) RETURNS TABLE(id uuid, bucket_id text, name text, storage_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb, version uuid, created_at timestamp with time zone, updated_at timestamp with time zone, public boolean, images boolean, download_as_attachment boolean, transform jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  claims jsonb := private.storage_token_claims(storage_object_signed.token, 'download',
    storage_object_signed.bucket || '/' || storage_object_signed.path);
begin
  return query
    select o.id, o.bucket_id, o.name::text, o.storage_key, o.size, o.content_type, o.cache_control, o.etag, o.width, o.height,
           o.user_metadata, o.version, o.created_at, o.updated_at, b.public, b.images, b.download_as_attachment, claims->'transform'
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id
     where o.bucket_id = storage_object_signed.bucket and o.name = storage_object_signed.path;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.storage_object_signed(bucket text, path text, token text) IS 'GET /storage/v1/object/sign/... and /render/image/sign/...?token=: the object a signed URL names, with the transformation it was signed with. PT400 invalid_signature or signature_expired; PT404 object_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_object_signed(bucket text, path text, token text) TO anon;
GRANT EXECUTE ON FUNCTION api.storage_object_signed(bucket text, path text, token text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_object_signed(bucket text, path text, token text) TO service_role;

CREATE FUNCTION api.storage_buckets_list() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(pg_catalog.jsonb_agg(private.storage_bucket_json(b) order by b.id), '[]'::jsonb)
      from app.storage_buckets b
  $$;
COMMENT ON FUNCTION api.storage_buckets_list() IS 'GET /storage/v1/bucket: every bucket (their settings are not secret).';
GRANT EXECUTE ON FUNCTION api.storage_buckets_list() TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_buckets_list() TO service_role;

CREATE FUNCTION api.storage_bucket_get(bucket_id text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select private.storage_bucket_json(private.storage_bucket(storage_bucket_get.bucket_id))
  $$;

COMMENT ON FUNCTION api.storage_bucket_get(bucket_id text) IS 'GET /storage/v1/bucket/{id}: one bucket. PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_bucket_get(bucket_id text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_bucket_get(bucket_id text) TO service_role;

CREATE FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_operator_only();
  if storage_bucket_create.bucket_id is null or storage_bucket_create.bucket_id !~ '^[a-z0-9][a-z0-9_-]{0,62}$' then
    raise exception 'Bucket name invalid' using errcode = 'PT400', hint = 'invalid_bucket_name';
  end if;
  perform private.storage_bucket_limits_check(storage_bucket_create.file_size_limit, storage_bucket_create.allowed_mime_types, false);
  insert into app.storage_buckets (id, public, folder_owner, file_size_limit, allowed_mime_types)
    values (storage_bucket_create.bucket_id, coalesce(storage_bucket_create.public, false), 'user',
            coalesce(storage_bucket_create.file_size_limit, private.storage_default_size_limit()), storage_bucket_create.allowed_mime_types)
    on conflict on constraint storage_buckets_pkey do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'bucket_exists';
  end if;
  return pg_catalog.jsonb_build_object('name', storage_bucket_create.bucket_id);
end;
$$;

COMMENT ON FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[]) IS 'POST /storage/v1/bucket (the operator only: the service-role key): a bucket, public or private, with a size limit in bytes (null: private.storage_default_size_limit()) and the types it takes (null: any). Its users write under their own id (`{user id}/...`, folder_owner user); an operator changes that in SQL (app.storage_buckets.folder_owner). PT403 storage_access_denied for anyone else, PT400 invalid_bucket_name or invalid_bucket_limits, PT409 bucket_exists.';
GRANT EXECUTE ON FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[]) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[]) TO service_role;

CREATE FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  b app.storage_buckets;
  size_limit bigint;
  types text[];
begin
  perform private.storage_operator_only();
  select * into b from app.storage_buckets s where s.id = storage_bucket_update.bucket_id for update;
  if b.id is null then
    raise exception 'Bucket not found' using errcode = 'PT404', hint = 'bucket_not_found';
  end if;
  -- A field left out stays; null clears a limit.
  size_limit := case when storage_bucket_update.changes ? 'file_size_limit'
                     then coalesce((storage_bucket_update.changes->>'file_size_limit')::bigint, private.storage_default_size_limit())
                     else b.file_size_limit end;
  types := case when storage_bucket_update.changes ? 'allowed_mime_types'
                then (select pg_catalog.array_agg(t) from pg_catalog.jsonb_array_elements_text(
                        case pg_catalog.jsonb_typeof(storage_bucket_update.changes->'allowed_mime_types') when 'array'
                             then storage_bucket_update.changes->'allowed_mime_types' else '[]'::jsonb end) t)
                else b.allowed_mime_types end;
  perform private.storage_bucket_limits_check(size_limit, types, b.images);
  update app.storage_buckets s
     set public = coalesce((storage_bucket_update.changes->>'public')::boolean, s.public),
         file_size_limit = size_limit,
         allowed_mime_types = case when b.images then coalesce(types, array['image/*']) else types end
   where s.id = b.id;
  return pg_catalog.jsonb_build_object('message', 'Successfully updated');
end;
$$;

COMMENT ON FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb) IS 'PUT /storage/v1/bucket/{id} (the operator only): changes what `changes` names of public, file_size_limit (bytes; null: the default) and allowed_mime_types (null: any; an image bucket keeps to image types). PT403 storage_access_denied, PT404 bucket_not_found, PT400 invalid_bucket_limits.';
GRANT EXECUTE ON FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb) TO service_role;

CREATE FUNCTION api.storage_bucket_empty(bucket_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_empty.bucket_id);
  -- Their bytes go to app.storage_garbage (the trigger), collected later.
  delete from app.storage_objects o where o.bucket_id = storage_bucket_empty.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully emptied');
end;
$$;

COMMENT ON FUNCTION api.storage_bucket_empty(bucket_id text) IS 'POST /storage/v1/bucket/{id}/empty (the operator only): deletes every object of the bucket in one transaction (their bytes are collected later). PT403 storage_access_denied, PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_bucket_empty(bucket_id text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_bucket_empty(bucket_id text) TO service_role;

CREATE FUNCTION api.storage_bucket_delete(bucket_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_delete.bucket_id);
  if storage_bucket_delete.bucket_id = any (private.storage_builtin_buckets()) then
    raise exception 'The bucket % is built in and cannot be deleted', storage_bucket_delete.bucket_id
      using errcode = 'PT409', hint = 'bucket_builtin';
  end if;
  if exists (select from app.storage_objects o where o.bucket_id = storage_bucket_delete.bucket_id)
     or exists (select from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id and u.expires_at > now()) then
    raise exception 'The bucket you tried to delete is not empty' using errcode = 'PT409', hint = 'bucket_not_empty';
  end if;
  delete from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id;
  delete from app.storage_buckets b where b.id = storage_bucket_delete.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully deleted');
end;
$$;

COMMENT ON FUNCTION api.storage_bucket_delete(bucket_id text) IS 'DELETE /storage/v1/bucket/{id} (the operator only): deletes an empty bucket (no object, no upload under way: empty it first). The four built-in buckets (private.storage_builtin_buckets) stay: PT409 bucket_builtin. PT403 storage_access_denied, PT404 bucket_not_found, PT409 bucket_not_empty.';
GRANT EXECUTE ON FUNCTION api.storage_bucket_delete(bucket_id text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_bucket_delete(bucket_id text) TO service_role;

CREATE FUNCTION api.storage_objects_list(bucket_id text, prefix text, max_rows integer, skip integer, search text, sort_column text, sort_order text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  folder text := coalesce(storage_objects_list.prefix, '');
  pattern text;
  descending boolean := lower(coalesce(storage_objects_list.sort_order, 'asc')) = 'desc';
  sort text := coalesce(storage_objects_list.sort_column, 'name');
  result jsonb;
begin
  perform private.storage_bucket(storage_objects_list.bucket_id);
  if sort not in ('name', 'created_at', 'updated_at', 'last_accessed_at') then
    raise exception 'sortBy.column must be name, created_at, updated_at or last_accessed_at' using errcode = 'PT400', hint = 'bad_request';
  end if;
  -- A prefix names a folder: `a/b` lists what is under `a/b/`.
  folder := pg_catalog.ltrim(folder, '/');
  if folder <> '' and right(folder, 1) <> '/' then
    folder := folder || '/';
  end if;
  pattern := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(coalesce(storage_objects_list.search, ''), '\', '\\'), '%', '\%'), '_', '\_') || '%';
  -- Row-level security: only objects of folders the caller owns.
  with under as (
    select o as obj, pg_catalog.substr(o.name, length(folder) + 1) as rest
      from app.storage_objects o
     where o.bucket_id = storage_objects_list.bucket_id
       and o.name like pg_catalog.replace(folder, '_', '\_') || '%'
  ), folders as (
    select distinct pg_catalog.split_part(u.rest, '/', 1) as entry_name
      from under u
     where pg_catalog.strpos(u.rest, '/') > 0 and pg_catalog.split_part(u.rest, '/', 1) ilike pattern
  ), entries as (
    select f.entry_name, null::app.storage_objects as obj from folders f
    union all
    select u.rest, u.obj from under u where pg_catalog.strpos(u.rest, '/') = 0 and u.rest ilike pattern
  ), keyed as (
    select e.entry_name, e.obj,
           case sort when 'name' then e.entry_name
                     when 'created_at' then app.iso((e.obj).created_at)
                     else app.iso((e.obj).updated_at) end as sort_key
      from entries e
  ), page as (
    select k.entry_name, k.obj,
           row_number() over (order by (k.obj).id is not null,
                                       case when not descending then k.sort_key end collate "C" asc,
                                       case when descending then k.sort_key end collate "C" desc,
                                       k.entry_name collate "C") as ord
      from keyed k
     order by ord
     limit greatest(coalesce(storage_objects_list.max_rows, 100), 0)
    offset greatest(coalesce(storage_objects_list.skip, 0), 0)
  )
  select coalesce(pg_catalog.jsonb_agg(
           case when p.obj is null then
             pg_catalog.jsonb_build_object('name', p.entry_name, 'id', null, 'updated_at', null, 'created_at', null,
                                           'last_accessed_at', null, 'metadata', null)
           else
             pg_catalog.jsonb_build_object('name', p.entry_name, 'id', (p.obj).id, 'updated_at', app.iso((p.obj).updated_at),
                                           'created_at', app.iso((p.obj).created_at), 'last_accessed_at', app.iso((p.obj).updated_at),
                                           'metadata', private.storage_object_metadata(p.obj))
           end order by p.ord), '[]'::jsonb)
    into result
    from page p;
  return result;
end;
$$;

COMMENT ON FUNCTION api.storage_objects_list(bucket_id text, prefix text, max_rows integer, skip integer, search text, sort_column text, sort_order text) IS 'POST /storage/v1/object/list/{bucket}: the folders and objects directly under prefix (a folder) whose names start with search (case-insensitive), folders first, then by sort_column; only in folders the caller owns (row-level security). PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_objects_list(bucket_id text, prefix text, max_rows integer, skip integer, search text, sort_column text, sort_order text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_objects_list(bucket_id text, prefix text, max_rows integer, skip integer, search text, sort_column text, sort_order text) TO service_role;

CREATE FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  start text := coalesce(storage_objects_list_v2.prefix, '');
  descending boolean := lower(coalesce(storage_objects_list_v2.sort_order, 'asc')) = 'desc';
  sort text := coalesce(storage_objects_list_v2.sort_column, 'name');
  page_size integer := least(greatest(coalesce(storage_objects_list_v2.max_rows, 1000), 1), 1000);
  after jsonb;
  rows jsonb;
  more boolean;
  last_entry jsonb;
begin
  perform private.storage_bucket(storage_objects_list_v2.bucket_id);
  if sort not in ('name', 'created_at', 'updated_at') then
    raise exception 'sortBy.column must be name, created_at or updated_at' using errcode = 'PT400', hint = 'bad_request';
  end if;
  if storage_objects_list_v2.cursor is not null and storage_objects_list_v2.cursor <> '' then
    begin
      after := pg_catalog.convert_from(private.storage_base64url_decode(storage_objects_list_v2.cursor), 'UTF8')::jsonb;
    exception when others then
      after := null;
    end;
    if pg_catalog.jsonb_typeof(after) is distinct from 'object' or after->>'c' is distinct from sort
       or (after->>'d')::boolean is distinct from descending or pg_catalog.jsonb_typeof(after->'k') is distinct from 'array' then
      raise exception 'Invalid cursor' using errcode = 'PT400', hint = 'bad_request';
    end if;
  end if;
  -- Row-level security: only objects of folders the caller owns (the operator: all).
  with under as (
    select o as obj, o.name::text collate "C" as name,
           case when coalesce(storage_objects_list_v2.with_delimiter, false)
                     and pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/') > 0
                then left(o.name, length(start) + pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/')) end collate "C" as folder
      from app.storage_objects o
     where o.bucket_id = storage_objects_list_v2.bucket_id
       and pg_catalog.starts_with(o.name, start)
  ), entries as (
    select distinct u.folder as name, null::app.storage_objects as obj from under u where u.folder is not null
    union all
    select u.name, u.obj from under u where u.folder is null
  ), keyed as (
    -- The order: (rank, value, name). By name, folders and objects together; by a date, folders first.
    select e.name, e.obj,
           case when sort = 'name' or e.obj is null then 0 else 1 end as rank,
           (case when sort = 'name' or e.obj is null then e.name
                 when sort = 'created_at' then app.iso((e.obj).created_at)
                 else app.iso((e.obj).updated_at) end) collate "C" as value
      from entries e
  ), numbered as (
    select k.*,
           row_number() over (order by case when not descending then k.rank end asc, case when not descending then k.value end asc,
                                       case when not descending then k.name end asc, case when descending then k.rank end desc,
                                       case when descending then k.value end desc, case when descending then k.name end desc) as n
      from keyed k
     where after is null
        or (not descending and (k.rank, k.value, k.name) > ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
        or (descending and (k.rank, k.value, k.name) < ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
  )
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
           'entry', case when x.obj is null then
                      pg_catalog.jsonb_build_object('key', pg_catalog.split_part(pg_catalog.rtrim(x.name, '/'), '/', -1), 'name', x.name)
                    else
                      pg_catalog.jsonb_build_object('name', x.name, 'id', (x.obj).id, 'updated_at', app.iso((x.obj).updated_at),
                        'created_at', app.iso((x.obj).created_at), 'last_accessed_at', app.iso((x.obj).updated_at),
                        'metadata', private.storage_object_metadata(x.obj))
                    end,
           'folder', x.obj is null,
           'key', pg_catalog.jsonb_build_array(x.rank, x.value, x.name)) order by x.n), '[]'::jsonb)
    into rows
    from numbered x
   where x.n <= page_size + 1;
  more := pg_catalog.jsonb_array_length(rows) > page_size;
  if more then
    last_entry := rows->(page_size - 1);
    rows := rows - page_size;
  end if;
  -- nextCursor and nextCursorKey only when there is a next page.
  return pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'hasNext', more,
    'nextCursor', case when more then private.storage_base64url(pg_catalog.convert_to(
      pg_catalog.jsonb_build_object('c', sort, 'd', descending, 'k', last_entry->'key')::text, 'UTF8')) end,
    'nextCursorKey', case when more then last_entry->'key'->>2 end,
    'folders', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where (r->>'folder')::boolean), '[]'::jsonb),
    'objects', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where not (r->>'folder')::boolean), '[]'::jsonb)));
end;
$$;

COMMENT ON FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text) IS 'POST /storage/v1/object/list-v2/{bucket} (supabase-js `listV2`): a page of at most max_rows (1 to 1,000) objects whose full names start with prefix, with with_delimiter the folders directly under it instead of what they hold; by name (folders among objects) or by created_at or updated_at (folders first), asc or desc; the next page after cursor (opaque, as nextCursor gave it). Only in folders the caller owns (row-level security). PT404 bucket_not_found, PT400 bad_request (a cursor not made here, or for another order).';
GRANT EXECUTE ON FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text) TO service_role;

CREATE FUNCTION api.storage_object_move(bucket_id text, source text, destination_bucket text, destination text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target_bucket text := coalesce(storage_object_move.destination_bucket, storage_object_move.bucket_id);
begin
  perform private.storage_bucket(storage_object_move.bucket_id);
  perform private.storage_bucket(target_bucket);
  perform private.storage_check_name(storage_object_move.destination);
  if not private.storage_folder_owned(target_bucket, storage_object_move.destination, auth.uid()) then
    raise exception 'Access denied: you may not write %/%', target_bucket, storage_object_move.destination
      using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  if exists (select from app.storage_objects o where o.bucket_id = target_bucket and o.name = storage_object_move.destination) then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  -- Row-level security: the source must be in a folder the caller owns.
  update app.storage_objects o
     set bucket_id = target_bucket, name = storage_object_move.destination
   where o.bucket_id = storage_object_move.bucket_id and o.name = storage_object_move.source;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.storage_object_move(bucket_id text, source text, destination_bucket text, destination text) IS 'POST /storage/v1/object/move: renames an object the caller may write to a path (in the same or another bucket) they may write; its bytes, id and the images pointing at it stay. PT403 storage_access_denied, PT404 object_not_found, PT409 object_exists, and the destination bucket''s limits.';
GRANT EXECUTE ON FUNCTION api.storage_object_move(bucket_id text, source text, destination_bucket text, destination text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_object_move(bucket_id text, source text, destination_bucket text, destination text) TO service_role;

CREATE FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean) RETURNS TABLE(upload_id uuid, storage_key text, source_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  src record;
  target app.storage_buckets := private.storage_bucket(coalesce(storage_object_copy_begin.destination_bucket, storage_object_copy_begin.bucket_id));
  started record;
begin
  if caller is null and not private.storage_operator() then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  select * into src from api.storage_object_get(storage_object_copy_begin.bucket_id, storage_object_copy_begin.source);
  if not private.storage_type_allowed(target, src.content_type) or (target.images and src.width is null) then
    raise exception 'mime type % is not supported', src.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  select * into started from private.storage_upload_start(caller, target.id, storage_object_copy_begin.destination,
    coalesce(storage_object_copy_begin.upsert, false), src.size, 'copy');
  return query select started.upload_id, started.storage_key, src.storage_key, src.size, src.content_type, src.cache_control, src.etag,
                      src.width, src.height, src.user_metadata;
end;
$$;

COMMENT ON FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean) IS 'POST /storage/v1/object/copy: checks that the caller may read the source and write the destination, and registers the copy as an upload (the gateway copies the bytes, then private.storage_upload_finish records it). The refusals of api.storage_object_get and api.storage_upload_begin; PT415 invalid_mime_type when the destination bucket does not take the type.';
GRANT EXECUTE ON FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean) TO service_role;

CREATE FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign.bucket_id);
  result jsonb := '[]'::jsonb;
  object_name text;
  readable boolean;
  route text := case when storage_sign.transform is null then '/object/sign/' else '/render/image/sign/' end;
begin
  if storage_sign.expires_in is null or storage_sign.expires_in not between 1 and 31536000 then
    raise exception 'expiresIn must be 1 to 31536000 seconds' using errcode = 'PT400', hint = 'bad_request';
  end if;
  foreach object_name in array storage_sign.names loop
    readable := (b.public or private.storage_folder_owned(b.id, object_name, caller))
                and exists (select from app.storage_objects o where o.bucket_id = b.id and o.name = object_name);
    result := result || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
      'path', object_name,
      'error', case when readable then null else 'Either the object does not exist or you do not have access to it' end,
      'signedURL', case when readable then
        route || b.id || '/' || private.storage_url_path(object_name) || '?token=' || private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
          'scope', 'download', 'url', b.id || '/' || object_name, 'sub', caller, 'operator', case when caller is null then true end,
          'transform', storage_sign.transform)),
          storage_sign.expires_in) end));
  end loop;
  return result;
end;
$$;

COMMENT ON FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb) IS 'POST /storage/v1/object/sign/{bucket}[/{path}]: a signed download URL (valid expires_in seconds; the path percent-encoded where a URL needs it) for each path the caller may read, with the transformation to apply, if any; an `error` for the others. PT400 for an expiry outside 1 s to a year; PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb) TO service_role;

CREATE FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign_upload.bucket_id);
  token text;
begin
  perform private.storage_check_name(storage_sign_upload.name);
  if not private.storage_folder_owned(b.id, storage_sign_upload.name, caller) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_sign_upload.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  token := private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('scope', 'upload', 'url', b.id || '/' || storage_sign_upload.name,
    'sub', caller, 'operator', case when caller is null then true end, 'upsert', coalesce(storage_sign_upload.upsert, false))), 7200);
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || private.storage_url_path(storage_sign_upload.name) || '?token=' || token,
                                       'token', token);
end;
$$;

COMMENT ON FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean) IS 'POST /storage/v1/object/upload/sign/{bucket}/{path}: a signed upload URL (valid 2 hours) for a path the caller may write; the upload through it runs as the caller. PT400 invalid_key, PT403 storage_access_denied, PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean) TO service_role;

CREATE FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint) RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  claims jsonb := private.storage_token_claims(storage_upload_begin_signed.token, 'upload',
    storage_upload_begin_signed.bucket_id || '/' || storage_upload_begin_signed.name);
  token_digest bytea := identity.token_hash(storage_upload_begin_signed.token);
  started record;
begin
  -- Once: the token's digest is kept until it expires. A second upload waits
  -- for the first's transaction here, then finds it.
  insert into app.storage_signed_uploads (token_hash, expires_at)
    values (token_digest, pg_catalog.to_timestamp((claims->>'exp')::bigint))
    on conflict (token_hash) do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'signed_url_used';
  end if;
  select * into started from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
  update app.storage_uploads u set signed_token_hash = token_digest where u.id = started.upload_id;
  return query select started.upload_id, started.storage_key, started.file_size_limit, started.allowed_mime_types, started.images;
end;
$$;

COMMENT ON FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint) IS 'PUT /storage/v1/object/upload/sign/{bucket}/{path}?token=: an upload through a signed upload URL, as the user who signed it (their right to write the path, quota and rate are checked again). A token uploads once: PT409 signed_url_used when an upload began with it already (one refused or cut off gives it back: private.storage_upload_abort). PT400 invalid_signature or signature_expired, and the refusals of api.storage_upload_begin.';
GRANT EXECUTE ON FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint) TO anon;
GRANT EXECUTE ON FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint) TO service_role;

CREATE FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text DEFAULT 'direct'::text) RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
begin
  if caller is null and not private.storage_operator() then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if storage_upload_begin.kind not in ('direct', 'resumable') then
    raise exception 'kind must be direct or resumable' using errcode = 'PT400', hint = 'bad_request';
  end if;
  return query select * from private.storage_upload_start(caller, storage_upload_begin.bucket_id, storage_upload_begin.name,
    coalesce(storage_upload_begin.upsert, false), storage_upload_begin.declared_size, storage_upload_begin.kind);
end;
$$;

COMMENT ON FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text) IS 'POST and PUT /storage/v1/object/{bucket}/{path}, and TUS uploads: checks that the caller may write the path (before a byte is read) and registers the upload; the object appears when private.storage_upload_finish records its bytes. PT404 bucket_not_found, PT400 invalid_key, PT403 storage_access_denied, PT409 object_exists (without upsert), PT413 object_too_large or quota_exceeded, PT429 too_many_uploads.';
GRANT EXECUTE ON FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text) TO service_role;

CREATE FUNCTION api.storage_objects_remove(bucket_id text, names text[]) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  result jsonb;
begin
  perform private.storage_bucket(storage_objects_remove.bucket_id);
  -- Row-level security: only objects of folders the caller owns; the rest are not there for them.
  with gone as (
    delete from app.storage_objects o
     where o.bucket_id = storage_objects_remove.bucket_id and o.name = any (storage_objects_remove.names)
    returning o.*
  )
  select coalesce(pg_catalog.jsonb_agg(private.storage_object_json(g) order by g.name), '[]'::jsonb) into result from gone g;
  return result;
end;
$$;

COMMENT ON FUNCTION api.storage_objects_remove(bucket_id text, names text[]) IS 'DELETE /storage/v1/object/{bucket}: deletes the named objects the caller may delete (row-level security) and returns them; their bytes are collected later. PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION api.storage_objects_remove(bucket_id text, names text[]) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_objects_remove(bucket_id text, names text[]) TO service_role;

CREATE FUNCTION api.storage_resumable_upload(upload_id uuid) RETURNS TABLE(storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean, bucket_id text, name text, declared_size bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return query
    select u.storage_key, b.file_size_limit, b.allowed_mime_types, b.images, u.bucket_id, u.name::text, u.declared_size
      from app.storage_uploads u
      join app.storage_buckets b on b.id = u.bucket_id
     where u.id = storage_resumable_upload.upload_id and u.kind = 'resumable'
       and (u.owner_id = auth.uid() or (u.owner_id is null and private.storage_operator())) and u.expires_at > now();
  if not found then
    raise exception 'Upload not found' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.storage_resumable_upload(upload_id uuid) IS 'HEAD, PATCH and DELETE /storage/v1/upload/resumable/{id}: the caller''s resumable upload under way, with where its bytes go and its bucket''s limits. PT404 upload_not_found (another user''s, finished or expired).';
GRANT EXECUTE ON FUNCTION api.storage_resumable_upload(upload_id uuid) TO authenticated;
GRANT EXECUTE ON FUNCTION api.storage_resumable_upload(upload_id uuid) TO service_role;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.storage_operator_only() RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if not private.storage_operator() then
    raise exception 'Access denied: only the service-role key manages buckets' using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
end;
$$;

COMMENT ON FUNCTION private.storage_operator_only() IS 'PT403 storage_access_denied unless the request is the operator''s (private.storage_operator): the bucket API.';


CREATE FUNCTION private.storage_builtin_buckets() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select array['avatars', 'community-images', 'event-images', 'attachments']
  $$;

COMMENT ON FUNCTION private.storage_builtin_buckets() IS 'The buckets the migrations make, which the service uses (avatars, community and event images, attachments): they cannot be deleted.';


CREATE FUNCTION private.storage_default_size_limit() RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select 52428800::bigint
  $$;

COMMENT ON FUNCTION private.storage_default_size_limit() IS 'The size limit of a bucket made or changed without one: 50 MB (Supabase Storage''s default).';


CREATE FUNCTION private.storage_bucket_limits_check(file_size_limit bigint, allowed_mime_types text[], images boolean) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $_$
begin
  if storage_bucket_limits_check.file_size_limit is not null and storage_bucket_limits_check.file_size_limit not between 1 and 5368709120 then
    raise exception 'file_size_limit must be 1 byte to 5 GB' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.allowed_mime_types is not null and (
       cardinality(storage_bucket_limits_check.allowed_mime_types) not between 1 and 50
       or exists (select from pg_catalog.unnest(storage_bucket_limits_check.allowed_mime_types) t
                   where t is null or t !~ '^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/([a-z0-9][a-z0-9!#$&^_.+-]{0,126}|\*)$')) then
    raise exception 'allowed_mime_types must be 1 to 50 types such as image/png or image/*' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.images and storage_bucket_limits_check.allowed_mime_types is not null
     and not storage_bucket_limits_check.allowed_mime_types <@ array['image/*', 'image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'] then
    raise exception 'an image bucket takes image/* or image/jpeg, png, webp, avif, gif only' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
end;
$_$;

COMMENT ON FUNCTION private.storage_bucket_limits_check(file_size_limit bigint, allowed_mime_types text[], images boolean) IS 'PT400 invalid_bucket_limits unless a bucket''s limits are sound: 1 byte to 5 GB; 1 to 50 lower-case types or type/* patterns; an image bucket''s, image types only.';


CREATE FUNCTION private.storage_bucket(bucket_id text) RETURNS app.storage_buckets
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  b app.storage_buckets;
begin
  select * into b from app.storage_buckets s where s.id = storage_bucket.bucket_id;
  if b.id is null then
    raise exception 'Bucket not found' using errcode = 'PT404', hint = 'bucket_not_found';
  end if;
  return b;
end;
$$;

COMMENT ON FUNCTION private.storage_bucket(bucket_id text) IS 'The bucket, or PT404 bucket_not_found.';
GRANT EXECUTE ON FUNCTION private.storage_bucket(bucket_id text) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_bucket(bucket_id text) TO service_role;

CREATE FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select case when storage_folder_owned.user_id is null then private.storage_operator()
    else coalesce((
      select case b.folder_owner
               when 'user' then f.id = storage_folder_owned.user_id
               when 'community' then private.is_community_manager(f.id, storage_folder_owned.user_id)
               when 'event' then exists (select from app.events e
                                          where e.id = f.id and private.is_community_manager(e.community_id, storage_folder_owned.user_id))
             end
        from app.storage_buckets b, (select private.storage_folder_id(storage_folder_owned.name) as id) f
       where b.id = storage_folder_owned.bucket_id and f.id is not null), false)
    end
  $$;

COMMENT ON FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid) IS 'THE storage rule: whether the user owns the object''s first folder in the bucket: user buckets, the folder named by their id; community buckets, a community they manage; event buckets, an event of a community they manage. Owners write (and, in private buckets, read); it is the row-level security of app.storage_objects. No user (null): true for the operator only (private.storage_operator: the service-role key), who owns every folder.';
GRANT EXECUTE ON FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid) TO service_role;

CREATE FUNCTION private.storage_operator() RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(auth.jwt()->>'role', '') = 'service_role' and auth.uid() is null
  $$;

COMMENT ON FUNCTION private.storage_operator() IS 'Whether the request is the operator''s: it runs with the claims the gateway gives the service-role key on /storage/v1 (role service_role, no user), as Postgres role service_role. The operator passes the storage rule (private.storage_folder_owned) and row-level security (the role bypasses it), never the checks of bucket, path, size and type.';
GRANT EXECUTE ON FUNCTION private.storage_operator() TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_operator() TO service_role;

CREATE FUNCTION private.storage_folder_id(name text) RETURNS uuid
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case when storage_folder_id.name ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[^/]'
                then pg_catalog.split_part(storage_folder_id.name, '/', 1)::uuid end
  $$;

COMMENT ON FUNCTION private.storage_folder_id(name text) IS 'The id an object''s first folder names (a uuid in canonical lower case, followed by more of the path), or null.';


CREATE FUNCTION private.storage_token_claims(token text, scope text, url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  parts text[] := pg_catalog.string_to_array(coalesce(storage_token_claims.token, ''), '.');
  claims jsonb;
  valid_after timestamptz;
begin
  if cardinality(parts) <> 3
     or parts[3] is distinct from private.storage_base64url(extensions.hmac(pg_catalog.convert_to(parts[1] || '.' || parts[2], 'UTF8'),
                                     (select k.secret from private.storage_signing_keys k), 'sha256')) then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  claims := pg_catalog.convert_from(private.storage_base64url_decode(parts[2]), 'UTF8')::jsonb;
  if claims->>'scope' is distinct from storage_token_claims.scope or claims->>'url' is distinct from storage_token_claims.url then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  if (claims->>'exp')::bigint <= extract(epoch from now()) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  -- The signer's credentials ended after it was signed (private.storage_signed_urls_end: a password set or
  -- changed, a global sign-out), or the account is gone.
  -- The operator's (signed with the service-role key: no user) end only with exp.
  if claims->>'sub' is null and claims->'operator' = 'true'::jsonb then
    return claims;
  end if;
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
$$;

COMMENT ON FUNCTION private.storage_token_claims(token text, scope text, url text) IS 'The claims of a signed URL''s token for that scope (download, upload) and url (bucket/path): PT400 invalid_signature when it was not made here for them, signature_expired past exp or once its signer''s credentials ended (or the account is gone).';


CREATE FUNCTION private.storage_base64url(data bytea) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.translate(pg_catalog.encode(storage_base64url.data, 'base64'), E'+/=\n', '-_')
  $$;

COMMENT ON FUNCTION private.storage_base64url(data bytea) IS 'base64url without padding (JWT).';
GRANT EXECUTE ON FUNCTION private.storage_base64url(data bytea) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_base64url(data bytea) TO service_role;


CREATE FUNCTION private.storage_base64url_decode(data text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $_$
begin
  if storage_base64url_decode.data !~ '^[A-Za-z0-9_-]*$' then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  return pg_catalog.decode(pg_catalog.translate(storage_base64url_decode.data, '-_', '+/')
    || pg_catalog.repeat('=', (4 - length(storage_base64url_decode.data) % 4) % 4), 'base64');
end;
$_$;

COMMENT ON FUNCTION private.storage_base64url_decode(data text) IS 'Decodes base64url (PT400 invalid_signature for anything else).';
GRANT EXECUTE ON FUNCTION private.storage_base64url_decode(data text) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_base64url_decode(data text) TO service_role;


CREATE FUNCTION private.storage_signed_urls_end(user_id uuid) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    insert into app.storage_usage as u (user_id, signed_urls_valid_after) values (storage_signed_urls_end.user_id, now())
      on conflict on constraint storage_usage_pkey do update set signed_urls_valid_after = now();
  $$;

COMMENT ON FUNCTION private.storage_signed_urls_end(user_id uuid) IS 'Ends every signed download and upload URL the user made until now (private.storage_token_claims refuses a token issued at or before signed_urls_valid_after): a password set or changed, every session ended at once (a global sign-out), the account deleted.';


CREATE FUNCTION private.storage_bucket_json(b app.storage_buckets) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.jsonb_build_object('id', b.id, 'name', b.id, 'owner', '', 'public', b.public,
      'file_size_limit', b.file_size_limit, 'allowed_mime_types', b.allowed_mime_types,
      'created_at', app.iso(b.created_at), 'updated_at', app.iso(b.updated_at))
  $$;

COMMENT ON FUNCTION private.storage_bucket_json(b app.storage_buckets) IS 'A bucket as Supabase Storage describes it.';


CREATE FUNCTION private.storage_object_metadata(o app.storage_objects) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.jsonb_build_object('eTag', o.etag, 'size', o.size, 'mimetype', o.content_type, 'cacheControl', o.cache_control,
      'lastModified', app.iso(o.updated_at), 'contentLength', o.size, 'httpStatusCode', 200)
  $$;

COMMENT ON FUNCTION private.storage_object_metadata(o app.storage_objects) IS 'An object''s metadata as Supabase Storage lists it (eTag, size, mimetype, cacheControl, lastModified, contentLength, httpStatusCode).';
GRANT EXECUTE ON FUNCTION private.storage_object_metadata(o app.storage_objects) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_object_metadata(o app.storage_objects) TO service_role;

CREATE FUNCTION private.storage_check_name(name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $_$
begin
  if storage_check_name.name is null
     or length(storage_check_name.name) not between 3 and 1024
     or storage_check_name.name !~ '^[A-Za-z0-9_/!.*''() &$@=;:+,?-]+$'
     or storage_check_name.name ~ '(^|/)\.{0,2}(/|$)' then
    raise exception 'Invalid key: %', left(coalesce(storage_check_name.name, ''), 1024)
      using errcode = 'PT400', hint = 'invalid_key';
  end if;
end;
$_$;

COMMENT ON FUNCTION private.storage_check_name(name text) IS 'PT400 invalid_key unless the path is 3 to 1,024 characters of letters, digits and _/!.*''() &$@=;:+,?- with no empty, . or .. segment (app.storage_objects_name_check says the same).';
GRANT EXECUTE ON FUNCTION private.storage_check_name(name text) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_check_name(name text) TO service_role;

CREATE FUNCTION private.storage_type_allowed(b app.storage_buckets, content_type text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select b.allowed_mime_types is null
        or exists (select from pg_catalog.unnest(b.allowed_mime_types) t
                    where t = lower(pg_catalog.split_part(storage_type_allowed.content_type, ';', 1))
                       or (right(t, 2) = '/*' and lower(storage_type_allowed.content_type) like left(t, -1) || '%'))
  $$;

COMMENT ON FUNCTION private.storage_type_allowed(b app.storage_buckets, content_type text) IS 'Whether the bucket takes the type (allowed_mime_types: null for any, exact types or type/* patterns).';


CREATE FUNCTION private.storage_upload_start(owner_id uuid, bucket_id text, name text, upsert boolean, declared_size bigint, kind text) RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  b app.storage_buckets := private.storage_bucket(storage_upload_start.bucket_id);
  existing app.storage_objects;
  reserved bigint;
  quota bigint;
  per_minute integer;
  open_uploads integer;
  oldest_open timestamptz;
  w app.storage_usage;
  started app.storage_uploads;
begin
  perform private.storage_check_name(storage_upload_start.name);
  if storage_upload_start.owner_id is not null
     and not private.storage_folder_owned(b.id, storage_upload_start.name, storage_upload_start.owner_id) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_upload_start.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  select * into existing from app.storage_objects o where o.bucket_id = b.id and o.name = storage_upload_start.name;
  if existing.id is not null and not storage_upload_start.upsert then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  if storage_upload_start.declared_size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if storage_upload_start.owner_id is null then
    -- The operator's: no quota, rate or count of uploads under way.
    insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
      values (b.id, storage_upload_start.name, null, storage_upload_start.upsert, storage_upload_start.kind,
              'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
              now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
      returning u.* into started;
    return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
    return;
  end if;
  -- The owner's usage row, locked: one owner's uploads begin one at a time,
  -- so what the others reserved is counted right. The upload is counted in
  -- the minute's window (a refused upload does not count: its transaction
  -- rolls back).
  insert into app.storage_usage as s (user_id, window_start, window_uploads)
    values (storage_upload_start.owner_id, now(), 1)
    on conflict (user_id) do update
      set window_start = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then now() else s.window_start end,
          window_uploads = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then 1 else s.window_uploads + 1 end
    returning s.* into w;
  -- The quota: what is stored, plus what the owner's uploads under way
  -- reserved (their declared sizes: a resumable upload's Upload-Length, a
  -- body's Content-Length), plus this one; an object this one replaces
  -- frees its bytes. The finish checks again with the real size.
  quota := private.storage_quota_bytes(storage_upload_start.owner_id);
  select coalesce(sum(u.declared_size), 0) into reserved
    from app.storage_uploads u where u.owner_id = storage_upload_start.owner_id and u.expires_at > now();
  if w.bytes + reserved + coalesce(storage_upload_start.declared_size, 0)
       - (case when existing.owner_id = storage_upload_start.owner_id then existing.size else 0 end) > quota
     or (storage_upload_start.declared_size is null and w.bytes + reserved >= quota) then
    raise exception 'Storage quota exceeded: % of % bytes used, % reserved by uploads under way', w.bytes, quota, reserved
      using errcode = 'PT413', hint = 'quota_exceeded';
  end if;
  -- Uploads per minute (a fixed window per user).
  per_minute := coalesce(w.uploads_per_minute,
    (select s.storage_uploads_per_minute from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
      where p.id = storage_upload_start.owner_id),
    30);
  if w.window_uploads > per_minute then
    raise exception 'Too many uploads: at most % a minute', per_minute using errcode = 'PT429', hint = 'too_many_uploads',
      detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer)::text;
  end if;
  -- Resumable uploads open at once (each holds staged bytes until it finishes, is cancelled or expires).
  if storage_upload_start.kind = 'resumable' then
    select count(*), min(u.expires_at) into open_uploads, oldest_open
      from app.storage_uploads u
     where u.owner_id = storage_upload_start.owner_id and u.kind = 'resumable' and u.expires_at > now();
    if open_uploads >= private.storage_open_uploads_max() then
      raise exception 'Too many resumable uploads under way: at most %; finish or cancel one', private.storage_open_uploads_max()
        using errcode = 'PT429', hint = 'too_many_open_uploads',
              detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from oldest_open - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
$$;

COMMENT ON FUNCTION private.storage_upload_start(owner_id uuid, bucket_id text, name text, upsert boolean, declared_size bigint, kind text) IS 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and against the quota together with what the owner''s uploads under way reserved (their declared sizes, held until they finish, are given up or expire), the upload rate, and at most private.storage_open_uploads_max() resumable uploads open, before a byte is read (owner_id null: the operator''s upload, which only the path, the bucket and the size limit hold); registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads). PT413 quota_exceeded, PT429 too_many_uploads or too_many_open_uploads (detail: retry_after).';


CREATE FUNCTION private.storage_quota_bytes(user_id uuid) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(
      (select u.quota_bytes from app.storage_usage u where u.user_id = storage_quota_bytes.user_id),
      (select s.storage_quota_bytes from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
        where p.id = storage_quota_bytes.user_id),
      (select s.storage_quota_bytes from app.subscription_plans s where s.id = 'basic'),
      0)
  $$;

COMMENT ON FUNCTION private.storage_quota_bytes(user_id uuid) IS 'The bytes of objects the user may own: their override in app.storage_usage, else their plan''s storage_quota_bytes.';


CREATE FUNCTION private.storage_open_uploads_max() RETURNS integer
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select 10
  $$;
COMMENT ON FUNCTION private.storage_open_uploads_max() IS 'How many resumable uploads one user may have open at once (not finished, cancelled or expired): 10.';


CREATE FUNCTION private.storage_url_path(name text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.replace(pg_catalog.replace(storage_url_path.name, ' ', '%20'), '?', '%3F')
  $$;

COMMENT ON FUNCTION private.storage_url_path(name text) IS 'An object path as it goes into a URL (paths hold no other character a URL path cannot carry).';


CREATE FUNCTION private.storage_token(claims jsonb, expires_in integer) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  header text := private.storage_base64url(pg_catalog.convert_to('{"alg":"HS256","typ":"JWT"}', 'UTF8'));
  body text := private.storage_base64url(pg_catalog.convert_to((storage_token.claims
    || pg_catalog.jsonb_build_object('iat', extract(epoch from now()),
                                     'exp', floor(extract(epoch from now()))::bigint + storage_token.expires_in))::text, 'UTF8'));
begin
  return header || '.' || body || '.' || private.storage_base64url(
    extensions.hmac(pg_catalog.convert_to(header || '.' || body, 'UTF8'), (select k.secret from private.storage_signing_keys k), 'sha256'));
end;
$$;

COMMENT ON FUNCTION private.storage_token(claims jsonb, expires_in integer) IS 'A signed URL''s token: an HS256 JWT of the claims (scope, url, sub, ...) with iat and exp, signed with private.storage_signing_keys.';


CREATE FUNCTION private.storage_object_json(o app.storage_objects) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.jsonb_build_object('id', o.id, 'name', o.name, 'bucket_id', o.bucket_id, 'owner', o.owner_id, 'owner_id', o.owner_id,
      'version', o.version, 'created_at', app.iso(o.created_at), 'updated_at', app.iso(o.updated_at),
      'last_accessed_at', app.iso(o.updated_at), 'metadata', private.storage_object_metadata(o), 'user_metadata', o.user_metadata)
  $$;

COMMENT ON FUNCTION private.storage_object_json(o app.storage_objects) IS 'An object as Supabase Storage answers it (remove, upload, copy).';
GRANT EXECUTE ON FUNCTION private.storage_object_json(o app.storage_objects) TO authenticated;
GRANT EXECUTE ON FUNCTION private.storage_object_json(o app.storage_objects) TO service_role;

CREATE FUNCTION private.tg_storage_objects__bucket_rules() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  b app.storage_buckets := private.storage_bucket(new.bucket_id);
begin
  if new.size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if not private.storage_type_allowed(b, new.content_type) or (b.images and new.width is null) then
    raise exception 'mime type % is not supported', new.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  return new;
end;
$$;
COMMENT ON FUNCTION private.tg_storage_objects__bucket_rules() IS 'Trigger: an object fits its bucket (size limit, types; an image bucket holds only images the gateway processed), however it got there (upload, copy, move).';


CREATE FUNCTION private.tg_storage_objects__garbage() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if tg_op = 'DELETE' or new.storage_key is distinct from old.storage_key then
    insert into app.storage_garbage (storage_key) values (old.storage_key) on conflict do nothing;
  end if;
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_storage_objects__garbage() IS 'Trigger: the bytes of a deleted or replaced version go to app.storage_garbage (collected after a grace period for downloads under way).';


CREATE FUNCTION private.tg_storage_objects__usage() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  used bigint;
begin
  if tg_op in ('UPDATE', 'DELETE') and old.owner_id is not null then
    update app.storage_usage u set bytes = u.bytes - old.size, objects = u.objects - 1 where u.user_id = old.owner_id;
  end if;
  if tg_op in ('INSERT', 'UPDATE') and new.owner_id is not null then
    insert into app.storage_usage as u (user_id, bytes, objects) values (new.owner_id, new.size, 1)
      on conflict (user_id) do update set bytes = u.bytes + excluded.bytes, objects = u.objects + 1
      returning u.bytes into used;
    -- Only what adds to a user's bytes is held to the quota (a smaller replacement, a move, always pass).
    if (tg_op = 'INSERT' or new.owner_id is distinct from old.owner_id or new.size > old.size)
       and used > private.storage_quota_bytes(new.owner_id) then
      raise exception 'Storage quota exceeded: % of % bytes', used, private.storage_quota_bytes(new.owner_id)
        using errcode = 'PT413', hint = 'quota_exceeded';
    end if;
  end if;
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_storage_objects__usage() IS 'Trigger: keeps app.storage_usage (bytes and objects per owner) and refuses what takes an owner past their quota (PT413 quota_exceeded), counted under the row lock of their usage row, so concurrent uploads cannot pass it together.';


CREATE FUNCTION app.storage_public_url(object_id uuid) RETURNS text
    LANGUAGE sql STABLE STRICT SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.rtrim(private.public_url(), '/') || '/storage/v1/object/public/' || o.bucket_id || '/' || private.storage_url_path(o.name)
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id and b.public
     where o.id = storage_public_url.object_id
  $$;

COMMENT ON FUNCTION app.storage_public_url(object_id uuid) IS 'The absolute public URL of an object of a public bucket (null otherwise): avatar_url, image_url.';
GRANT EXECUTE ON FUNCTION app.storage_public_url(object_id uuid) TO anon;
GRANT EXECUTE ON FUNCTION app.storage_public_url(object_id uuid) TO authenticated;

CREATE FUNCTION private.storage_backup_lock_id() RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select 4871232390914563012::bigint
  $$;
COMMENT ON FUNCTION private.storage_backup_lock_id() IS 'The advisory lock a backup (npm run admin -- backup) holds, in its session, from before its dump''s snapshot until it has copied the files the dump lists: private.storage_garbage_take takes no key meanwhile, so no byte of an object the dump lists is deleted before it is copied.';


CREATE FUNCTION private.storage_garbage_done(storage_keys text[], failures jsonb DEFAULT NULL::jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    delete from app.storage_garbage g
     where g.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key);
    -- A version's transformations went with its bytes.
    delete from app.storage_renders r
     where r.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? r.storage_key);
    update app.storage_garbage g set last_error = left(storage_garbage_done.failures->>g.storage_key, 1000)
     where coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key;
  $$;

COMMENT ON FUNCTION private.storage_garbage_done(storage_keys text[], failures jsonb) IS 'Forgets the keys whose bytes were deleted (and the records of their transformations, deleted with them); records the error of those that failed (failures: key → message), which are tried again later.';


CREATE FUNCTION private.storage_garbage_take(max_rows integer DEFAULT 200) RETURNS TABLE(storage_key text)
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    -- A key an object uses again (a finish whose answer was lost) is not garbage.
    with used as (
      delete from app.storage_garbage g
       where g.collect_after <= now() and exists (select from app.storage_objects o where o.storage_key = g.storage_key)
    ), due as (
      -- Nothing while a backup copies the stored files (private.storage_backup_lock_id).
      select g.storage_key from app.storage_garbage g
       where (select pg_try_advisory_xact_lock_shared(private.storage_backup_lock_id()))
         and g.collect_after <= now()
         and not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
       order by g.collect_after
       limit storage_garbage_take.max_rows
       for update skip locked
    )
    update app.storage_garbage g
       set attempts = g.attempts + 1,
           collect_after = now() + least(interval '1 hour', interval '1 minute' * power(2, g.attempts))
      from due d where g.storage_key = d.storage_key
    returning g.storage_key
  $$;

COMMENT ON FUNCTION private.storage_garbage_take(max_rows integer) IS 'A batch of byte-store keys to delete (the storage_collect job), each put off with back-off in case the job dies; private.storage_garbage_done forgets them once deleted. None while a backup holds private.storage_backup_lock_id.';


CREATE FUNCTION private.storage_image_object(bucket_id text, name text, user_id uuid) RETURNS uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_id uuid;
begin
  if storage_image_object.name is null then
    return null;
  end if;
  select o.id into found_id from app.storage_objects o
   where o.bucket_id = storage_image_object.bucket_id and o.name = storage_image_object.name;
  if found_id is null or not private.storage_folder_owned(storage_image_object.bucket_id, storage_image_object.name, storage_image_object.user_id) then
    raise exception 'no object % in % that you may use', storage_image_object.name, storage_image_object.bucket_id
      using errcode = 'PT422', hint = 'invalid_image_path';
  end if;
  return found_id;
end;
$$;

COMMENT ON FUNCTION private.storage_image_object(bucket_id text, name text, user_id uuid) IS 'The id of the object at name in the bucket, if it is in a folder the user owns (an avatar, a community''s or an event''s image); PT422 invalid_image_path otherwise; null for null.';


CREATE FUNCTION private.storage_object_name(object_id uuid) RETURNS text
    LANGUAGE sql STABLE STRICT SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select o.name::text from app.storage_objects o where o.id = storage_object_name.object_id
  $$;

COMMENT ON FUNCTION private.storage_object_name(object_id uuid) IS 'An object''s path in its bucket (image_path of an event whose image is stored here).';
GRANT EXECUTE ON FUNCTION private.storage_object_name(object_id uuid) TO authenticated;

CREATE FUNCTION private.storage_purge(folder_owner text, folder_id uuid, max_rows integer DEFAULT 500) RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.storage_objects o
       where o.id in (
         select x.id from app.storage_objects x
           join app.storage_buckets b on b.id = x.bucket_id
          where b.folder_owner = storage_purge.folder_owner
            and x.name like storage_purge.folder_id::text || '/%'
          limit storage_purge.max_rows)
      returning o.id
    )
    select count(*)::integer from gone
  $$;

COMMENT ON FUNCTION private.storage_purge(folder_owner text, folder_id uuid, max_rows integer) IS 'Deletes up to max_rows objects of the folder of a user, community or event (folder_owner user, community or event) in every bucket of that kind; their bytes go to app.storage_garbage. Returns how many (the storage_purge job repeats it until none is left).';


CREATE FUNCTION private.storage_purge_enqueue(folder_owner text, folder_id uuid) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if storage_purge_enqueue.folder_owner not in ('user', 'community', 'event') then
    raise exception 'folder_owner must be user, community or event' using errcode = '22023';
  end if;
  return private.enqueue_job('storage_purge',
    pg_catalog.jsonb_build_object('folder_owner', storage_purge_enqueue.folder_owner, 'id', storage_purge_enqueue.folder_id),
    job_key => 'storage_purge:' || storage_purge_enqueue.folder_owner || ':' || storage_purge_enqueue.folder_id);
end;
$$;

COMMENT ON FUNCTION private.storage_purge_enqueue(folder_owner text, folder_id uuid) IS 'Queues the storage_purge job that deletes every object of the folder of a user, community or event (and then their bytes), in the current transaction. Deleting an account, a community or an event calls it (their triggers _900_storage_purge); account deletion that keeps the users row calls it itself: private.storage_purge_enqueue(''user'', user_id).';


CREATE FUNCTION private.storage_render_begin(storage_key text, variant text, client_ip text, misses_per_minute integer, variants_per_object integer) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  counted app.storage_render_misses;
  evicted text[];
begin
  -- Transformations made per client address, in fixed one-minute windows (a
  -- refused one is not counted: its transaction rolls back).
  if storage_render_begin.client_ip is not null then
    insert into app.storage_render_misses as m (client_ip, window_start, misses)
      values (storage_render_begin.client_ip, now(), 1)
      on conflict on constraint storage_render_misses_pkey do update
        set window_start = case when m.window_start <= now() - interval '1 minute' then now() else m.window_start end,
            misses = case when m.window_start <= now() - interval '1 minute' then 1 else m.misses + 1 end
      returning m.* into counted;
    if counted.misses > storage_render_begin.misses_per_minute then
      raise exception 'Too many image transformations: at most % a minute', storage_render_begin.misses_per_minute
        using errcode = 'PT429', hint = 'too_many_renders',
              detail = json_build_object('retry_after',
                         greatest(1, ceil(extract(epoch from counted.window_start + interval '1 minute' - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_renders (storage_key, variant) values (storage_render_begin.storage_key, storage_render_begin.variant)
    on conflict on constraint storage_renders_pkey do nothing;
  -- The version's oldest transformations past the bound go (their bytes: the
  -- gateway deletes them now, and app.storage_garbage holds them until then).
  with gone as (
    delete from app.storage_renders r
     where r.storage_key = storage_render_begin.storage_key
       and r.variant in (select x.variant from app.storage_renders x
                          where x.storage_key = storage_render_begin.storage_key
                          order by x.created_at desc, x.variant = storage_render_begin.variant desc, x.variant
                          offset greatest(storage_render_begin.variants_per_object, 1))
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$$;

COMMENT ON FUNCTION private.storage_render_begin(storage_key text, variant text, client_ip text, misses_per_minute integer, variants_per_object integer) IS 'A transformation not in the cache, about to be made (the gateway calls it, as its own role): counts it for the client address (PT429 too_many_renders past misses_per_minute in the current minute, detail retry_after), records it, and evicts the object version''s oldest transformations past variants_per_object. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now.';


CREATE FUNCTION private.storage_render_key(storage_key text, variant text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select 'renders/' || pg_catalog.regexp_replace(storage_render_key.storage_key, '^objects/', '') || '/' || storage_render_key.variant
  $$;

COMMENT ON FUNCTION private.storage_render_key(storage_key text, variant text) IS 'The byte-store key of a transformation: renders/<uuid of the version>/<variant> (gateway/storage/byte-store.ts renderKey).';


CREATE FUNCTION private.storage_render_misses_prune() RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.storage_render_misses m where m.window_start <= now() - interval '1 minute' returning 1
    )
    select count(*)::integer from gone
  $$;
COMMENT ON FUNCTION private.storage_render_misses_prune() IS 'Forgets the transformation counts of client addresses whose minute is over (the storage_collect job). Returns how many.';


CREATE FUNCTION private.storage_render_stored(storage_key text, variant text, size bigint, budget_bytes bigint) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  evicted text[];
begin
  -- One total at a time: every gateway's records take turns here.
  perform pg_advisory_xact_lock(pg_catalog.hashtextextended('app.storage_renders', 0));
  update app.storage_renders r set size = storage_render_stored.size
   where r.storage_key = storage_render_stored.storage_key and r.variant = storage_render_stored.variant;
  if not found then
    -- Evicted while it was being made: its bytes go at once.
    evicted := array[private.storage_render_key(storage_render_stored.storage_key, storage_render_stored.variant)];
    insert into app.storage_garbage (storage_key, collect_after) values (evicted[1], now()) on conflict do nothing;
    return evicted;
  end if;
  -- Past the budget, the oldest go (newest first, each counted with those newer than it).
  with ranked as (
    select r.storage_key, r.variant,
           sum(coalesce(r.size, 0)) over (order by r.created_at desc, r.storage_key desc, r.variant desc) as running
      from app.storage_renders r
  ), gone as (
    delete from app.storage_renders r
     using ranked k
     where k.running > storage_render_stored.budget_bytes
       and r.storage_key = k.storage_key and r.variant = k.variant
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$$;

COMMENT ON FUNCTION private.storage_render_stored(storage_key text, variant text, size bigint, budget_bytes bigint) IS 'A transformation stored (the gateway calls it, as its own role): records its size, then evicts the oldest transformations while all of them together are more than budget_bytes. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now; the transformation itself when it was evicted while being made.';


CREATE FUNCTION private.storage_render_url(object_id uuid, width integer, height integer, resize text) RETURNS text
    LANGUAGE sql STABLE STRICT SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.rtrim(private.public_url(), '/') || '/storage/v1/render/image/public/' || o.bucket_id || '/' || private.storage_url_path(o.name)
           || '?width=' || storage_render_url.width || '&height=' || storage_render_url.height || '&resize=' || storage_render_url.resize
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id and b.public and b.images
     where o.id = storage_render_url.object_id
  $$;

COMMENT ON FUNCTION private.storage_render_url(object_id uuid, width integer, height integer, resize text) IS 'The absolute URL of a transformation of an image of a public bucket (the og:image of the event page: 1200×630, cover).';


CREATE FUNCTION private.storage_upload_abort(upload_id uuid, storage_key text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.storage_uploads u where u.id = storage_upload_abort.upload_id returning u.signed_token_hash
    )
    -- The signed upload URL it began with may be used again.
    delete from app.storage_signed_uploads t where t.token_hash in (select g.signed_token_hash from gone g);
    -- Never the bytes of a visible object (a finish whose answer was lost may have committed).
    insert into app.storage_garbage (storage_key, collect_after)
      select storage_upload_abort.storage_key, now()
       where not exists (select from app.storage_objects o where o.storage_key = storage_upload_abort.storage_key)
      on conflict do nothing;
  $$;

COMMENT ON FUNCTION private.storage_upload_abort(upload_id uuid, storage_key text) IS 'An upload that will not finish (refused, cut off, cancelled): forgets it (the quota it reserved is free again, and the signed upload URL it began with may be used again), and its key goes to app.storage_garbage unless an object uses it.';


CREATE FUNCTION private.storage_upload_finish(upload_id uuid, size bigint, etag text, content_type text, cache_control text, user_metadata jsonb, width integer, height integer) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  u app.storage_uploads;
  o app.storage_objects;
begin
  delete from app.storage_uploads p where p.id = storage_upload_finish.upload_id and p.expires_at > now() returning p.* into u;
  if u.id is null then
    raise exception 'The upload expired or was cancelled' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
  -- The right to write may have ended while the bytes were on their way.
  if u.owner_id is not null and not private.storage_folder_owned(u.bucket_id, u.name, u.owner_id) then
    raise exception 'Access denied: you may not write %/%', u.bucket_id, u.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  if u.upsert then
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      on conflict on constraint storage_objects_bucket_name_key do update
        set owner_id = excluded.owner_id, storage_key = excluded.storage_key, size = excluded.size, content_type = excluded.content_type,
            cache_control = excluded.cache_control, etag = excluded.etag, width = excluded.width, height = excluded.height,
            user_metadata = excluded.user_metadata, version = gen_random_uuid()
      returning s.* into o;
  else
    if exists (select from app.storage_objects x where x.bucket_id = u.bucket_id and x.name = u.name) then
      raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
    end if;
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      returning s.* into o;
  end if;
  return private.storage_object_json(o);
end;
$$;

COMMENT ON FUNCTION private.storage_upload_finish(upload_id uuid, size bigint, etag text, content_type text, cache_control text, user_metadata jsonb, width integer, height integer) IS 'Makes an upload''s object visible, once its bytes are durable (the gateway calls it, as its own role, with what it measured): the row is inserted (or, with upsert, replaced: the old bytes go to app.storage_garbage) in this one transaction. PT404 upload_not_found (expired), PT403 storage_access_denied (the right ended), PT409 object_exists (another upload won), and the bucket''s and the quota''s refusals (triggers).';


CREATE FUNCTION private.storage_uploads_expire(max_rows integer DEFAULT 1000) RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.storage_uploads u
       where u.id in (select x.id from app.storage_uploads x where x.expires_at <= now()
                       order by x.expires_at limit storage_uploads_expire.max_rows for update skip locked)
      returning u.storage_key, u.signed_token_hash
    ), tokens as (
      -- Given back (the upload did not finish), or past the token's own expiry.
      delete from app.storage_signed_uploads t
       where t.token_hash in (select g.signed_token_hash from gone g)
          or t.token_hash in (select x.token_hash from app.storage_signed_uploads x where x.expires_at <= now()
                               limit storage_uploads_expire.max_rows)
    ), kept as (
      insert into app.storage_garbage (storage_key, collect_after)
        select g.storage_key, now() from gone g
         where not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
        on conflict do nothing
    )
    select count(*)::integer from gone
  $$;

COMMENT ON FUNCTION private.storage_uploads_expire(max_rows integer) IS 'Uploads past their expiry (cut off, or their gateway killed): forgotten (a signed upload URL they began with given back), their keys to app.storage_garbage; used signed upload URLs past their own expiry forgotten. Returns how many uploads (the storage_collect job).';
