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
