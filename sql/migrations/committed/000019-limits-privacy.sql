--! Previous: sha1:6853fec50ec524035052bbb6fe279e08807370a9
--! Hash: sha1:32ff986fa730f5193a1db6e7285528a1e5763061
--! Message: limits-privacy

--! split: 700-bounded-work.sql
--------------------------------------------------------------------------------
-- Bounded work per request (issue 14)
--
-- * api.task_chain: depth is capped at private.task_chain_max_depth() (1000;
--   PT422 above it) and the walk is a breadth-first search that expands each
--   task once: a task enters the frontier only the first time it is reached,
--   so a ladder of links (i -> i+1, i -> i+2) costs O(tasks reached), not
--   O(paths).
-- * Free-form JSON and text a client stores is bounded in SQL as well as at
--   the gateway's edge: task meta, a link's transition_meta, connection tags.
--------------------------------------------------------------------------------

create or replace function private.task_chain_max_depth() returns integer
  language sql immutable
  set search_path = pg_catalog
  as $$ select 1000 $$;
comment on function private.task_chain_max_depth() is
  'The largest depth GET /api/mobile/tasks/{id}/chain accepts (a larger one is PT422).';
grant execute on function private.task_chain_max_depth() to authenticated;

-- One breadth-first walk for both directions. Each round reads the links of
-- the current frontier (the tasks first reached in the previous round) and
-- keeps the destinations not reached before, each with the earliest link
-- time that reached it in this round.
--
-- Security definer so that the plan cannot depend on row-level security: the
-- caller's rule (their own links from their own task) is applied explicitly,
-- written so that no index serves it (`is true`), and sequential and bitmap
-- scans are off, so every round is an index lookup of the frontier's links
-- (origin or destination index) whatever the statistics say. Without this a
-- freshly loaded table (no statistics yet) gets a plan that reads all of the
-- user's links every round: O(rounds x links). One generic plan serves every
-- round (planning each round would cost more than running it).
create or replace function private.task_chain_walk(start_id uuid, forward boolean, max_steps integer)
  returns table (id uuid, steps integer, via_at timestamptz)
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  set plan_cache_mode = force_generic_plan
  set enable_seqscan = off
  set enable_bitmapscan = off
  as $$
declare
  caller uuid := auth.uid();
  frontier uuid[] := array[start_id];
  reached uuid[] := array[start_id];
  next_ids uuid[];
  next_via timestamptz[];
  level integer := 0;
begin
  if caller is null or not exists (select from app.tasks t where t.id = start_id and t.created_by = caller) then
    return;
  end if;
  id := start_id; steps := 0; via_at := null;
  return next;
  while level < max_steps and cardinality(frontier) > 0 loop
    level := level + 1;
    select coalesce(array_agg(n.id order by n.id), '{}'), coalesce(array_agg(n.via_at order by n.id), '{}')
      into next_ids, next_via
      from (
        select c.id, min(c.at) as via_at
          from (
            select l.destination_id as id, l.inserted_at as at
              from app.task_transitions l
             where forward and l.origin_id = any (frontier) and (l.created_by = caller) is true
            union all
            select l.origin_id, l.inserted_at
              from app.task_transitions l
             where not forward and l.destination_id = any (frontier) and (l.created_by = caller) is true
          ) c
         where not (c.id = any (reached))
         group by c.id
      ) n;
    frontier := next_ids;
    reached := reached || next_ids;
    return query select u.id, level, u.via_at from unnest(next_ids, next_via) as u(id, via_at);
  end loop;
end;
$$;
comment on function private.task_chain_walk(uuid, boolean, integer) is
  'Breadth-first walk of the caller''s task links from start_id (their own task; else nothing), forward or backward, at most max_steps links: each reached task once with its distance and the earliest link time at that distance.';
grant execute on function private.task_chain_walk(uuid, boolean, integer) to authenticated;

create or replace function api.task_chain(task_id uuid, direction text default 'forward', depth integer default 50)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if task_chain.direction is null or task_chain.direction not in ('forward', 'backward') then
    raise exception 'direction must be forward or backward' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if task_chain.depth is null or task_chain.depth < 1 then
    raise exception 'depth must be at least 1' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if task_chain.depth > private.task_chain_max_depth() then
    raise exception 'depth must be at most %', private.task_chain_max_depth() using errcode = 'PT422', hint = 'validation_error';
  end if;
  if not exists (select from app.tasks t where t.id = task_chain.task_id) then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
      from private.task_chain_walk(task_chain.task_id, task_chain.direction = 'forward', task_chain.depth) w
      join app.tasks t on t.id = w.id
     order by w.steps, w.via_at nulls first, w.id;
