--! Previous: sha1:cf4a9a37aa372a1583bf0d2e7984a6f1e6233b8f
--! Hash: sha1:338a9f5e124ab7c8798335b0a0ef0d5cace33406
--! Message: calendars

--! split: 200-calendars.sql
--------------------------------------------------------------------------------
-- Calendars (issue 24): iCalendar files of one event (GET /e/{shortlink}.ics),
-- of a community (GET /c/{community_id}/calendar.ics) and a personal feed
-- behind a secret URL (POST/DELETE /api/mobile/calendar/feed, GET
-- /cal/{token}.ics). Every value of a calendar comes from here; the gateway
-- renders it with ical-generator.
--
-- - SEQUENCE: app.events.sequence grows by one on every update that changes
--   the event (a trigger; what a statement writes to it is ignored).
-- - Deleted events: a delete leaves a tombstone (app.event_tombstones: the
--   event as it was, its sequence one higher) that the feeds list with
--   STATUS:CANCELLED for as long as the event itself would be listed (its
--   effective end within the last 30 days), then it is pruned. The change log
--   records deletes too, but it is pruned after 24 hours
--   (CHANGE_LOG_RETENTION_HOURS), less than calendar apps take between polls.
-- - Validators: each feed function computes an ETag (a hash of the count and
--   of each listed entry's id, sequence and stamp, with the feed's own
--   heading) and a Last-Modified from the rows it lists, compares them with
--   the request's If-None-Match / If-Modified-Since, and builds the calendar
--   only when they differ: a 304 costs one index scan and an aggregate.
-- - The personal feed's token is 32 random bytes (base64url); only its
--   SHA-256 is stored. Creating a feed again replaces the token; a password
--   change (a reset) deletes it, as it ends the account's other credentials.
--------------------------------------------------------------------------------

-- SEQUENCE ---------------------------------------------------------------------

-- A constant default: PostgreSQL 11+ adds the column without rewriting the table.
alter table app.events add column if not exists sequence integer not null default 0;
comment on column app.events.sequence is
  'The iCalendar SEQUENCE: 0 when created, one more on every update that changes the event (trigger _150_sequence).';

create or replace function private.tg_events__sequence() returns trigger
  language plpgsql
  set search_path = pg_catalog
  as $$
begin
  if (to_jsonb(new) - 'updated_at' - 'sequence') is distinct from (to_jsonb(old) - 'updated_at' - 'sequence') then
    new.sequence := old.sequence + 1;
  else
    new.sequence := old.sequence;
  end if;
  return new;
end;
$$;
comment on function private.tg_events__sequence() is
  'Trigger: an update that changes an event (anything but updated_at) raises its sequence by one; sequence itself cannot be written.';

drop trigger if exists _150_sequence on app.events;
create trigger _150_sequence before update on app.events
  for each row execute function private.tg_events__sequence();

-- Tombstones of deleted events -------------------------------------------------

create table if not exists app.event_tombstones (
  event_id uuid primary key,
  community_id uuid not null,
  shortlink text not null,
  title text not null,
  description text,
  starts_at timestamptz not null,
  ends_at timestamptz,
  location text,
  sequence integer not null,
  created_at timestamptz not null,
  deleted_at timestamptz not null default now()
);
comment on table app.event_tombstones is
  'Deleted events, as they were (location as the calendar showed it), listed by the calendar feeds as cancelled until their effective end is 30 days past (private.event_tombstones_prune). No community foreign key: a deleted community takes its events with it. Not granted to request roles.';
alter table app.event_tombstones enable row level security;
create index if not exists event_tombstones_community_end_idx
  on app.event_tombstones (community_id, private.event_effective_end(starts_at, ends_at));
create index if not exists event_tombstones_shortlink_idx on app.event_tombstones (shortlink);

create or replace function private.event_location_text(venue_name text, venue_address text, event_location text)
  returns text
  language sql immutable
  as $$
    select coalesce(venue_name operator(pg_catalog.||) coalesce(', ' operator(pg_catalog.||) nullif(pg_catalog.btrim(venue_address), ''), ''),
                    event_location)
  $$;
comment on function private.event_location_text(text, text, text) is
  'Where an event takes place, as calendars and previews show it: "venue name, address" when it has a venue, else its location text.';

create or replace function private.tg_events__tombstone() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog
  as $$
