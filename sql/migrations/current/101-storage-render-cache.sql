--------------------------------------------------------------------------------
-- The cache of image transformations, bounded (security review round 5).
--
-- Every transformation kept in the byte store (renders/<uuid>/<variant>) has
-- a row here, recorded before it is made: the rules of
-- private.storage_render_begin and _stored keep at most a number of them per
-- object version and a total size (the oldest go first), and count the
-- transformations each client address has made in the current minute.
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.storage_renders (
  -- The object version's bytes (objects/<uuid>) the transformation is of.
  storage_key  text collate "C" not null,
  -- Its name among the version's transformations (images.ts renderVariant).
  variant      text collate "C" not null,
  -- Bytes; null while it is being made.
  size         bigint,
  created_at   timestamptz not null default now(),
  constraint storage_renders_pkey primary key (storage_key, variant)
);
comment on table app.storage_renders is
  'Transformations kept in the byte store (renders/...): per object version and in all at most what the gateway''s configuration says, the oldest evicted first.';
create index if not exists storage_renders_created_idx on app.storage_renders (created_at);
alter table app.storage_renders enable row level security;

create table if not exists app.storage_render_misses (
  client_ip     text primary key,
  window_start  timestamptz not null,
  misses        integer not null
);
comment on table app.storage_render_misses is
  'Transformations made (not served from the cache) per client address in its current one-minute window.';
alter table app.storage_render_misses enable row level security;