end;
$$;
comment on function api.task_chain(uuid, text, integer) is
  'GET /api/mobile/tasks/{id}/chain: the task, then the tasks within `depth` (1..1000) links forward or backward, each once, nearest first; each task is visited once. PT404, PT422.';

--------------------------------------------------------------------------------
-- Size limits on free-form values (the gateway checks the same at its edge).
-- NOT VALID: rows stored before the limit stay readable; every new or
-- changed row is checked.
--------------------------------------------------------------------------------

alter table app.tasks drop constraint if exists tasks_meta_size;
alter table app.tasks add constraint tasks_meta_size
  check (octet_length(meta::text) <= 131072) not valid;

alter table app.task_transitions drop constraint if exists task_transitions_meta_size;
alter table app.task_transitions add constraint task_transitions_meta_size
  check (octet_length(meta::text) <= 32768) not valid;

alter table app.connections drop constraint if exists connections_tags_size;
alter table app.connections add constraint connections_tags_size
  check (octet_length(array_to_string(tags, '')) <= 5000) not valid;

--! split: 710-sessions.sql
--------------------------------------------------------------------------------
-- Sessions end when they are ended (issue 14)
--
-- An access token carries the session_id of the login it came from. Logout
-- and refresh-token reuse revoke the session's refresh tokens with reason
-- 'logout' or 'reused'; from then on the session is ended and every request
-- with one of its access tokens is refused (PT401): the gateway calls
-- private.check_session in the statement that sets the request's claims, so
-- the check costs no extra round trip. The partial index holds ended
-- sessions only, so the check is one small index probe.
--
-- The revocation also notifies channel `session_ended` (payload: the
-- session id), on which every gateway process closes the session's SSE
-- streams and websockets.
--------------------------------------------------------------------------------

-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the table is small (venues, or refresh tokens of ended sessions); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create index if not exists refresh_tokens_ended_session_idx
  on identity.refresh_tokens (session_id)
  where revoked_reason in ('logout', 'reused');

drop function if exists private.raise_session_ended();
drop function if exists private.check_session(text);
create or replace function private.check_session(session_id uuid) returns boolean
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  if check_session.session_id is not null and exists (
    select from identity.refresh_tokens t
     where t.session_id = check_session.session_id
       and t.revoked_reason in ('logout', 'reused')
  ) then
    raise exception 'the session of this access token has ended' using errcode = 'PT401', hint = 'session_ended';
  end if;
  return true;
end;
$$;
comment on function private.check_session(uuid) is
  'True unless the session (an access token''s session_id claim) was ended by logout or refresh-token reuse: then PT401 (hint session_ended). Null (no session): true.';
grant execute on function private.check_session(uuid) to anon, authenticated, service_role;

-- Which of the given sessions have ended (for a gateway re-checking its open
-- streams after its LISTEN connection was re-established).
create or replace function private.sessions_ended(session_ids uuid[]) returns setof uuid
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select distinct t.session_id
      from identity.refresh_tokens t
     where t.session_id = any (sessions_ended.session_ids)
       and t.revoked_reason in ('logout', 'reused')
  $$;
comment on function private.sessions_ended(uuid[]) is
  'The sessions among session_ids that logout or refresh-token reuse has ended.';

create or replace function private.tg_refresh_tokens__notify_session_ended() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
-- new_rows is the statement's transition table (see the trigger below).
-- @plpgsql_check_options: newtable = new_rows
begin
  perform pg_notify('session_ended', s.session_id::text)
     from (select distinct n.session_id from new_rows n where n.revoked_reason in ('logout', 'reused')) s;
  return null;
end;
$$;
comment on function private.tg_refresh_tokens__notify_session_ended() is
  'Trigger: NOTIFY session_ended with the id of every session a statement ended (logout or reuse).';

drop trigger if exists _900_notify_session_ended on identity.refresh_tokens;
create trigger _900_notify_session_ended after update on identity.refresh_tokens
  referencing new table as new_rows
  for each statement execute function private.tg_refresh_tokens__notify_session_ended();