begin
  insert into app.event_tombstones as t (event_id, community_id, shortlink, title, description, starts_at, ends_at,
                                         location, sequence, created_at)
  select old.id, old.community_id, old.shortlink, old.title, old.description, old.starts_at, old.ends_at,
         private.event_location_text(v.name, v.address, old.location), old.sequence + 1, old.created_at
    from (select) one
    left join app.venues v on v.node_id = old.venue_node_id
  on conflict (event_id) do nothing;
  return null;
end;
$$;
comment on function private.tg_events__tombstone() is
  'Trigger: a deleted event leaves a tombstone (app.event_tombstones), its sequence one higher, which the calendar feeds list as cancelled.';

drop trigger if exists _800_tombstone on app.events;
create trigger _800_tombstone after delete on app.events
  for each row execute function private.tg_events__tombstone();

create or replace function private.event_tombstones_prune(max_rows integer default 10000) returns integer
  language sql volatile security definer
  set search_path = pg_catalog
  as $$
    with gone as (
      delete from app.event_tombstones t
       where t.event_id in (select o.event_id from app.event_tombstones o
                             where private.event_effective_end(o.starts_at, o.ends_at) < now() - interval '30 days'
                             limit max_rows)
      returning 1)
    select count(*)::integer from gone
  $$;
comment on function private.event_tombstones_prune(integer) is
  'Deletes tombstones no calendar lists any more (effective end more than 30 days ago), at most max_rows; returns how many. The gateway runs it with the change-log prune.';

-- Calendar entries ---------------------------------------------------------------

