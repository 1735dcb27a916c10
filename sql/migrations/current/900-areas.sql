-- Made by `npm run db -- areas --diff` from sql/areas: the statements that make the
-- migrated database what the area files state, planned by pg-delta. Each run
-- writes it again: edit the area files, not this one. Data changes go in a
-- file of this folder numbered below 900 (docs/dba.md, "Changing a rule").

set local check_function_bodies = off;

DROP FUNCTION "api"."connection_update"(uuid, jsonb);

DROP FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text);

DROP FUNCTION "api"."event_update"(uuid, jsonb, text);

DROP FUNCTION "api"."profile_patch"(jsonb);

DROP FUNCTION "api"."task_delete"(uuid);

DROP FUNCTION "api"."task_update"(uuid, jsonb);

DROP FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text);

DROP FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text);

CREATE OR REPLACE FUNCTION api.connection_update(id uuid, patch jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  current_row app.connections;
begin
  if connection_update.if_match is not null then
    select c.* into current_row from app.connections c where c.id = connection_update.id for no key update;
    if found then
      perform app.check_if_match(connection_update.if_match, current_row.updated_at, private.connection_json(current_row));
    end if;
  end if;
  return query
    update app.connections c
       set notes = case when patch ? 'notes' then patch ->> 'notes' else c.notes end,
           strength = case when patch ? 'strength' then patch ->> 'strength' else c.strength end,
           tags = case
                    when not patch ? 'tags' then c.tags
                    when jsonb_typeof(patch -> 'tags') = 'array'
                      then array(select jsonb_array_elements_text(patch -> 'tags'))
                    else '{}'
                  end
     where c.id = connection_update.id
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.etag(version timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE STRICT
 SET search_path TO 'pg_catalog'
AS $function$
    select '"' || ((extract(epoch from version) * 1000000)::bigint)::text || '"'
  $function$;

CREATE OR REPLACE FUNCTION api.event_checkin(event_id uuid, hat_id uuid DEFAULT NULL::uuid, location_id uuid DEFAULT NULL::uuid, visibility text DEFAULT NULL::text, checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found_event app.events := private.find_event(event_checkin.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query select * from private.check_in(found_event.id, null, hat_id, location_id, visibility,
                                               private.checkin_device_time(found_event, event_checkin.checked_in_at));
end;
$function$;

CREATE OR REPLACE FUNCTION api.event_etag(id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select api.etag((private.find_event(event_etag.id)).updated_at)
  $function$;

CREATE OR REPLACE FUNCTION api.event_update(id uuid, patch jsonb, public_url text, if_match text[] DEFAULT NULL::text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  found_event app.events := private.find_event(event_update.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  if not private.is_community_manager(found_event.community_id, caller) then
    raise exception 'only managers of the event''s community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if event_update.if_match is not null then
    select e.* into found_event from app.events e where e.id = found_event.id for no key update;
    perform app.check_if_match(event_update.if_match, found_event.updated_at, private.event_json(found_event, event_update.public_url));
  end if;
  if pg_catalog.jsonb_typeof(event_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if event_update.patch ? 'image_path' then
    -- An object of the event-images bucket in the event's folder, or null to clear (a platform's external image stays).
    update app.events e
       set image_object_id = private.storage_image_object('event-images', event_update.patch->>'image_path', caller)
     where e.id = found_event.id
    returning e.* into found_event;
  end if;
  return private.event_json(found_event, event_update.public_url);
end;
$function$;

CREATE OR REPLACE FUNCTION api.profile_patch(patch jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  version timestamp with time zone;
begin
  if pg_catalog.jsonb_typeof(profile_patch.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if profile_patch.if_match is not null then
    select p.updated_at into version from app.profiles p where p.id = caller for no key update;
    if found then
      perform app.check_if_match(profile_patch.if_match, version, private.profile_json(caller));
    end if;
  end if;
  if profile_patch.patch ? 'name' then
    perform api.profile_update(profile_patch.patch->>'name');
  end if;
  if profile_patch.patch ? 'avatar_path' then
    -- An object of the avatars bucket in the caller's own folder, or null to clear.
    update app.profiles p
       set avatar_object_id = private.storage_image_object('avatars', profile_patch.patch->>'avatar_path', caller)
     where p.id = caller;
    if not found then
      raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
    end if;
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = caller;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.task_delete(task_id uuid, if_match text[] DEFAULT NULL::text[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  task app.tasks;
begin
  if task_delete.if_match is not null then
    select * into task from app.tasks t where t.id = task_delete.task_id for update;
    if found then
      perform app.check_if_match(task_delete.if_match, task.updated_at, private.task_json(task));
    end if;
  end if;
  delete from app.tasks t where t.id = task_delete.task_id;
  if found then
    return;
  end if;
  if private.task_exists(task_delete.task_id) then
    raise exception 'only the creator of a task can delete it' using errcode = 'PT403', hint = 'not_task_creator';
  end if;
  raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
end;
$function$;

CREATE OR REPLACE FUNCTION api.task_update(task_id uuid, changes jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.task
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  task app.tasks;
  new_meta jsonb;
  new_deal jsonb;
begin
  if changes is null or jsonb_typeof(changes) <> 'object' then
    raise exception 'the body must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if changes ? 'status' then
    raise exception 'status cannot be changed with PATCH; use start or complete' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if exists (select from jsonb_object_keys(changes) k where k not in ('title', 'description', 'deal_context')) then
    raise exception 'only title, description and deal_context can be changed' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if jsonb_typeof(changes -> 'deal_context') not in ('object', 'null') then
    raise exception 'deal_context must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;

  select * into task from app.tasks t where t.id = task_update.task_id for no key update;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  perform app.check_if_match(task_update.if_match, task.updated_at, private.task_json(task));

  new_meta := task.meta || (changes - 'deal_context');
  if changes ? 'deal_context' then
    if jsonb_typeof(changes -> 'deal_context') = 'null' then
      new_meta := new_meta - 'deal_context';
    else
      new_deal := jsonb_strip_nulls(coalesce(task.meta -> 'deal_context', '{}') || (changes -> 'deal_context'));
      new_meta := case when new_deal = '{}' then new_meta - 'deal_context'
                       else jsonb_set(new_meta, '{deal_context}', new_deal) end;
    end if;
  end if;
  -- Null removes a top-level key (never status, which is not in changes).
  new_meta := new_meta - array(select k from jsonb_each(changes) e(k, v) where jsonb_typeof(v) = 'null');

  return query
    update app.tasks t set meta = new_meta
     where t.id = task.id
     returning t.id, t.created_by, t.inserted_at, t.updated_at, t.meta;
end;
$function$;

CREATE OR REPLACE FUNCTION app.check_if_match(if_match text[], version timestamp with time zone, current jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  etag text := api.etag(version);
begin
  -- No If-Match: no condition. `*`: any current version (the object exists,
  -- or the caller would have had 404). Otherwise one of the tags must be the
  -- current one, compared strongly: a weak tag (W/"...") never matches.
  if if_match is null or '*' = any(if_match) or etag = any(if_match) then
    return;
  end if;
  raise exception 'the object changed since the version given in If-Match' using errcode = 'PT412', hint = 'precondition_failed',
    detail = pg_catalog.jsonb_build_object('etag', etag, 'current', current)::text;
end;
$function$;

CREATE OR REPLACE FUNCTION private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  return query select * from private.check_in_user(caller, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at);
end;
$function$;

CREATE OR REPLACE FUNCTION private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  checkin_row app.checkins;
begin
  loop
    insert into app.checkins as c (user_id, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at)
      values (check_in_user.user_id, check_in_user.event_id, check_in_user.venue_node_id, check_in_user.hat_id,
              check_in_user.location_id, coalesce(check_in_user.visibility, 'anonymous'), check_in_user.device_checked_in_at)
      on conflict do nothing
      returning c.* into checkin_row;
    if checkin_row.id is not null then
      return query select true, private.checkin_json(checkin_row);
      return;
    end if;
    select c.* into checkin_row
      from app.checkins c
     where c.user_id = check_in_user.user_id
       and c.checked_out_at is null
       and c.event_id is not distinct from check_in_user.event_id
       and c.venue_node_id is not distinct from check_in_user.venue_node_id;
    if checkin_row.id is not null then
      return query select false, private.checkin_json(checkin_row);
      return;
    end if;
    -- Checked out between the two statements: try again.
  end loop;
end;
$function$;

CREATE OR REPLACE FUNCTION private.checkin_device_time(event app.events, device_time timestamp with time zone, as_of timestamp with time zone DEFAULT now())
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- An offline check-in: the phone's clock, trusted within bounds. At most 5
  -- minutes ahead of the server (clock skew), at most 24 hours behind it (a
  -- day offline), and inside the event's check-in window (the venue window:
  -- 2 hours before its date to 2 hours after its effective end).
  if device_time is null then
    return null;
  end if;
  if device_time > as_of + interval '5 minutes' then
    raise exception 'checked_in_at is in the future (more than 5 minutes ahead of the server)'
      using errcode = 'PT422', hint = 'checkin_time_in_future';
  end if;
  if device_time < as_of - interval '24 hours' then
    raise exception 'checked_in_at is more than 24 hours old' using errcode = 'PT422', hint = 'checkin_time_too_old';
  end if;
  if device_time < event.starts_at - interval '2 hours'
     or device_time > private.event_effective_end(event.starts_at, event.ends_at) + interval '2 hours' then
    raise exception 'checked_in_at is outside the event''s check-in window (2 hours before its start to 2 hours after its end)'
      using errcode = 'PT422', hint = 'checkin_time_outside_event';
  end if;
  return device_time;
end;
$function$;

CREATE OR REPLACE FUNCTION private.checkin_json(c app.checkins)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
      'id', c.id,
      'type', case when c.event_id is not null then 'event' else 'venue' end,
      'event_id', c.event_id,
      'venue_id', c.venue_node_id,
      'hat_id', c.hat_id,
      'location_id', c.location_id,
      'visibility', c.visibility,
      'checked_in_at', app.iso(c.checked_in_at),
      'checked_out_at', app.iso(c.checked_out_at),
      'device_checked_in_at', app.iso(c.device_checked_in_at)
    )
  $function$;

CREATE OR REPLACE FUNCTION private.connection_json(c app.connections)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', c.id, 'owner_node_id', c.owner_node_id, 'target_node_id', c.target_node_id,
                              'connection_type', c.connection_type, 'event_id', c.event_id, 'my_hat_id', c.my_hat_id,
                              'their_hat_id', c.their_hat_id, 'notes', c.notes, 'strength', c.strength, 'tags', c.tags,
                              'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
  $function$;

CREATE OR REPLACE FUNCTION private.idempotency_key_lifetime()
 RETURNS interval
 LANGUAGE sql
 IMMUTABLE
AS $function$ select interval '48 hours' $function$;

CREATE OR REPLACE FUNCTION private.profile_json(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', p.id, 'email', u.email, 'name', p.name, 'is_premium', s.is_premium,
                              'subscription_type', p.subscription_type, 'max_hats', s.max_hats, 'node_id', p.node_id,
                              'created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at),
                              'avatar_url', app.storage_public_url(p.avatar_object_id))
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = profile_json.user_id and p.id = auth.uid()
  $function$;

CREATE OR REPLACE FUNCTION private.task_json(task app.tasks)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', task.id, 'created_by', task.created_by, 'inserted_at', app.iso(task.inserted_at),
                              'updated_at', app.iso(task.updated_at), 'meta', task.meta)
  $function$;

COMMENT ON COLUMN "app"."checkins"."device_checked_in_at" IS 'When the phone says it checked in (an offline check-in sent later), beside checked_in_at (the server''s time of arrival): at most 24 hours before it and 5 minutes after it (clock skew), and inside the event''s check-in window (private.checkin_device_time); null when the phone sent none.';

COMMENT ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) IS 'PATCH /api/mobile/connections/{id}: changes notes, strength and tags given in the patch. PT404 when unknown or someone else''s; PT412 precondition_failed (with the current connection) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "api"."etag"(timestamp with time zone) IS 'The ETag of a single object of the REST interface: its row''s updated_at (set on every update by private.tg__set_updated_at) in microseconds since 1970, quoted (a strong entity tag). The gateway answers it on every single-object GET and write; app.check_if_match compares If-Match to it.';

COMMENT ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) IS 'POST /api/mobile/events/{event_id}/checkin: checks the caller in (created) or returns the current check-in. checked_in_at: the phone''s time of an offline check-in, kept as device_checked_in_at beside the server''s (private.checkin_device_time: PT422 checkin_time_in_future, checkin_time_too_old, checkin_time_outside_event). PT404 unknown event, PT422 a hat not the caller''s.';

COMMENT ON FUNCTION "api"."event_etag"(uuid) IS 'GET and PATCH /api/mobile/events/{id}: the event''s ETag (api.etag of its updated_at; by id or node id), answered beside the Event object (which has no updated_at); null when unknown.';

COMMENT ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) IS 'PATCH /api/mobile/events/{id}: a manager of the event''s community changes what the patch names: image_path (an object of the event-images bucket in the event''s folder, or null to clear). PT403 not_community_manager, PT404 event_not_found, PT422 invalid_image_path; PT412 precondition_failed (with the current event) when if_match (the If-Match tags) names another version (api.event_etag).';

COMMENT ON FUNCTION "api"."idempotency_claim"(text, text) IS 'Claims an Idempotency-Key for the caller''s credential (private.idempotency_credential) in the request''s transaction, before the route''s call, and returns null; or, when the credential sent the same request (request_hash: SHA-256 of method, path and body, hex) in the last 48 hours, returns its stored answer {status, answer: {headers, body}}, which the gateway sends only if the route does not refuse the caller now. PT409 idempotency_key_in_progress while another transaction holds the key; PT422 idempotency_key_reused for another request.';

COMMENT ON FUNCTION "api"."profile_patch"(jsonb, text[]) IS 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile; PT412 precondition_failed (with the current profile) when if_match (the If-Match tags) names another version (api.etag of the profile''s updated_at).';

COMMENT ON FUNCTION "api"."task_delete"(uuid, text[]) IS 'DELETE /api/mobile/tasks/{id}: deletes one of the caller''s tasks and its links; PT403 for another user''s task, PT404 for none; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) IS 'PATCH /api/mobile/tasks/{id}: merges title, description and deal_context into meta (null removes); PT422 for status or other keys; PT404; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) IS 'A write''s If-Match (the entity tags sent; null: none) against the object''s current version (api.etag of its updated_at), called with the row locked: PT412 precondition_failed with {etag, current: the object as the route answers it} in the DETAIL when no tag matches (nothing is written: the transaction fails).';

COMMENT ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) IS 'Checks the caller in to an event or a venue (device_checked_in_at: the phone''s time, already checked); idempotent: returns the current check-in with created = false.';

COMMENT ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) IS 'Checks a user in to an event or a venue; idempotent: returns the current check-in with created = false. Runs with the caller''s rights: for a request role, row-level security admits only the caller''s own user_id.';

COMMENT ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) IS 'The phone''s time of an offline event check-in, checked: null stays null; PT422 checkin_time_in_future past as_of + 5 minutes, checkin_time_too_old before as_of - 24 hours, checkin_time_outside_event outside date - 2h .. effective end + 2h.';

COMMENT ON FUNCTION "private"."connection_json"(app.connections) IS 'A connection as the REST interface answers it (the Connection object), for the current object of a PT412.';

COMMENT ON FUNCTION "private"."idempotency_key_lifetime"() IS 'How long an idempotency key and its answer are kept: 48 hours, so that a write replayed after a day offline keeps its key.';

COMMENT ON FUNCTION "private"."idempotency_keys_prune"(integer) IS 'Deletes idempotency keys older than 48 hours, at most max_rows (oldest first), and counts them off their callers; returns how many. The background worker''s crontab runs it.';

COMMENT ON FUNCTION "private"."profile_json"(uuid) IS 'The caller''s profile as the REST interface answers it (the UserProfile object), for the current object of a PT412; null for anyone else''s id.';

COMMENT ON FUNCTION "private"."task_json"(app.tasks) IS 'A task as the REST interface answers it (the Task object), for the current object of a PT412.';

COMMENT ON TABLE "app"."idempotency_keys" IS 'Idempotency keys of the last 48 hours, per user and credential (at most 1,000 a user): the key''s SHA-256, the request''s SHA-256 (method, path, body), the status of a success and the answer (encrypted with a key derived from the user, the credential and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';

REVOKE ALL ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."etag"(timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."etag"(timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_etag"(uuid) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_etag"(uuid) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."profile_patch"(jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."profile_patch"(jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."task_delete"(uuid, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."task_delete"(uuid, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."connection_json"(app.connections) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."connection_json"(app.connections) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."profile_json"(uuid) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."task_json"(app.tasks) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."task_json"(app.tasks) TO "authenticated";

REVOKE ALL ("device_checked_in_at") ON TABLE "app"."checkins" FROM "authenticated";

GRANT INSERT ("device_checked_in_at") ON TABLE "app"."checkins" TO "authenticated";
