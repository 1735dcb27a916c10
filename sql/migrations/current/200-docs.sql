--------------------------------------------------------------------------------
-- Developer docs: the API endpoints the gateway serves (discovered from its
-- router at every start) and, with the API tokens, the live test results.
--------------------------------------------------------------------------------

drop function if exists api.api_endpoints_list();
drop function if exists private.sync_api_endpoints(jsonb);
drop table if exists app.api_endpoints cascade;

-- One row per (method, path) the gateway has ever served. `path` is in the
-- OpenAPI form (/api/mobile/tasks/{id}); `controller` is the route's section,
-- `action` its operation name. A route no longer served stays, deprecated.
create table app.api_endpoints (
  id uuid primary key default gen_random_uuid(),
  http_method text not null check (http_method in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')),
  path text not null check (path ~ '^/' and length(path) <= 500),
  controller text not null check (length(controller) between 1 and 100),
  action text not null check (length(action) between 1 and 200),
  description text check (length(description) <= 2000),
  tags text[] not null default '{}',
  deprecated boolean not null default false,
  discovered_at timestamptz not null default now(),
  last_updated timestamptz not null default now(),
  unique (http_method, path)
);
comment on table app.api_endpoints is
  'The routes the gateway serves (GET /api/docs/endpoints), kept by private.sync_api_endpoints at every gateway start.';

alter table app.api_endpoints enable row level security;
create policy "Endpoints are readable by everyone" on app.api_endpoints
  for select to anon, authenticated using (true);
grant select on app.api_endpoints to anon, authenticated;

-- Called by the gateway at start with the routes its router serves:
-- [{http_method, path, controller, action, description, tags}, ...].
--   new route                  → inserted (discovered_at = last_updated = now)
--   known route, same fields   → untouched (discovered_at and last_updated kept)
--   known route, any change    → updated, last_updated = now (discovered_at kept)
--   deprecated route back      → deprecated = false, last_updated = now
--   known route not in the set → deprecated = true, last_updated = now
-- Replicas starting together take turns (advisory lock), so the result is that
-- of the last start.
create function private.sync_api_endpoints(endpoints jsonb)
  returns table (added integer, changed integer, retired integer, unchanged integer)
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  total integer;
begin
  if endpoints is null or jsonb_typeof(endpoints) <> 'array' then
    raise exception 'endpoints must be a JSON array' using errcode = 'PT400', hint = 'invalid_endpoints';
  end if;
  perform pg_advisory_xact_lock(hashtextextended('app.api_endpoints', 0));

  create temporary table incoming on commit drop as
    select distinct on (upper(e.http_method), e.path)
           upper(e.http_method) as http_method, e.path, e.controller, e.action, e.description,
           coalesce(e.tags, '{}') as tags
      from jsonb_to_recordset(endpoints)
           as e(http_method text, path text, controller text, action text, description text, tags text[])
      order by upper(e.http_method), e.path;
  select count(*) into total from incoming;

  with upserted as (
    insert into app.api_endpoints as a (http_method, path, controller, action, description, tags)
    select i.http_method, i.path, i.controller, i.action, i.description, i.tags from incoming i
    on conflict (http_method, path) do update
      set controller = excluded.controller, action = excluded.action, description = excluded.description,
          tags = excluded.tags, deprecated = false, last_updated = now()
      where (a.controller, a.action, a.description, a.tags, a.deprecated)
            is distinct from (excluded.controller, excluded.action, excluded.description, excluded.tags, false)
    returning (a.xmax = 0) as is_new
  )
  select count(*) filter (where is_new), count(*) filter (where not is_new)
    into added, changed
    from upserted;

  update app.api_endpoints a
     set deprecated = true, last_updated = now()
   where not a.deprecated
     and not exists (select from incoming i where i.http_method = a.http_method and i.path = a.path);
  get diagnostics retired = row_count;

  unchanged := total - added - changed;
  drop table incoming;
  return next;
end;
$$;
comment on function private.sync_api_endpoints(jsonb) is
  'Upserts the routes the gateway serves: new ones inserted, changed ones get last_updated = now() (discovered_at kept), '
  'unchanged ones untouched, ones no longer served marked deprecated. Returns the counts.';

-- GET /api/docs/endpoints: every known endpoint as ApiEndpoint (spec section 2),
-- by path then method; deprecated ones included, flagged.
create function api.api_endpoints_list()
  returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select coalesce(jsonb_agg(jsonb_build_object(
             'id', e.id, 'path', e.path, 'http_method', e.http_method, 'controller', e.controller,
             'action', e.action, 'description', e.description, 'tags', to_jsonb(e.tags),
             'deprecated', e.deprecated, 'discovered_at', app.iso(e.discovered_at),
             'last_updated', app.iso(e.last_updated))
           order by e.path, e.http_method), '[]'::jsonb)
      from app.api_endpoints e
  $$;
comment on function api.api_endpoints_list() is
  'GET /api/docs/endpoints: the endpoints the gateway serves (and deprecated ones, flagged) as ApiEndpoint objects.';
grant execute on function api.api_endpoints_list() to anon, authenticated;
