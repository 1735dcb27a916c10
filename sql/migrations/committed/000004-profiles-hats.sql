--! Previous: sha1:d1ed2e62b315d1397e1a3b4689e55a081abb9f01
--! Hash: sha1:f8041c41203a3eaaf900c3220b5f658891e83971
--! Message: profiles-hats

--------------------------------------------------------------------------------
-- Nodes, profiles and hats
--
-- Every user, community, event and venue has a node; paths that say node_id
-- take that id. A profile belongs to an identity.users row (same id) and
-- points at the user's node. Hats are a user's personas; how many a user may
-- have comes from their subscription plan and is enforced by a trigger that
-- locks the profile row, so the limit holds under concurrent creates.
--------------------------------------------------------------------------------

create table app.nodes (
  id         uuid primary key default gen_random_uuid(),
  kind       text not null check (kind in ('user', 'community', 'event', 'venue')),
  created_at timestamptz not null default now()
);
comment on table app.nodes is 'One row per user, community, event and venue; the id that node_id paths take.';
alter table app.nodes enable row level security;
grant select on app.nodes to authenticated;
create policy "Nodes are visible to signed-in users" on app.nodes
  for select to authenticated
  using (true);

create table app.subscription_plans (
  id         text primary key check (id ~ '^[a-z_]+$'),
  max_hats   integer not null check (max_hats >= 0),
  is_premium boolean not null default false
);
comment on table app.subscription_plans is 'Subscription types and what they allow. A DBA changes a limit here.';
alter table app.subscription_plans enable row level security;
grant select on app.subscription_plans to authenticated;
create policy "Plans are visible to signed-in users" on app.subscription_plans
  for select to authenticated
  using (true);

insert into app.subscription_plans (id, max_hats, is_premium) values
  ('basic', 3, false),
  ('premium', 10, true);

create table app.profiles (
  id                uuid primary key references identity.users (id) on delete cascade,
  name              text not null check (length(btrim(name)) between 1 and 200),
  subscription_type text not null default 'basic' references app.subscription_plans (id) on update cascade,
  node_id           uuid unique references app.nodes (id) on delete set null,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now()
);
comment on table app.profiles is 'A user''s profile. node_id is null only when an operator removed the node.';

create trigger _100_set_updated_at before update on app.profiles
  for each row execute function private.tg__set_updated_at();

alter table app.profiles enable row level security;
grant select on app.profiles to authenticated;
create policy "Users can read their own profile" on app.profiles
  for select to authenticated
  using (id = (select auth.uid()));

--------------------------------------------------------------------------------
-- Accounts: one function makes the user, profile and node, for register,
-- signup and admin.create_user alike.
--------------------------------------------------------------------------------

create function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account.email));
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account.password is null or length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;

  insert into identity.users (email, password_hash)
    values (normalised_email, identity.hash_password(create_account.password))
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;

  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, node_id)
    values (new_user_id, coalesce(nullif(btrim(create_account.name), ''), split_part(normalised_email, '@', 1)), new_node_id);
  return new_user_id;
end;
$$;
comment on function private.create_account(text, text, text) is
  'Creates a user (hashed password), their node and profile. PT409 when the e-mail is taken.';

--------------------------------------------------------------------------------
-- Hat types and hats
--------------------------------------------------------------------------------

create table app.hat_types (
  id          text primary key check (id ~ '^[a-z_]+$'),
  name        text not null,
  description text,
  sort_order  integer not null default 0
);
comment on table app.hat_types is 'The kinds of hat a user may wear; `id` is the slug clients send as hat_type.';
alter table app.hat_types enable row level security;
grant select on app.hat_types to authenticated;
create policy "Hat types are visible to signed-in users" on app.hat_types
  for select to authenticated
  using (true);

insert into app.hat_types (id, name, description, sort_order) values
  ('professional', 'Professional', 'Your working self: role, company, skills.', 10),
  ('social', 'Social', 'Meeting people, hobbies and interests.', 20),
  ('founder', 'Founder', 'Building a company or project.', 30),
  ('investor', 'Investor', 'Looking for companies to back.', 40),
  ('mentor', 'Mentor', 'Offering advice and experience.', 50),
  ('volunteer', 'Volunteer', 'Giving time to a cause or community.', 60);