--! split: 720-names.sql
--------------------------------------------------------------------------------
-- Privacy of names (issue 14)
--
-- A profile's name is either chosen by the user ('chosen': given at register
-- or signup, set with PATCH /api/mobile/profile, or given by an operator) or
-- derived from the e-mail address ('email': the part before the @, the
-- default when no name is given). private.create_account is the one place a
-- name is derived. A derived name is shown only to the user and to managers
-- of a community the user belongs to; everyone else gets null from
-- app.node_display_name, the one function through which member lists,
-- community managers and every other listing read another user's name.
--------------------------------------------------------------------------------

alter table app.profiles add column if not exists name_source text;
-- Existing rows: a name equal to the e-mail's local part was derived.
update app.profiles p
   set name_source = case when p.name = split_part(u.email, '@', 1) then 'email' else 'chosen' end
  from identity.users u
 where u.id = p.id and p.name_source is null;
alter table app.profiles alter column name_source set default 'chosen';
-- Safe: every row was given a value by the update just above, in the same transaction.
-- squawk-ignore adding-not-nullable-field
alter table app.profiles alter column name_source set not null;
alter table app.profiles drop constraint if exists profiles_name_source_valid;
-- Safe: the columns it checks are new in this migration (all null), so the validating scan finds nothing to refuse; graphile-migrate runs a migration in one transaction, where NOT VALID + VALIDATE would hold the same lock.
-- squawk-ignore constraint-missing-not-valid
alter table app.profiles add constraint profiles_name_source_valid check (name_source in ('chosen', 'email'));
comment on column app.profiles.name_source is
  'Where name came from: chosen (by the user or an operator) or email (derived from the e-mail address; shown only to the user and to managers of their communities).';

-- A password-less account (password null) can be created by the platform
-- flows (invitations, attendees); nobody can log in to it until a password is
-- set. api.auth_register always passes a password.
create or replace function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account.email));
  chosen_name text := nullif(btrim(create_account.name), '');
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account.password is not null and length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  if chosen_name is not null and length(chosen_name) > 200 then
    raise exception 'name must be at most 200 characters' using errcode = 'PT400', hint = 'invalid_name';
  end if;

  insert into identity.users (email, password_hash)
    values (normalised_email,
            case when create_account.password is not null then identity.hash_password(create_account.password) end)
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;

  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, name_source, node_id)
    values (new_user_id,
            coalesce(chosen_name, split_part(normalised_email, '@', 1)),
            case when chosen_name is null then 'email' else 'chosen' end,
            new_node_id);
  return new_user_id;
end;
$$;
comment on function private.create_account(text, text, text) is
  'Creates a user (hashed password, or none when password is null), their node and profile. Without a name the name is derived from the e-mail (name_source email, private). PT409 when the e-mail is taken.';

drop function if exists api.auth_register(text, text);
create or replace function api.auth_register(email text, password text, name text default null)
  returns setof api.auth_user
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  new_user uuid;
begin
  if auth_register.password is null then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  new_user := private.create_account(auth_register.email, auth_register.password, auth_register.name);
  return query select u.id, u.email from identity.users u where u.id = new_user;
end;
$$;
comment on function api.auth_register(text, text, text) is
  'POST /api/auth/register and /signup: creates user, profile and node (name optional; without one it is derived and private). PT409 (hint email_taken) for a duplicate e-mail.';
grant execute on function api.auth_register(text, text, text) to anon, authenticated;

-- Other users' profiles stay private (RLS: own row only); listings show a
-- user's name through this one function: a chosen name to every signed-in
-- user, a derived one only to the user and to managers of a community the
-- user belongs to (null to everyone else).
create or replace function app.node_display_name(node_id uuid) returns text
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select p.name
      from app.profiles p
     where p.node_id = node_display_name.node_id
       and (p.name_source = 'chosen'
            or p.id = auth.uid()
            or exists (
              select
                from app.community_members theirs
                join app.community_members mine on mine.community_id = theirs.community_id
                join app.profiles me on me.node_id = mine.member_node_id
               where theirs.member_node_id = node_display_name.node_id
                 and mine.role = 'manager'
                 and me.id = auth.uid()))
  $$;
comment on function app.node_display_name(uuid) is
  'The display name of a user node (profile name), and nothing else: null when the name was derived from the e-mail, unless the caller is that user or manages one of their communities.';

create or replace function api.profile_update(name text)
  returns setof api.user_profile
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  new_name text := btrim(profile_update.name);
begin
  if new_name is null or length(new_name) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update app.profiles p
     set name = new_name, name_source = 'chosen'
   where p.id = auth.uid();
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = auth.uid();
end;
$$;
comment on function api.profile_update(text) is
  'PATCH /api/mobile/profile: sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';
grant execute on function api.profile_update(text) to authenticated;