create or replace function private.url_host(url text) returns text
  language sql immutable
  as $$
    select pg_catalog.lower(pg_catalog.substring(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]/]*\]|[^/?#:]*)'))
  $$;
comment on function private.url_host(text) is 'The host of an absolute URL (lower case; an IPv6 address in brackets), e.g. of PUBLIC_URL.';

do $$
begin
  if pg_catalog.to_regtype('private.calendar_row') is null then
    create type private.calendar_row as (
      event_id uuid,
      shortlink text,
      title text,
      description text,
      starts_at timestamptz,
      ends_at timestamptz,
      location text,
      sequence integer,
      created_at timestamptz,
      stamp timestamptz,
      cancelled boolean
    );
  end if;
end
$$;
comment on type private.calendar_row is
  'One entry of a calendar: a live event (stamp: when it or its venue last changed) or a deleted one (cancelled; stamp: when it was deleted).';

-- At most this many entries per calendar, soonest first.
create or replace function private.calendar_max_entries() returns integer
  language sql immutable
  as $$ select 5000 $$;
comment on function private.calendar_max_entries() is 'At most this many events per calendar feed (soonest first).';

-- Unordered and unbounded, so that the validators are one scan and an
-- aggregate; the document sorts and caps (private.calendar_feed_answer).
create or replace function private.calendar_rows(community_ids uuid[], ends_after timestamptz)
  returns setof private.calendar_row
  language sql stable
  as $$
    select e.id, e.shortlink, e.title, e.description, e.starts_at, e.ends_at,
           private.event_location_text(v.name, v.address, e.location), e.sequence, e.created_at,
           greatest(e.updated_at, v.updated_at), false
      from app.events e
      left join app.venues v on v.node_id operator(pg_catalog.=) e.venue_node_id
     where e.community_id operator(pg_catalog.=) any (community_ids)
       and private.event_effective_end(e.starts_at, e.ends_at) operator(pg_catalog.>=) ends_after
    union all
    select t.event_id, t.shortlink, t.title, t.description, t.starts_at, t.ends_at, t.location, t.sequence,
           t.created_at, t.deleted_at, true
      from app.event_tombstones t
     where t.community_id operator(pg_catalog.=) any (community_ids)
       and private.event_effective_end(t.starts_at, t.ends_at) operator(pg_catalog.>=) ends_after
  $$;
comment on function private.calendar_rows(uuid[], timestamptz) is
  'The entries of a calendar of these communities, in no order: their events whose effective end is at or after ends_after, and the deleted ones (cancelled) as long as that holds.';

create or replace function private.calendar_event_rows(shortlink text) returns setof private.calendar_row
  language sql stable
  as $$
    -- The live event; a deleted one (its tombstone) only when no event has the shortlink now.
    select r.event_id, r.shortlink, r.title, r.description, r.starts_at, r.ends_at, r.location, r.sequence,
           r.created_at, r.stamp, r.cancelled
      from (select e.id, e.shortlink, e.title, e.description, e.starts_at, e.ends_at,
                   private.event_location_text(v.name, v.address, e.location), e.sequence, e.created_at,
                   greatest(e.updated_at, v.updated_at), false, 0
              from app.events e
              left join app.venues v on v.node_id operator(pg_catalog.=) e.venue_node_id
             where e.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
            union all
            select t.event_id, t.shortlink, t.title, t.description, t.starts_at, t.ends_at, t.location, t.sequence,
                   t.created_at, t.deleted_at, true, 1
              from app.event_tombstones t
             where t.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
           ) r (event_id, shortlink, title, description, starts_at, ends_at, location, sequence, created_at, stamp, cancelled, rank)
     order by r.rank, r.stamp desc
     limit 1
  $$;
comment on function private.calendar_event_rows(text) is
  'The calendar entry of the event with this shortlink; when none has it now, the most recently deleted one that had it (cancelled).';

create or replace function private.calendar_entry(r private.calendar_row, public_url text) returns jsonb
  language sql stable
  as $$
    select pg_catalog.jsonb_build_object(
      'uid', r.event_id::text operator(pg_catalog.||) '@' operator(pg_catalog.||) private.url_host(public_url),
      'sequence', r.sequence,
      'start', app.iso(r.starts_at),
      'end', app.iso(private.event_effective_end(r.starts_at, r.ends_at)),
      'stamp', app.iso(r.stamp),
      'created', app.iso(r.created_at),
      'summary', r.title,
      'description', r.description,
      'location', r.location,
      'url', pg_catalog.rtrim(public_url, '/') operator(pg_catalog.||) '/e/' operator(pg_catalog.||) r.shortlink,
      'status', case when r.cancelled then 'CANCELLED' else 'CONFIRMED' end)
  $$;
comment on function private.calendar_entry(private.calendar_row, text) is
  'A calendar entry as the gateway renders it (VEVENT): uid <event id>@<PUBLIC_URL host>, sequence, start and effective end (UTC), stamp, created, summary, description, location, url (the public page), status CONFIRMED or CANCELLED.';

create or replace function private.calendar_row_hash(event_id uuid, sequence integer, stamp timestamptz, cancelled boolean)
  returns bigint
  language sql immutable
  as $$
    -- The hash functions of the hash operator classes: stable across versions (hash partitioning relies on it), and cheap.
    -- (PostgreSQL 15 has no timestamptz_hash_extended: the instant as a UTC timestamp.)
    select pg_catalog.uuid_hash_extended(event_id,
             pg_catalog.timestamp_hash_extended(pg_catalog.timezone('UTC', stamp), sequence::bigint operator(pg_catalog.*) 2
                                                operator(pg_catalog.+) cancelled::integer))
  $$;
comment on function private.calendar_row_hash(uuid, integer, timestamptz, boolean) is
  'A 64-bit hash of what identifies an entry''s version (id, sequence, stamp, cancelled); summed over a calendar''s entries, part of its ETag.';

create or replace function private.calendar_not_modified(etag text, last_modified timestamptz, if_none_match text[],
                                                         if_modified_since timestamptz) returns boolean
  language sql immutable
  as $$
    -- RFC 9110 13.1.2/13.1.3: If-None-Match, when sent, decides alone (weak comparison; * matches any).
    select case when if_none_match is not null
                then etag operator(pg_catalog.=) any (if_none_match) or '*' operator(pg_catalog.=) any (if_none_match)
                else if_modified_since is not null
                     and pg_catalog.date_trunc('second', last_modified) operator(pg_catalog.<=) if_modified_since
           end
  $$;
comment on function private.calendar_not_modified(text, timestamptz, text[], timestamptz) is
  'Whether a conditional GET is answered 304: If-None-Match (entity tags, W/ removed) holds the ETag or *; or, without If-None-Match, If-Modified-Since is at or after Last-Modified (whole seconds).';

create or replace function private.calendar_etag(format text, public_url text, heading jsonb, entry_count bigint, version numeric)
  returns text
  language sql immutable
  as $$
    select '"' operator(pg_catalog.||)
           pg_catalog.md5(pg_catalog.concat_ws(' ', format, public_url, heading::text, entry_count, version))
           operator(pg_catalog.||) '"'
  $$;
comment on function private.calendar_etag(text, text, jsonb, bigint, numeric) is
  'A calendar''s ETag: the renderer''s format, PUBLIC_URL, the calendar''s heading, the entry count and the sum of private.calendar_row_hash over the entries.';

-- The answer to a feed request: validators first (one index scan and an
-- aggregate); the entries only when the request's validators differ.
create or replace function private.calendar_feed_answer(community_ids uuid[], ends_after timestamptz, heading jsonb,
                                                        public_url text, format text, if_none_match text[],
                                                        if_modified_since timestamptz)
  returns table (etag text, last_modified timestamptz, calendar jsonb)
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  entry_count bigint;
  version numeric;
  newest timestamptz;
begin
  select count(*), coalesce(sum(private.calendar_row_hash(r.event_id, r.sequence, r.stamp, r.cancelled)), 0), max(r.stamp)
    into entry_count, version, newest
    from private.calendar_rows(community_ids, ends_after) r;
  etag := private.calendar_etag(format, public_url, heading, entry_count, version);
  last_modified := greatest(newest, (heading ->> 'updated_at')::timestamptz, timestamptz '2000-01-01 00:00:00+00');
  if private.calendar_not_modified(etag, last_modified, if_none_match, if_modified_since) then
    calendar := null;
  else
    calendar := (heading - 'updated_at') || jsonb_build_object('events', (
      select coalesce(jsonb_agg(private.calendar_entry(r, public_url) order by r.starts_at, r.event_id), '[]'::jsonb)
        from (select * from private.calendar_rows(community_ids, ends_after) c
               order by c.starts_at, c.event_id
               limit private.calendar_max_entries()) r));
  end if;
  return next;
end;
$$;
comment on function private.calendar_feed_answer(uuid[], timestamptz, jsonb, text, text, text[], timestamptz) is
  'The answer to a feed request over private.calendar_rows(community_ids, ends_after): ETag (private.calendar_etag, over every row), Last-Modified (the newest entry stamp, or the heading''s updated_at), and the calendar (the heading without updated_at, and its events: soonest first, at most private.calendar_max_entries()) unless the request''s validators match (then null: 304).';

-- One event ----------------------------------------------------------------------

create or replace function api.calendar_event(shortlink text, public_url text, format text, if_none_match text[],
                                              if_modified_since timestamptz)
  returns table (etag text, last_modified timestamptz, calendar jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found private.calendar_row;
  heading jsonb;
begin
  select r.* into found from private.calendar_event_rows(calendar_event.shortlink) r;
  if found.event_id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  heading := jsonb_build_object('name', found.title);
  etag := private.calendar_etag(format, public_url, heading, 1,
                                private.calendar_row_hash(found.event_id, found.sequence, found.stamp, found.cancelled));
  last_modified := found.stamp;
  if not private.calendar_not_modified(etag, last_modified, if_none_match, if_modified_since) then
    calendar := heading || jsonb_build_object('events', jsonb_build_array(private.calendar_entry(found, public_url)));
  end if;
  return next;
end;
$$;
comment on function api.calendar_event(text, text, text, text[], timestamptz) is
  'GET /e/{shortlink}.ics (no credential): the event as a calendar of one entry (cancelled when it was deleted and its tombstone is kept), with ETag and Last-Modified; calendar null when If-None-Match / If-Modified-Since match (304). format names the renderer''s output (part of the ETag). PT404 event_not_found.';
grant execute on function api.calendar_event(text, text, text, text[], timestamptz) to anon, authenticated;

-- A community ----------------------------------------------------------------------

create or replace function api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[],
                                                  if_modified_since timestamptz)
  returns table (etag text, last_modified timestamptz, calendar jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  community app.communities;
begin
  select c.* into community from app.communities c where c.id = calendar_community.community_id and not c.is_draft;
  if community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return query
    select a.etag, a.last_modified, a.calendar
      from private.calendar_feed_answer(
             array[community.id], now() - interval '30 days',
             jsonb_build_object('name', community.name, 'description', community.description,
                                'updated_at', community.updated_at),
             public_url, format, if_none_match, if_modified_since) a;
end;
$$;
comment on function api.calendar_community(uuid, text, text, text[], timestamptz) is
  'GET /c/{community_id}/calendar.ics (no credential): the community''s events whose effective end is at most 30 days past (and deleted ones, cancelled), soonest first, with ETag and Last-Modified; calendar null when the request''s validators match (304). PT404 community_not_found for an unknown or draft community.';
grant execute on function api.calendar_community(uuid, text, text, text[], timestamptz) to anon, authenticated;

-- The personal feed ------------------------------------------------------------------

create table if not exists app.calendar_feeds (
  user_id uuid primary key references identity.users (id) on delete cascade,
  token_hash bytea not null unique,
  created_at timestamptz not null default now()
);
comment on table app.calendar_feeds is
  'A user''s personal calendar feed (/cal/{token}.ics): only the SHA-256 of the token is stored; one per user. Not granted to request roles.';
alter table app.calendar_feeds enable row level security;

create or replace function api.calendar_feed_create(public_url text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  me uuid := auth.uid();
  token text := translate(rtrim(encode(extensions.gen_random_bytes(32), 'base64'), '='), '+/', '-_');
  url text;
begin
  if me is null then
    raise exception 'sign in first' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  insert into app.calendar_feeds as f (user_id, token_hash)
  values (me, extensions.digest(token, 'sha256'))
  on conflict (user_id) do update set token_hash = excluded.token_hash, created_at = now();
  url := rtrim(public_url, '/') || '/cal/' || token || '.ics';
  return jsonb_build_object('url', url, 'webcal_url', regexp_replace(url, '^https?://', 'webcal://', 'i'));
end;
$$;
comment on function api.calendar_feed_create(text) is
  'POST /api/mobile/calendar/feed: a new secret feed URL for the caller ({url, webcal_url}); the previous one, if any, stops working. Only the token''s SHA-256 is stored.';
grant execute on function api.calendar_feed_create(text) to authenticated;

create or replace function api.calendar_feed_revoke() returns void
  language sql volatile security definer
  set search_path = pg_catalog
  as $$
    delete from app.calendar_feeds f where f.user_id = auth.uid()
  $$;
comment on function api.calendar_feed_revoke() is
  'DELETE /api/mobile/calendar/feed: the caller''s feed URL stops working (nothing to do when there is none).';
grant execute on function api.calendar_feed_revoke() to authenticated;

create or replace function api.calendar_personal(token text, public_url text, format text, if_none_match text[],
                                                 if_modified_since timestamptz)
  returns table (etag text, last_modified timestamptz, calendar jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  owner uuid;
begin
  select f.user_id into owner from app.calendar_feeds f where f.token_hash = extensions.digest(calendar_personal.token, 'sha256');
  if owner is null then
    raise exception 'calendar not found' using errcode = 'PT404', hint = 'calendar_not_found';
  end if;
  return query
    select a.etag, a.last_modified, a.calendar
      from private.calendar_feed_answer(
             array(select m.community_id
                     from app.profiles p
                     join app.community_members m on m.member_node_id = p.node_id
                    where p.id = owner),
             now(),
             jsonb_build_object('name', 'My events'),
             public_url, format, if_none_match, if_modified_since) a;
end;
$$;
comment on function api.calendar_personal(text, text, text, text[], timestamptz) is
  'GET /cal/{token}.ics (the token is the credential): the upcoming events (effective end not past) of every community of the feed''s owner, and deleted ones (cancelled), with ETag and Last-Modified; calendar null when the request''s validators match (304). PT404 calendar_not_found for an unknown or replaced token.';
grant execute on function api.calendar_personal(text, text, text, text[], timestamptz) to anon, authenticated;

create or replace function private.tg_users__end_calendar_feed() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog
  as $$
begin
  delete from app.calendar_feeds f where f.user_id = new.id;
  return null;
end;
$$;
comment on function private.tg_users__end_calendar_feed() is
  'Trigger: a password change (a reset ends every credential of the account) deletes the account''s calendar feed URL too.';

drop trigger if exists _500_end_calendar_feed on identity.users;
create trigger _500_end_calendar_feed after update of password_hash on identity.users
  for each row when (old.password_hash is distinct from new.password_hash)
  execute function private.tg_users__end_calendar_feed();