create table app.hats (
  id          uuid primary key default gen_random_uuid(),
  user_id     uuid not null references app.profiles (id) on delete cascade,
  name        text not null check (length(btrim(name)) between 1 and 100),
  hat_type    text not null references app.hat_types (id) on update cascade,
  description text check (length(description) <= 2000),
  is_primary  boolean not null default false,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
comment on table app.hats is 'A user''s personas. At most one primary hat per user; the count is limited by the plan.';

create index hats_user_idx on app.hats (user_id, created_at);
create unique index hats_one_primary_per_user on app.hats (user_id) where is_primary;

create trigger _100_set_updated_at before update on app.hats
  for each row execute function private.tg__set_updated_at();

-- The hat limit. Locking the owner's profile row serialises concurrent hat
-- creation for one user; each waiting insert then counts the committed hats.
create function private.tg_hats__enforce_limit() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  allowed integer;
  plan text;
  existing integer;
begin
  select p.subscription_type, s.max_hats into plan, allowed
    from app.profiles p
    join app.subscription_plans s on s.id = p.subscription_type
    where p.id = new.user_id
    for update of p;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;

  select count(*) into existing from app.hats where user_id = new.user_id;
  if existing >= allowed then
    raise exception 'hat limit reached: the % plan allows % hats', plan, allowed
      using errcode = 'PT422', hint = 'hat_limit_reached';
  end if;

  -- The first hat a user creates is their primary hat.
  new.is_primary := (existing = 0);
  return new;
end;
$$;
comment on function private.tg_hats__enforce_limit() is
  'Trigger: enforces max_hats of the owner''s plan (PT422) and makes the first hat primary.';

create trigger _200_enforce_limit before insert on app.hats
  for each row execute function private.tg_hats__enforce_limit();

alter table app.hats enable row level security;
grant select, insert (user_id, name, hat_type, description) on app.hats to authenticated;
create policy "Users can read their own hats" on app.hats
  for select to authenticated
  using (user_id = (select auth.uid()));
create policy "Users can create their own hats" on app.hats
  for insert to authenticated
  with check (user_id = (select auth.uid()));

--------------------------------------------------------------------------------
-- API: profile and hats
--
-- The composite types are the resource shapes of the interface (spec section
-- 2); the gateway sends their fields as they are.
--------------------------------------------------------------------------------

create type api.user_profile as (
  id uuid, email text, name text, is_premium boolean, subscription_type text,
  max_hats integer, node_id uuid, created_at timestamptz, updated_at timestamptz
);
create type api.hat as (
  id uuid, name text, hat_type text, description text, is_primary boolean, created_at timestamptz
);
create type api.hat_type as (id text, name text, description text);

create function api.profile_get()
  returns setof api.user_profile
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
end;
$$;
comment on function api.profile_get() is
  'GET /api/mobile/profile: the caller''s UserProfile (row-level security picks the row). PT404 when missing.';
grant execute on function api.profile_get() to authenticated;

create function api.hats_list()
  returns setof api.hat
  language sql stable
  set search_path = pg_catalog
  as $$
    select h.id, h.name, h.hat_type, h.description, h.is_primary, h.created_at
      from app.hats h
      order by h.is_primary desc, h.created_at, h.id
  $$;
comment on function api.hats_list() is
  'GET /api/mobile/hats: the caller''s hats (row-level security), primary first, then oldest first.';
grant execute on function api.hats_list() to authenticated;

create function api.hat_create(name text, hat_type text, description text default null)
  returns setof api.hat
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  if not exists (select from app.hat_types t where t.id = hat_create.hat_type) then
    raise exception 'unknown hat_type "%"', hat_create.hat_type
      using errcode = 'PT422', hint = 'unknown_hat_type';
  end if;

  return query
    insert into app.hats as h (user_id, name, hat_type, description)
      values (caller, btrim(hat_create.name), hat_create.hat_type, hat_create.description)
      returning h.id, h.name, h.hat_type, h.description, h.is_primary, h.created_at;
end;
$$;
comment on function api.hat_create(text, text, text) is
  'POST /api/mobile/hats: creates a hat for the caller. PT422 for an unknown hat_type or past the plan''s max_hats.';
grant execute on function api.hat_create(text, text, text) to authenticated;

create function api.hat_types_list()
  returns setof api.hat_type
  language sql stable
  set search_path = pg_catalog
  as $$
    select t.id, t.name, t.description from app.hat_types t order by t.sort_order, t.id
  $$;
comment on function api.hat_types_list() is 'GET /api/mobile/hat_types: the hat types, in display order.';
grant execute on function api.hat_types_list() to authenticated;
