-- =============================================================================
-- Operator functions
-- =============================================================================
-- What the REST interface has no endpoint for: functions for a database
-- owner in psql, wrapped by `npm run admin` (docs/dba.md, "Operator
-- functions"). No request role may use the schema.
--
-- Code: gateway/tooling/admin.ts
-- pgTAP: supabase/tests/admin.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Functions of admin: operator functions (psql, `npm run admin`)
-- =============================================================================

CREATE FUNCTION admin.add_manager(community_id uuid, email text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  member_node uuid := private.user_node_by_email(email);
begin
  if not exists (select from app.communities c where c.id = add_manager.community_id) then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  insert into app.community_members as m (community_id, member_node_id, role)
    values (add_manager.community_id, member_node, 'manager')
    on conflict on constraint community_members_pkey do update set role = 'manager';
end;
$$;

COMMENT ON FUNCTION admin.add_manager(community_id uuid, email text) IS 'Makes the user a manager of the community, joining them first if they are not a member.';


CREATE FUNCTION admin.create_community(name text, description text DEFAULT NULL::text, tags text[] DEFAULT '{}'::text[], manager_email text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  manager_node uuid;
  new_node uuid;
  new_community uuid;
begin
  if manager_email is not null then
    manager_node := private.user_node_by_email(manager_email);
  end if;
  insert into app.nodes (kind) values ('community') returning id into new_node;
  insert into app.communities (node_id, name, description, tags)
    values (new_node, btrim(name), description, coalesce(tags, '{}'))
    returning id into new_community;
  if manager_node is not null then
    insert into app.community_members (community_id, member_node_id, role)
      values (new_community, manager_node, 'manager');
  end if;
  return new_community;
end;
$$;

COMMENT ON FUNCTION admin.create_community(name text, description text, tags text[], manager_email text) IS 'Creates a community (and its node); the user with manager_email, if given, becomes its manager. Returns the community id.';


CREATE FUNCTION admin.create_event(community_id uuid, title text, starts_at timestamp with time zone, ends_at timestamp with time zone DEFAULT NULL::timestamp with time zone, venue_node_id uuid DEFAULT NULL::uuid, description text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  new_node uuid;
  new_event uuid;
begin
  if not exists (select from app.communities c where c.id = create_event.community_id) then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  if venue_node_id is not null
     and not exists (select from app.venues v where v.node_id = create_event.venue_node_id) then
    raise exception 'no venue with node id %', venue_node_id using errcode = 'P0002';
  end if;
  if ends_at is not null and ends_at < starts_at then
    raise exception 'ends_at (%) is before starts_at (%)', ends_at, starts_at using errcode = 'PT400';
  end if;
  insert into app.nodes (kind) values ('event') returning id into new_node;
  insert into app.events (node_id, community_id, title, description, starts_at, ends_at, venue_node_id, location)
    values (new_node, create_event.community_id, btrim(title), description, starts_at, ends_at, venue_node_id,
            (select v.name from app.venues v where v.node_id = create_event.venue_node_id))
    returning id into new_event;
  return new_event;
end;
$$;

COMMENT ON FUNCTION admin.create_event(community_id uuid, title text, starts_at timestamp with time zone, ends_at timestamp with time zone, venue_node_id uuid, description text) IS 'Creates an event of a community (and its node), optionally at a venue. Returns the event id.';


CREATE FUNCTION admin.create_user(email text, password text, name text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select private.create_account(email, password, name)
  $$;

COMMENT ON FUNCTION admin.create_user(email text, password text, name text) IS 'Creates a user with profile and node, exactly as POST /api/auth/register does. Returns the user id.';


CREATE FUNCTION admin.create_venue(name text, address text DEFAULT NULL::text, latitude double precision DEFAULT NULL::double precision, longitude double precision DEFAULT NULL::double precision) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  new_node uuid;
begin
  insert into app.nodes (kind) values ('venue') returning id into new_node;
  insert into app.venues (node_id, name, address, latitude, longitude)
    values (new_node, btrim(name), address, latitude, longitude);
  return new_node;
end;
$$;

COMMENT ON FUNCTION admin.create_venue(name text, address text, latitude double precision, longitude double precision) IS 'Creates a venue. Returns its node id (the id venue paths take).';


CREATE FUNCTION admin.delete_user(email text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(delete_user.email));
  if account_id is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  return private.account_delete(account_id);
end;
$$;

COMMENT ON FUNCTION admin.delete_user(email text) IS 'Deletes the account with this e-mail and everything of the person, as its owner deleting it does (private.account_delete): refused (PT409 last_manager_of_communities) while it is the only manager of a community. Returns user_id, node_id, communities_left.';


CREATE FUNCTION admin.forms_list(max_rows integer DEFAULT 50, since timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(id bigint, received_at timestamp with time zone, size_bytes integer, payload jsonb)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select f.id, f.received_at, f.size_bytes, f.payload
      from app.form_submissions f
     where since is null or f.received_at >= since
     order by f.received_at desc, f.id desc
     limit greatest(coalesce(max_rows, 50), 0)
  $$;

COMMENT ON FUNCTION admin.forms_list(max_rows integer, since timestamp with time zone) IS 'The forms posted to POST /api/v1/forms, newest first: at most max_rows (default 50), received at or after since (if given).';


CREATE FUNCTION admin.job_workers() RETURNS TABLE(worker text, connected_since timestamp with time zone, client_addr text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    -- Every worker holds a connection named after its graphile-worker pool id.
    select substr(a.application_name, length('job-worker ') + 1), a.backend_start, host(a.client_addr)
      from pg_stat_activity a
     where a.datname = current_database() and a.application_name like 'job-worker %'
     order by a.backend_start
  $$;
COMMENT ON FUNCTION admin.job_workers() IS 'The job workers connected now (their graphile-worker pool ids).';


CREATE FUNCTION admin.jobs(max_rows integer DEFAULT 50) RETURNS TABLE(id bigint, task text, queue text, state text, attempts integer, max_attempts integer, run_at timestamp with time zone, locked_by text, locked_at timestamp with time zone, last_error text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if to_regnamespace('graphile_worker') is null then
    raise exception 'the job queue is not installed (schema graphile_worker): start the gateway or `npm run worker` once'
      using errcode = '55000';
  end if;
  -- running: locked by a connected worker; orphaned: locked by a worker that
  -- is gone; failed: out of attempts; due: waiting for a free worker;
  -- scheduled: a retry or a job for later.
  return query
    select j.id::bigint, j.task_identifier::text, j.queue_name::text, s.state, j.attempts::integer, j.max_attempts::integer, j.run_at,
           j.locked_by::text, j.locked_at, left(j.last_error, 500)::text
      from graphile_worker.jobs j,
           lateral (select case when j.locked_at is not null
                                 and exists (select from pg_stat_activity a
                                              where a.datname = current_database()
                                                and a.application_name = 'job-worker ' || j.locked_by) then 'running'
                                when j.locked_at is not null then 'orphaned'
                                when j.attempts >= j.max_attempts then 'failed'
                                when j.run_at <= now() then 'due'
                                else 'scheduled' end as state) s
     order by array_position(array['running', 'orphaned', 'due', 'failed', 'scheduled'], s.state), j.run_at, j.id
     limit greatest(jobs.max_rows, 0);
end;
$$;

COMMENT ON FUNCTION admin.jobs(max_rows integer) IS 'The worker''s queue (graphile_worker.jobs): running, orphaned (locked by a worker that is gone), due, failed and scheduled jobs, in that order, with attempts and last errors.';


CREATE FUNCTION admin.mcp_tool_calls(email text DEFAULT NULL::text, max_rows integer DEFAULT 100) RETURNS TABLE(id bigint, called_at timestamp with time zone, user_email text, tool text, outcome text, duration_ms numeric, credential_kind text, arguments jsonb, error_message text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select c.id, c.called_at, u.email, c.tool, c.outcome, c.duration_ms, c.credential_kind, c.arguments, c.error_message
      from app.mcp_tool_calls c
      join identity.users u on u.id = c.user_id
     where mcp_tool_calls.email is null or u.email = lower(btrim(mcp_tool_calls.email))
     order by c.id desc
     limit max_rows
  $$;

COMMENT ON FUNCTION admin.mcp_tool_calls(email text, max_rows integer) IS 'The latest MCP tool calls (of one user when email is given): who, which tool, outcome, duration, arguments.';


CREATE FUNCTION admin.outbox(max_rows integer DEFAULT 50, unsent_only boolean DEFAULT false) RETURNS TABLE(id uuid, to_email text, purpose text, subject text, link text, created_at timestamp with time zone, sent_at timestamp with time zone, attempts integer, last_error text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select o.id, o.to_email, o.purpose, o.subject, o.link, o.created_at, o.sent_at, o.attempts, o.last_error
      from app.email_outbox o
     where not outbox.unsent_only or o.sent_at is null
     order by o.created_at desc
     limit greatest(outbox.max_rows, 0)
  $$;

COMMENT ON FUNCTION admin.outbox(max_rows integer, unsent_only boolean) IS 'The newest e-mails (links of unsent ones included), for operators without SMTP or checking delivery.';


CREATE FUNCTION admin.prune_change_log(older_than interval DEFAULT '30 days'::interval) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  cutoff bigint;
  gone bigint;
begin
  select max(c.id) into cutoff from app.change_log c where c.changed_at < now() - older_than;
  if cutoff is null then
    return 0;
  end if;
  update app.change_log_state set pruned_through = greatest(pruned_through, cutoff);
  delete from app.change_log c where c.id <= cutoff;
  get diagnostics gone = row_count;
  return gone;
end;
$$;

COMMENT ON FUNCTION admin.prune_change_log(older_than interval) IS 'Deletes change-log entries up to the newest one older than the interval (default 30 days) and records the watermark; returns how many. The gateway calls it periodically (CHANGE_LOG_RETENTION_HOURS).';


CREATE FUNCTION admin.publish_events_to_supabase_realtime() RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if not exists (select from pg_catalog.pg_publication p where p.pubname = 'supabase_realtime' and not p.puballtables) then
    return false;
  end if;
  if not exists (
    select from pg_catalog.pg_publication_tables t
     where t.pubname = 'supabase_realtime' and t.schemaname = 'app' and t.tablename = 'events'
  ) then
    alter publication supabase_realtime add table app.events;
  end if;
  return true;
end;
$$;
COMMENT ON FUNCTION admin.publish_events_to_supabase_realtime() IS 'Adds app.events to the supabase_realtime publication where it exists (Supabase); returns whether it did or it was already there.';


CREATE FUNCTION admin.set_community_flags(community_id uuid, is_sandbox boolean, is_draft boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  update app.communities c
    set is_sandbox = coalesce(set_community_flags.is_sandbox, c.is_sandbox),
        is_draft = coalesce(set_community_flags.is_draft, c.is_draft)
    where c.id = set_community_flags.community_id;
  if not found then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
end;
$$;

COMMENT ON FUNCTION admin.set_community_flags(community_id uuid, is_sandbox boolean, is_draft boolean) IS 'Sets the sandbox and draft flags of a community (null leaves a flag as it is).';


CREATE FUNCTION admin.set_community_timezone(community_id uuid, timezone text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  zone text := private.time_zone_name(set_community_timezone.timezone);
begin
  update app.communities c set timezone = zone, updated_at = now() where c.id = set_community_timezone.community_id;
  if not found then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  return zone;
end;
$$;

COMMENT ON FUNCTION admin.set_community_timezone(community_id uuid, timezone text) IS 'Sets a community''s IANA time zone (null: unknown), which its events made from now on take when neither they nor their venue name one. Returns it as pg_timezone_names spells it; PT422 invalid_timezone for an unknown name.';


CREATE FUNCTION admin.set_subscription(email text, subscription_type text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target uuid;
begin
  if not exists (select from app.subscription_plans s where s.id = set_subscription.subscription_type) then
    raise exception 'unknown subscription type % (known: %)', subscription_type,
      (select string_agg(s.id, ', ' order by s.id) from app.subscription_plans s)
      using errcode = 'PT400';
  end if;
  update app.profiles p set subscription_type = set_subscription.subscription_type
    from identity.users u
    where u.id = p.id and u.email = lower(btrim(set_subscription.email))
    returning p.id into target;
  if target is null then
    raise exception 'no user profile with email %', email using errcode = 'P0002';
  end if;
end;
$$;

COMMENT ON FUNCTION admin.set_subscription(email text, subscription_type text) IS 'Sets a user''s subscription type (basic or premium), which sets their max_hats.';


CREATE FUNCTION admin.set_venue_timezone(venue_node_id uuid, timezone text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  zone text := private.time_zone_name(set_venue_timezone.timezone);
begin
  update app.venues v set timezone = zone where v.node_id = set_venue_timezone.venue_node_id;
  if not found then
    raise exception 'no venue with node id %', venue_node_id using errcode = 'P0002';
  end if;
  return zone;
end;
$$;

COMMENT ON FUNCTION admin.set_venue_timezone(venue_node_id uuid, timezone text) IS 'Sets a venue''s IANA time zone (null: unknown), which events made there from now on take when they name none. Returns it as pg_timezone_names spells it; PT422 invalid_timezone for an unknown name.';


CREATE FUNCTION admin.storage_bucket_create(id text, public boolean, folder_owner text, file_size_limit bigint, allowed_mime_types text[] DEFAULT NULL::text[], images boolean DEFAULT false, download_as_attachment boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if storage_bucket_create.images and not storage_bucket_create.allowed_mime_types <@ array['image/*', 'image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'] then
    raise exception 'an image bucket takes image/* or image/jpeg, png, webp, avif, gif only' using errcode = '22023';
  end if;
  insert into app.storage_buckets as b (id, public, folder_owner, file_size_limit, allowed_mime_types, images, download_as_attachment)
    values (storage_bucket_create.id, storage_bucket_create.public, storage_bucket_create.folder_owner, storage_bucket_create.file_size_limit,
            case when storage_bucket_create.images then coalesce(storage_bucket_create.allowed_mime_types, array['image/*'])
                 else storage_bucket_create.allowed_mime_types end,
            storage_bucket_create.images, storage_bucket_create.download_as_attachment)
    on conflict on constraint storage_buckets_pkey do update
      set public = excluded.public, folder_owner = excluded.folder_owner, file_size_limit = excluded.file_size_limit,
          allowed_mime_types = excluded.allowed_mime_types, images = excluded.images, download_as_attachment = excluded.download_as_attachment;
end;
$$;

COMMENT ON FUNCTION admin.storage_bucket_create(id text, public boolean, folder_owner text, file_size_limit bigint, allowed_mime_types text[], images boolean, download_as_attachment boolean) IS 'Creates (or changes) a storage bucket: public or private, whose folders (user, community or event), the size limit in bytes, the types it takes (null: any; image/* patterns), whether it holds images (sniffed, metadata stripped, transformations) and whether downloads are attachments.';


CREATE FUNCTION admin.storage_collect(due_now boolean DEFAULT false) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  due integer;
begin
  -- The bytes of deleted and replaced objects wait 10 minutes (collect_after),
  -- for downloads under way; due_now skips that wait and any retry back-off.
  if storage_collect.due_now then
    update app.storage_garbage g set collect_after = now() where g.collect_after > now();
  end if;
  select count(*)::integer into due from app.storage_garbage g where g.collect_after <= now();
  -- The job worker that has the byte store deletes them, now rather than at its next minute.
  perform private.enqueue_job('storage_collect', '{}'::jsonb, job_key => 'cron_storage_collect');
  return due;
end;
$$;

COMMENT ON FUNCTION admin.storage_collect(due_now boolean) IS 'Has a job worker collect storage garbage now (the storage_collect job, queued at once): the bytes of deleted and replaced objects, expired uploads. due_now: also the bytes still in their 10-minute grace period (collect_after) or retry back-off. Returns how many byte-store keys are due.';


CREATE FUNCTION admin.storage_set_limits(email text, quota_bytes bigint, uploads_per_minute integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target uuid;
begin
  select u.id into target from identity.users u where u.email = lower(btrim(storage_set_limits.email));
  if target is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  insert into app.storage_usage as s (user_id, quota_bytes, uploads_per_minute)
    values (target, storage_set_limits.quota_bytes, storage_set_limits.uploads_per_minute)
    on conflict (user_id) do update set quota_bytes = excluded.quota_bytes, uploads_per_minute = excluded.uploads_per_minute;
end;
$$;

COMMENT ON FUNCTION admin.storage_set_limits(email text, quota_bytes bigint, uploads_per_minute integer) IS 'Sets a user''s own storage quota (bytes) and uploads per minute; null for either: their plan''s.';


CREATE FUNCTION admin.storage_usage(max_rows integer DEFAULT 50) RETURNS TABLE(email text, bytes bigint, objects integer, quota_bytes bigint, uploads_per_minute integer)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select u.email, s.bytes, s.objects, private.storage_quota_bytes(s.user_id),
           coalesce(s.uploads_per_minute, (select pl.storage_uploads_per_minute from app.profiles p
                                             join app.subscription_plans pl on pl.id = p.subscription_type where p.id = s.user_id))
      from app.storage_usage s
      join identity.users u on u.id = s.user_id
     order by s.bytes desc, u.email
     limit greatest(coalesce(max_rows, 50), 0)
  $$;

COMMENT ON FUNCTION admin.storage_usage(max_rows integer) IS 'The users storing the most bytes: bytes, objects, their quota and uploads per minute.';


CREATE FUNCTION admin.user_create(email text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb, app_metadata jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  new_user uuid := private.create_account_with_hash(user_create.email, user_create.password_hash, null);
begin
  if user_create.user_metadata is not null then
    perform private.user_metadata_merge(new_user, user_create.user_metadata);
  end if;
  if user_create.app_metadata is not null then
    update identity.users u set app_metadata = private.metadata_merged(u.app_metadata, user_create.app_metadata, 'app_metadata')
     where u.id = new_user;
  end if;
  return private.auth_user_object(new_user);
end;
$$;

COMMENT ON FUNCTION admin.user_create(email text, password_hash text, user_metadata jsonb, app_metadata jsonb) IS 'POST /auth/v1/admin/users (the service-role key): creates an account as registration does (private.create_account_with_hash: profile and node; password_hash a bcrypt hash the gateway made, or null for an account that signs in only through a set-password link), merges user_metadata and app_metadata, and answers the User object. PT400 invalid_email / invalid_password_hash, PT409 email_taken, PT422 validation_error for user_metadata.';


CREATE FUNCTION admin.user_delete(user_id uuid) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if not exists (select from identity.users u where u.id = user_delete.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.account_delete(user_delete.user_id);
end;
$$;

COMMENT ON FUNCTION admin.user_delete(user_id uuid) IS 'DELETE /auth/v1/admin/users/{id} (the service-role key): deletes the account as admin.delete_user does (private.account_delete: refused, PT409 last_manager_of_communities, while it is the only manager of a community). PT404 not_found for an unknown id.';


CREATE FUNCTION admin.user_get(user_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if not exists (select from identity.users u where u.id = user_get.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.auth_user_object(user_get.user_id);
end;
$$;

COMMENT ON FUNCTION admin.user_get(user_id uuid) IS 'GET /auth/v1/admin/users/{id} (the service-role key): the account as Supabase Auth''s User object (private.auth_user_object). PT404 not_found for an unknown id.';


CREATE FUNCTION admin.user_update(user_id uuid, email text DEFAULT NULL::text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb, app_metadata jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  current_email text;
begin
  select u.email into current_email from identity.users u where u.id = user_update.user_id for update;
  if not found then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  -- One transaction: every change or none.
  if user_update.email is not null and lower(btrim(user_update.email)) is distinct from current_email then
    -- The operator's change needs no link: the address is the account's at once (PT400 invalid_email, PT409 email_taken).
    update identity.users u set email = private.account_email_check(user_update.email), updated_at = now()
     where u.id = user_update.user_id
     returning u.email into current_email;
    -- A name derived from the old address (private) is derived from the new one: no trace of the old address stays.
    update app.profiles p set name = split_part(current_email, '@', 1)
     where p.id = user_update.user_id and p.name_source = 'email';
  end if;
  if user_update.password_hash is not null then
    if not private.password_hash_valid(user_update.password_hash) then
      raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
    end if;
    update identity.users u set password_hash = user_update.password_hash, updated_at = now() where u.id = user_update.user_id;
    -- As Supabase Auth does when an operator sets a password: every session of the account ends (and its signed storage URLs).
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = user_update.user_id and r.revoked_at is null;
    perform private.storage_signed_urls_end(user_update.user_id);
  end if;
  if user_update.user_metadata is not null then
    perform private.user_metadata_merge(user_update.user_id, user_update.user_metadata);
  end if;
  if user_update.app_metadata is not null then
    -- Only here: the service-role key's door. A user's own door (PUT /auth/v1/user) has no way to it.
    update identity.users u
       set app_metadata = private.metadata_merged(u.app_metadata, user_update.app_metadata, 'app_metadata'), updated_at = now()
     where u.id = user_update.user_id;
  end if;
  return private.auth_user_object(user_update.user_id);
end;
$$;

COMMENT ON FUNCTION admin.user_update(user_id uuid, email text, password_hash text, user_metadata jsonb, app_metadata jsonb) IS 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account and its signed storage URLs; user_metadata is merged as PUT /auth/v1/user merges it, and app_metadata the same way (its only door: access tokens issued afterwards carry it). Answers the User object; PT404 not_found for an unknown id.';


CREATE FUNCTION admin.users_list(page integer, per_page integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if users_list.page < 1 or users_list.per_page < 1 or users_list.per_page > 1000 then
    raise exception 'page must be 1 or more and per_page 1 to 1000' using errcode = 'PT400', hint = 'validation_error';
  end if;
  return jsonb_build_object(
    'users', coalesce((
      select jsonb_agg(private.auth_user_object(u.id) order by u.created_at, u.id)
        from (select x.id, x.created_at from identity.users x
               order by x.created_at, x.id
               offset (users_list.page - 1)::bigint * users_list.per_page limit users_list.per_page) u), '[]'::jsonb),
    'total', (select count(*) from identity.users));
end;
$$;

COMMENT ON FUNCTION admin.users_list(page integer, per_page integer) IS 'GET /auth/v1/admin/users (the service-role key): a page of the accounts as Supabase Auth''s User objects, oldest first, and how many there are (total). PT400 validation_error for a page below 1 or per_page outside 1-1000.';


CREATE FUNCTION admin.webhook_failures(max_rows integer DEFAULT 20) RETURNS TABLE(delivery_id uuid, endpoint_id uuid, url text, event_type text, status text, attempts integer, last_status_code integer, last_error text, next_attempt_at timestamp with time zone, created_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select d.id, d.endpoint_id, e.url, d.event_type, d.status, d.attempts, d.last_status_code, d.last_error,
           d.next_attempt_at, d.created_at
      from app.webhook_deliveries d
      join app.webhook_endpoints e on e.id = d.endpoint_id
     where d.status in ('retrying', 'failed')
     order by d.created_at desc
     limit greatest(webhook_failures.max_rows, 0)
  $$;

COMMENT ON FUNCTION admin.webhook_failures(max_rows integer) IS 'The most recent webhook deliveries that failed or are waiting for a retry, newest first.';


CREATE FUNCTION admin.webhooks() RETURNS TABLE(id uuid, community_id uuid, community text, url text, events text[], active boolean, disabled_reason text, created_at timestamp with time zone, deliveries_24h bigint, failed_24h bigint, pending bigint, last_failure_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select e.id, e.community_id, c.name, e.url, e.events, e.active, e.disabled_reason, e.created_at,
           (select count(*) from app.webhook_deliveries d where d.endpoint_id = e.id and d.created_at > now() - interval '24 hours'),
           (select count(*) from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.created_at > now() - interval '24 hours' and d.status = 'failed'),
           (select count(*) from app.webhook_deliveries d where d.endpoint_id = e.id and d.status in ('pending', 'retrying')),
           (select max(d.created_at) from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.status in ('retrying', 'failed'))
      from app.webhook_endpoints e
      join app.communities c on c.id = e.community_id
     order by c.name, e.created_at
  $$;
COMMENT ON FUNCTION admin.webhooks() IS 'Every webhook endpoint with its community, state and delivery counts (last 24 hours; pending now).';
