--! Previous: sha1:f8041c41203a3eaaf900c3220b5f658891e83971
--! Hash: sha1:4657c63f3203769e92fcf131e5031fc9e6811fc1
--! Message: communities-venues-events

--------------------------------------------------------------------------------
-- Communities, memberships, venues and events: the tables
--
-- The operator functions (admin.*) need these now; the rules and API functions
-- of each area arrive with their own migrations. member_count is maintained
-- here, by a trigger, in the same transaction as the membership change: the
-- update takes the community row lock, so concurrent joins and leaves
-- serialise on it and the count never drifts.
--------------------------------------------------------------------------------

create table app.communities (
  id               uuid primary key default gen_random_uuid(),
  node_id          uuid not null unique references app.nodes (id) on delete restrict,
  name             text not null check (length(btrim(name)) between 1 and 200),
  description      text,
  tags             text[] not null default '{}',
  member_count     integer not null default 0 check (member_count >= 0),
  is_sandbox       boolean not null default false,
  is_draft         boolean not null default false,
  accepts_handoffs boolean not null default false,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now()
);
comment on table app.communities is 'Communities. member_count is kept by a trigger on community_members.';

create trigger _100_set_updated_at before update on app.communities
  for each row execute function private.tg__set_updated_at();
alter table app.communities enable row level security;

create table app.community_members (
  community_id   uuid not null references app.communities (id) on delete cascade,
  member_node_id uuid not null references app.nodes (id) on delete cascade,
  role           text not null default 'member' check (role in ('member', 'manager')),
  joined_at      timestamptz not null default now(),
  primary key (community_id, member_node_id)
);
comment on table app.community_members is 'Memberships: a user node in a community, as member or manager.';

create index community_members_member_idx on app.community_members (member_node_id, joined_at);
alter table app.community_members enable row level security;

create function private.tg_community_members__count() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
begin
  if tg_op = 'INSERT' then
    update app.communities set member_count = member_count + 1 where id = new.community_id;
  elsif tg_op = 'DELETE' then
    update app.communities set member_count = member_count - 1 where id = old.community_id;
  end if;
  return null;
end;
$$;
comment on function private.tg_community_members__count() is
  'Trigger: keeps communities.member_count equal to the number of membership rows.';

create trigger _500_member_count after insert or delete on app.community_members
  for each row execute function private.tg_community_members__count();

create table app.venues (
  node_id    uuid primary key references app.nodes (id) on delete cascade,
  name       text not null check (length(btrim(name)) between 1 and 200),
  address    text,
  latitude   double precision check (latitude between -90 and 90),
  longitude  double precision check (longitude between -180 and 180),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
comment on table app.venues is 'Venues; a venue is identified by its node id.';

create trigger _100_set_updated_at before update on app.venues
  for each row execute function private.tg__set_updated_at();
alter table app.venues enable row level security;

-- 8 characters of [A-Za-z0-9]; the unique constraint on events.shortlink is
-- the final guarantee, this only avoids the (unlikely) collision up front.
create function private.generate_shortlink() returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  alphabet constant text := 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  candidate text;
  random_bytes bytea;
begin
  loop
    random_bytes := extensions.gen_random_bytes(8);
    candidate := '';
    for i in 0..7 loop
      candidate := candidate || substr(alphabet, 1 + (get_byte(random_bytes, i) % 62), 1);
    end loop;
    exit when not exists (select from app.events where shortlink = candidate);
  end loop;
  return candidate;
end;
$$;
comment on function private.generate_shortlink() is 'A fresh, unused 8-character event shortlink.';

create table app.events (
  id            uuid primary key default gen_random_uuid(),
  node_id       uuid not null unique references app.nodes (id) on delete restrict,
  community_id  uuid not null references app.communities (id) on delete cascade,
  title         text not null check (length(btrim(title)) between 1 and 300),
  description   text,
  starts_at     timestamptz not null,
  ends_at       timestamptz check (ends_at is null or ends_at >= starts_at),
  venue_node_id uuid references app.venues (node_id) on delete set null,
  location      text,
  event_url     text,
  image_path    text,
  shortlink     text not null unique default private.generate_shortlink()
                check (shortlink ~ '^[A-Za-z0-9]{8}$'),
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now()
);
comment on table app.events is 'Calendar events of a community. An event without ends_at ends 2 hours after starts_at.';
comment on column app.events.starts_at is 'The event''s `date` in the API.';
comment on column app.events.ends_at is 'The event''s `end_time` in the API.';

create index events_community_idx on app.events (community_id, starts_at);
create index events_venue_idx on app.events (venue_node_id, starts_at) where venue_node_id is not null;

create trigger _100_set_updated_at before update on app.events
  for each row execute function private.tg__set_updated_at();
alter table app.events enable row level security;
