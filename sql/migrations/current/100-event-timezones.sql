-- Time zones (docs/api.md#time-zones): an event's IANA zone, given by the
-- platform, else its venue's, else its community's, else the service's
-- DEFAULT_TIMEZONE, resolved when the event is made (trigger _120_timezone).
-- Events made before this migration were shown in UTC: they keep UTC. A
-- constant default adds a NOT NULL column without rewriting the table; the
-- default is dropped after, so every new row goes through the trigger.
alter table app.events add column if not exists timezone text not null default 'UTC';
alter table app.events alter column timezone drop default;
alter table app.venues add column if not exists timezone text;
alter table app.communities add column if not exists timezone text;

-- A deleted event's public page shows it cancelled (schema.org EventCancelled)
-- while its tombstone is kept: the tombstone keeps what the page needs.
alter table app.event_tombstones add column if not exists timezone text not null default 'UTC';
alter table app.event_tombstones alter column timezone drop default;
alter table app.event_tombstones add column if not exists image_path text;
alter table app.event_tombstones add column if not exists event_url text;
alter table app.event_tombstones add column if not exists venue_node_id uuid;

-- A calendar entry carries its event's zone (DTSTART;TZID=...).
do $$
begin
  if not exists (select from pg_catalog.pg_attribute a
                  where a.attrelid = 'private.calendar_row'::regclass and a.attname = 'timezone' and not a.attisdropped) then
    alter type private.calendar_row add attribute timezone text;
  end if;
end;
$$;

-- The names of pg_timezone_names, copied: reading that view lists the whole
-- time zone database (30-60 ms), too slow for every write that names a zone.
-- The gateway refreshes the copy at start (private.time_zones_refresh), so a
-- server whose tzdata gained a zone knows it after a restart.
create table if not exists private.time_zones (
  name text primary key
);
-- squawk-ignore require-concurrent-index-creation
create unique index if not exists time_zones_lower_name_idx on private.time_zones (lower(name));
-- Filled here as private.time_zones_refresh does it (the zones every part of
-- the service knows: not the posix/ and right/ variants, nor Factory).
insert into private.time_zones (name)
  select z.name from pg_catalog.pg_timezone_names z
   where z.name !~ '^(posix|right)/' and z.name not in ('Factory', 'localtime', 'posixrules')
on conflict do nothing;
