--! Previous: sha1:7beef671cab0df5addaca452b33bab89df96b115
--! Hash: sha1:0822c71631210c534ce3d24048e70686fc1575f7
--! Message: tasks-deals

--------------------------------------------------------------------------------
-- Tasks, task links and deals (the CRM)
--
-- A task keeps its attributes in `meta` (title, description, status,
-- deal_context {company, deal_value}). Tasks are private to their creator:
-- row-level security shows a user only the tasks, links and deals they made.
--
-- The status machine (spec section 3) is in private.task_start and
-- private.task_complete, which lock the task row; a trigger refuses any other
-- status change, whatever path the update takes.
--
-- Links are task_transition records, origin → destination. A link may not
-- close a cycle: private.task_link_would_cycle walks forward from the
-- destination (a recursive CTE, so it costs what is reachable, not the table)
-- looking for the origin. Links only join tasks of one user, so link creation
-- is serialised per user with a transaction-scoped advisory lock: of two
-- requests linking A→B and B→A at once, the second waits, then sees the first
-- link and refuses.
--
-- A deal is the user's record for one company (case-insensitive), created by
-- the first task that carries deal_context.company and kept by a trigger on
-- tasks.
--------------------------------------------------------------------------------

-- Request roles may call the private helpers granted to them one by one below
-- (the default privileges revoke execute from PUBLIC in every schema).
grant usage on schema private to authenticated;

--------------------------------------------------------------------------------
-- Tables
--------------------------------------------------------------------------------

create table app.tasks (
  id          uuid primary key default gen_random_uuid(),
  created_by  uuid not null default auth.uid() references identity.users (id) on delete cascade,
  meta        jsonb not null default '{"status": "pending"}',
  inserted_at timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  -- deal_context.company as tasks are grouped and searched by it (lower case,
  -- trimmed); a real column, so the planner has statistics and an index.
  company_key text generated always as (nullif(lower(btrim(meta -> 'deal_context' ->> 'company')), '')) stored,
  constraint tasks_meta_is_object check (jsonb_typeof(meta) = 'object'),
  constraint tasks_status_is_valid check (coalesce(meta ->> 'status', '') in ('pending', 'in_progress', 'completed')),
  constraint tasks_deal_context_is_object check (
    not meta ? 'deal_context' or jsonb_typeof(meta -> 'deal_context') = 'object'
  )
);
comment on table app.tasks is
  'CRM tasks. meta holds title, description, status (pending|in_progress|completed) and deal_context {company, deal_value}.';

-- The list (newest first, optionally by status), search and by_company all
-- start from the caller's rows; the policy filters on created_by.
create index tasks_created_by_idx on app.tasks (created_by, inserted_at desc, id desc);
create index tasks_created_by_status_idx on app.tasks (created_by, (meta ->> 'status'), inserted_at desc, id desc);
create index tasks_company_idx on app.tasks (created_by, company_key, inserted_at desc, id desc)
  where company_key is not null;

create table app.task_transitions (
  id             uuid primary key default gen_random_uuid(),
  type           text not null default 'task_transition' check (type = 'task_transition'),
  origin_id      uuid not null references app.tasks (id) on delete cascade,
  destination_id uuid not null references app.tasks (id) on delete cascade,
  created_by     uuid not null default auth.uid() references identity.users (id) on delete cascade,
  inserted_at    timestamptz not null default now(),
  meta           jsonb not null default '{}' check (jsonb_typeof(meta) = 'object'),
  constraint task_transitions_not_a_self_link check (origin_id <> destination_id)
);
comment on table app.task_transitions is
  'Task links: a task_transition event from origin to destination; meta is the transition_meta. The links form no cycle.';

-- Walks go forward by origin_id and backward by destination_id; next and
-- previous take the most recent link of a task.
create index task_transitions_origin_idx on app.task_transitions (origin_id, inserted_at desc, id desc);
create index task_transitions_destination_idx on app.task_transitions (destination_id, inserted_at desc, id desc);
create index task_transitions_created_by_idx on app.task_transitions (created_by);

create table app.deals (
  id              uuid primary key default gen_random_uuid(),
  created_by      uuid not null default auth.uid() references identity.users (id) on delete cascade,
  company         text not null check (length(btrim(company)) between 1 and 200),
  deal_value      numeric,
  current_task_id uuid references app.tasks (id) on delete set null,
  next_action     text,
  inserted_at     timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
comment on table app.deals is
  'A user''s deal with one company (case-insensitive): the latest deal_value given, the current task and the next action.';

create unique index deals_company_per_user on app.deals (created_by, lower(company));
create index deals_created_by_idx on app.deals (created_by, inserted_at desc, id desc);
create index deals_current_task_idx on app.deals (current_task_id);

--------------------------------------------------------------------------------
-- Rules: updated_at, the status machine guard, deals kept from tasks
--------------------------------------------------------------------------------

create trigger _100_set_updated_at before update on app.tasks
  for each row execute function private.tg__set_updated_at();
create trigger _100_set_updated_at before update on app.deals
  for each row execute function private.tg__set_updated_at();

-- Whatever updates a task, its status only moves along the spec's table:
-- pending → in_progress, pending or in_progress → completed.
create function private.tg_tasks__guard_status() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  old_status text := old.meta ->> 'status';
  new_status text := new.meta ->> 'status';
begin
  if (old_status, new_status) not in (('pending', 'in_progress'), ('pending', 'completed'), ('in_progress', 'completed')) then
    raise exception 'invalid status transition' using errcode = 'PT422', hint = 'invalid_status_transition',
      detail = format('%s → %s', old_status, new_status);
  end if;
  return new;
end;
$$;
comment on function private.tg_tasks__guard_status() is
  'Trigger: refuses a status change that the task status table does not allow (PT422).';

create trigger _200_guard_status before update on app.tasks
  for each row when (old.meta ->> 'status' is distinct from new.meta ->> 'status')
  execute function private.tg_tasks__guard_status();

-- A task that carries deal_context.company creates the caller's deal for that
-- company, or updates it: deal_value becomes the latest value given, and the
-- task becomes the deal's current task when the deal has none that is still
-- open (no current task, or it is completed, or no longer about the company).
create function private.tg_tasks__sync_deal() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  given_company text := nullif(btrim(new.meta -> 'deal_context' ->> 'company'), '');
  given_value numeric := case
    when jsonb_typeof(new.meta -> 'deal_context' -> 'deal_value') = 'number'
      then (new.meta -> 'deal_context' ->> 'deal_value')::numeric
  end;
  deal app.deals;
  take_over boolean;
begin
  if given_company is null then
    return null;
  end if;
  loop
    select * into deal from app.deals d
     where d.created_by = new.created_by and lower(d.company) = lower(given_company)
       for update;
    exit when found;
    insert into app.deals as d (created_by, company, deal_value, current_task_id, next_action)
      values (new.created_by, given_company, given_value, new.id, new.meta ->> 'title')
      on conflict (created_by, lower(company)) do nothing
      returning * into deal;
    if found then
      return null;
    end if;
    -- Another transaction created it meanwhile: lock that one.
  end loop;

  -- The slot is open when the deal has no current task still open for this
  -- company; a completed task only fills a slot that is empty.
  take_over := deal.current_task_id is null
    or (new.meta ->> 'status' <> 'completed'
        and (deal.current_task_id = new.id
             or not exists (
                  select from app.tasks c
                   where c.id = deal.current_task_id
                     and c.meta ->> 'status' <> 'completed'
                     and c.company_key = lower(deal.company))));
  update app.deals d
     set deal_value = coalesce(given_value, d.deal_value),
         current_task_id = case when take_over then new.id else d.current_task_id end,
         next_action = case when take_over then new.meta ->> 'title' else d.next_action end
   where d.id = deal.id;
  return null;
end;
$$;
comment on function private.tg_tasks__sync_deal() is
  'Trigger: creates or updates the deal of the task''s deal_context.company (latest deal_value, current task when open).';

create trigger _500_sync_deal after insert on app.tasks
  for each row when (new.meta -> 'deal_context' ->> 'company' is not null)
  execute function private.tg_tasks__sync_deal();
create trigger _500_sync_deal_on_update after update on app.tasks
  for each row when (new.meta -> 'deal_context' ->> 'company' is not null
                     and old.meta -> 'deal_context' is distinct from new.meta -> 'deal_context')
  execute function private.tg_tasks__sync_deal();

--------------------------------------------------------------------------------
-- Row-level security
--------------------------------------------------------------------------------

alter table app.tasks enable row level security;
grant select, insert (created_by, meta), update (meta), delete on app.tasks to authenticated;
create policy "Users can read their own tasks" on app.tasks
  for select to authenticated
  using (created_by = (select auth.uid()));
create policy "Users can create their own tasks" on app.tasks
  for insert to authenticated
  with check (created_by = (select auth.uid()));
create policy "Users can change their own tasks" on app.tasks
  for update to authenticated
  using (created_by = (select auth.uid()))
  with check (created_by = (select auth.uid()));
create policy "Users can delete their own tasks" on app.tasks
  for delete to authenticated
  using (created_by = (select auth.uid()));

alter table app.task_transitions enable row level security;
grant select, insert (created_by, origin_id, destination_id, meta) on app.task_transitions to authenticated;
create policy "Users can read their own task links" on app.task_transitions
  for select to authenticated
  using (created_by = (select auth.uid()));
-- Both ends must be tasks the user can see (their own).
create policy "Users can link their own tasks" on app.task_transitions
  for insert to authenticated
  with check (
    created_by = (select auth.uid())
    and exists (select from app.tasks o where o.id = origin_id)
    and exists (select from app.tasks d where d.id = destination_id)
  );

alter table app.deals enable row level security;
grant select, insert (created_by, company, deal_value, current_task_id, next_action),
  update (deal_value, current_task_id, next_action) on app.deals to authenticated;
create policy "Users can read their own deals" on app.deals
  for select to authenticated
  using (created_by = (select auth.uid()));
create policy "Users can create their own deals" on app.deals
  for insert to authenticated
  with check (created_by = (select auth.uid()));
create policy "Users can change their own deals" on app.deals
  for update to authenticated
  using (created_by = (select auth.uid()))
  with check (created_by = (select auth.uid()));

--------------------------------------------------------------------------------
-- Internal helpers: the status machine, links and cycle detection
--
-- They run as the caller (row-level security applies); api functions and the
-- deal functions share them. Task rows are locked `for no key update`: it
-- serialises status changes of one task but lets other requests link to the
-- task meanwhile (their foreign-key checks take only a key-share lock).
--------------------------------------------------------------------------------

-- Whether a task id exists at all, whoever created it: tells "not yours"
-- (403 on delete) from "no such task" (404).
create function private.task_exists(task_id uuid) returns boolean
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select exists (select from app.tasks t where t.id = task_exists.task_id)
  $$;
comment on function private.task_exists(uuid) is
  'Whether a task with this id exists, whoever created it (security definer; answers only yes or no).';
grant execute on function private.task_exists(uuid) to authenticated;

create function private.task_start(task_id uuid) returns app.tasks
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  task app.tasks;
begin
  select * into task from app.tasks t where t.id = task_start.task_id for no key update;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  if task.meta ->> 'status' <> 'pending' then
    raise exception 'task must be pending to start' using errcode = 'PT422', hint = 'invalid_status_transition';
  end if;
  update app.tasks t set meta = t.meta || '{"status": "in_progress"}'
    where t.id = task.id
    returning * into task;
  return task;
end;
$$;
comment on function private.task_start(uuid) is
  'Starts a pending task (row locked): PT404 when the caller has no such task, PT422 when it is not pending.';
grant execute on function private.task_start(uuid) to authenticated;

create function private.task_complete(task_id uuid) returns app.tasks
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  task app.tasks;
begin
  select * into task from app.tasks t where t.id = task_complete.task_id for no key update;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  if task.meta ->> 'status' = 'completed' then
    raise exception 'invalid status transition' using errcode = 'PT422', hint = 'invalid_status_transition';
  end if;
  update app.tasks t set meta = t.meta || '{"status": "completed"}'
    where t.id = task.id
    returning * into task;
  return task;
end;
$$;
comment on function private.task_complete(uuid) is
  'Completes a pending or in-progress task (row locked): PT404 when the caller has no such task, PT422 when already completed.';
grant execute on function private.task_complete(uuid) to authenticated;

-- The cycle check: would a link origin → destination close a cycle? Only if
-- origin is reachable from destination. The walk follows links forward from
-- the destination; UNION drops tasks already reached, and EXISTS stops at the
-- first sight of the origin, so the cost is bounded by what is reachable from
-- the destination, not by the size of the table.
create function private.task_link_would_cycle(origin_id uuid, destination_id uuid) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select task_link_would_cycle.origin_id = task_link_would_cycle.destination_id
        or exists (
             with recursive reachable (id) as (
               select task_link_would_cycle.destination_id
               union
               select l.destination_id
                 from reachable r
                 join app.task_transitions l on l.origin_id = r.id
             )
             select from reachable where reachable.id = task_link_would_cycle.origin_id
           )
  $$;
comment on function private.task_link_would_cycle(uuid, uuid) is
  'Whether linking origin → destination would close a cycle (walks forward from destination over the caller''s links).';
grant execute on function private.task_link_would_cycle(uuid, uuid) to authenticated;

-- The per-user lock that serialises link creation (and so the cycle check).
create function private.lock_task_links(user_id uuid) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('app.task_transitions:' || lock_task_links.user_id::text, 0))
  $$;
comment on function private.lock_task_links(uuid) is
  'Takes the transaction-scoped advisory lock that serialises a user''s link creation.';
grant execute on function private.lock_task_links(uuid) to authenticated;

create function private.task_link(origin_id uuid, destination_id uuid, transition_meta jsonb default '{}')
  returns app.task_transitions
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
  link app.task_transitions;
begin
  if not exists (select from app.tasks t where t.id = task_link.origin_id) then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  if task_link.origin_id = task_link.destination_id then
    raise exception 'a task cannot be linked to itself (circular dependency)'
      using errcode = 'PT422', hint = 'circular_dependency';
  end if;
  if not exists (select from app.tasks t where t.id = task_link.destination_id) then
    raise exception 'destination task not found' using errcode = 'PT404', hint = 'destination_task_not_found';
  end if;
  if transition_meta is not null and jsonb_typeof(transition_meta) <> 'object' then
    raise exception 'transition_meta must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;

  -- One link creation at a time per user; the check below runs on a fresh
  -- snapshot taken after the lock, so it sees every link committed before.
  perform private.lock_task_links(caller);
  if private.task_link_would_cycle(task_link.origin_id, task_link.destination_id) then
    raise exception 'linking these tasks would create a circular dependency'
      using errcode = 'PT422', hint = 'circular_dependency';
  end if;

  insert into app.task_transitions as l (created_by, origin_id, destination_id, meta)
    values (caller, task_link.origin_id, task_link.destination_id, coalesce(task_link.transition_meta, '{}'))
    returning * into link;
  return link;
end;
$$;
comment on function private.task_link(uuid, uuid, jsonb) is
  'Links origin → destination (both the caller''s tasks): PT404 for an unknown task, PT422 for a self-link or a cycle. Serialised per user.';
grant execute on function private.task_link(uuid, uuid, jsonb) to authenticated;

--------------------------------------------------------------------------------
-- API: tasks
--
-- Resource shapes: api.task (Task), api.task_transition (task link record),
-- api.company_tasks (an element of by_company), api.deal (Deal).
--------------------------------------------------------------------------------

create type api.task as (id uuid, created_by uuid, inserted_at timestamptz, updated_at timestamptz, meta jsonb);
create type api.task_transition as (
  id uuid, type text, origin_id uuid, destination_id uuid, created_by uuid, inserted_at timestamptz, meta jsonb
);
create type api.company_tasks as (
  company_name text, deal_value jsonb, task_count integer, active_task jsonb, all_tasks jsonb, completed_tasks jsonb
);

create function api.tasks_list(status text default null, page integer default 1, page_size integer default 20)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if tasks_list.status is not null and tasks_list.status not in ('pending', 'in_progress', 'completed') then
    raise exception 'status must be one of pending, in_progress, completed' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if tasks_list.page is null or tasks_list.page < 1 then
    raise exception 'page must be at least 1' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if tasks_list.page_size is null or tasks_list.page_size not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT422', hint = 'validation_error';
  end if;
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
      from app.tasks t
     where tasks_list.status is null or t.meta ->> 'status' = tasks_list.status
     order by t.inserted_at desc, t.id desc
     limit tasks_list.page_size
    offset (tasks_list.page::bigint - 1) * tasks_list.page_size;
end;
$$;
comment on function api.tasks_list(text, integer, integer) is
  'GET /api/mobile/tasks: the caller''s tasks, newest first, optionally of one status; page from 1, page_size 1..100 (PT422 otherwise).';
grant execute on function api.tasks_list(text, integer, integer) to authenticated;

create function api.task_create(title text default null, description text default null,
                                status text default 'pending', deal_context jsonb default null)
  returns setof api.task
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  if coalesce(task_create.status, 'pending') not in ('pending', 'in_progress', 'completed') then
    raise exception 'status must be one of pending, in_progress, completed' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if task_create.deal_context is not null and jsonb_typeof(task_create.deal_context) <> 'object' then
    raise exception 'deal_context must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  return query
    insert into app.tasks as t (created_by, meta)
      values (auth.uid(), jsonb_strip_nulls(jsonb_build_object(
        'title', task_create.title,
        'description', task_create.description,
        'status', coalesce(task_create.status, 'pending'),
        'deal_context', task_create.deal_context)))
      returning t.id, t.created_by, t.inserted_at, t.updated_at, t.meta;
end;
$$;
comment on function api.task_create(text, text, text, jsonb) is
  'POST /api/mobile/tasks: creates a task of the caller (status default pending); a deal_context.company creates or updates the deal.';
grant execute on function api.task_create(text, text, text, jsonb) to authenticated;

create function api.task_get(task_id uuid)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from app.tasks t where t.id = task_get.task_id;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
end;
$$;
comment on function api.task_get(uuid) is 'GET /api/mobile/tasks/{id}: one of the caller''s tasks; PT404 otherwise.';
grant execute on function api.task_get(uuid) to authenticated;

-- PATCH merges like a JSON merge patch (RFC 7396): keys given replace those in
-- meta, deal_context is merged key by key, and null removes a key. status is
-- not changeable here.
create function api.task_update(task_id uuid, changes jsonb)
  returns setof api.task
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
$$;
comment on function api.task_update(uuid, jsonb) is
  'PATCH /api/mobile/tasks/{id}: merges title, description and deal_context into meta (null removes); PT422 for status or other keys; PT404.';
grant execute on function api.task_update(uuid, jsonb) to authenticated;

create function api.task_delete(task_id uuid) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  delete from app.tasks t where t.id = task_delete.task_id;
  if found then
    return;
  end if;
  if private.task_exists(task_delete.task_id) then
    raise exception 'only the creator of a task can delete it' using errcode = 'PT403', hint = 'not_task_creator';
  end if;
  raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
end;
$$;
comment on function api.task_delete(uuid) is
  'DELETE /api/mobile/tasks/{id}: deletes one of the caller''s tasks and its links; PT403 for another user''s task, PT404 for none.';
grant execute on function api.task_delete(uuid) to authenticated;

create function api.task_start(task_id uuid)
  returns setof api.task
  language sql volatile
  set search_path = pg_catalog
  as $$
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from private.task_start(task_start.task_id) t
  $$;
comment on function api.task_start(uuid) is
  'POST /api/mobile/tasks/{id}/start: pending → in_progress; PT422 "task must be pending to start"; PT404.';
grant execute on function api.task_start(uuid) to authenticated;

create function api.task_complete(task_id uuid)
  returns setof api.task
  language sql volatile
  set search_path = pg_catalog
  as $$
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from private.task_complete(task_complete.task_id) t
  $$;
comment on function api.task_complete(uuid) is
  'POST /api/mobile/tasks/{id}/complete: pending or in_progress → completed; PT422 "invalid status transition"; PT404.';
grant execute on function api.task_complete(uuid) to authenticated;

-- Two rows, in this order: the completed task, then the new next task.
create function api.task_complete_and_link(task_id uuid, title text default null, description text default null,
                                           status text default 'pending')
  returns setof api.task
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  completed app.tasks;
  next_task app.tasks;
begin
  if coalesce(task_complete_and_link.status, 'pending') not in ('pending', 'in_progress') then
    raise exception 'next_task.status must be pending or in_progress' using errcode = 'PT422', hint = 'validation_error';
  end if;
  completed := private.task_complete(task_complete_and_link.task_id);
  insert into app.tasks as t (created_by, meta)
    values (completed.created_by, jsonb_strip_nulls(jsonb_build_object(
      'title', task_complete_and_link.title,
      'description', task_complete_and_link.description,
      'status', coalesce(task_complete_and_link.status, 'pending'))))
    returning * into next_task;
  -- A brand-new task has no outgoing link, so this link cannot close a cycle.
  insert into app.task_transitions (created_by, origin_id, destination_id)
    values (completed.created_by, completed.id, next_task.id);
  return query values
    (completed.id, completed.created_by, completed.inserted_at, completed.updated_at, completed.meta),
    (next_task.id, next_task.created_by, next_task.inserted_at, next_task.updated_at, next_task.meta);
end;
$$;
comment on function api.task_complete_and_link(uuid, text, text, text) is
  'POST /api/mobile/tasks/{id}/complete_and_link: completes the task, creates the next one and links them, in one transaction. Rows: completed task, next task.';
grant execute on function api.task_complete_and_link(uuid, text, text, text) to authenticated;

create function api.task_link(task_id uuid, destination_task_id uuid, transition_meta jsonb default '{}')
  returns setof api.task_transition
  language sql volatile
  set search_path = pg_catalog
  as $$
    select l.id, l.type, l.origin_id, l.destination_id, l.created_by, l.inserted_at, l.meta
      from private.task_link(task_link.task_id, task_link.destination_task_id, task_link.transition_meta) l
  $$;
comment on function api.task_link(uuid, uuid, jsonb) is
  'POST /api/mobile/tasks/{id}/link: a task_transition from the task to the destination; PT404 unknown task, PT422 self-link or cycle.';
grant execute on function api.task_link(uuid, uuid, jsonb) to authenticated;

-- next / previous: the task at the other end of the most recent link out of
-- (into) the task; no row when there is none.
create function api.task_next(task_id uuid)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if not exists (select from app.tasks t where t.id = task_next.task_id) then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
      from app.task_transitions l
      join app.tasks t on t.id = l.destination_id
     where l.origin_id = task_next.task_id
     order by l.inserted_at desc, l.id desc
     limit 1;
end;
$$;
comment on function api.task_next(uuid) is
  'GET /api/mobile/tasks/{id}/next: the destination of the most recent link out of the task (no row if none); PT404.';
grant execute on function api.task_next(uuid) to authenticated;

create function api.task_previous(task_id uuid)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if not exists (select from app.tasks t where t.id = task_previous.task_id) then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
      from app.task_transitions l
      join app.tasks t on t.id = l.origin_id
     where l.destination_id = task_previous.task_id
     order by l.inserted_at desc, l.id desc
     limit 1;
end;
$$;
comment on function api.task_previous(uuid) is
  'GET /api/mobile/tasks/{id}/previous: the origin of the most recent link into the task (no row if none); PT404.';
grant execute on function api.task_previous(uuid) to authenticated;

-- The chain: the starting task, then every task reached by following at most
-- `depth` links (forward: origin → destination; backward: the reverse), each
-- once, ordered by the fewest links needed to reach it, ties by the time of
-- the link that reached it. The walk keeps one row per (task, depth, link
-- time), so branches that meet again merge instead of multiplying paths; it
-- costs what it walks, never the whole table.
create function api.task_chain(task_id uuid, direction text default 'forward', depth integer default 50)
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
  if not exists (select from app.tasks t where t.id = task_chain.task_id) then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;

  if task_chain.direction = 'forward' then
    return query
      with recursive walk (id, steps, via_at) as (
        select task_chain.task_id, 0, null::timestamptz
        union
        select l.destination_id, w.steps + 1, l.inserted_at
          from walk w
          join app.task_transitions l on l.origin_id = w.id
         where w.steps < task_chain.depth
      ),
      first_reached as (
        select distinct on (w.id) w.id, w.steps, w.via_at from walk w order by w.id, w.steps, w.via_at nulls first
      )
      select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
        from first_reached f
        join app.tasks t on t.id = f.id
       order by f.steps, f.via_at nulls first, f.id;
  else
    return query
      with recursive walk (id, steps, via_at) as (
        select task_chain.task_id, 0, null::timestamptz
        union
        select l.origin_id, w.steps + 1, l.inserted_at
          from walk w
          join app.task_transitions l on l.destination_id = w.id
         where w.steps < task_chain.depth
      ),
      first_reached as (
        select distinct on (w.id) w.id, w.steps, w.via_at from walk w order by w.id, w.steps, w.via_at nulls first
      )
      select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
        from first_reached f
        join app.tasks t on t.id = f.id
       order by f.steps, f.via_at nulls first, f.id;
  end if;
end;
$$;
comment on function api.task_chain(uuid, text, integer) is
  'GET /api/mobile/tasks/{id}/chain: the task, then the tasks within `depth` links forward or backward, each once, nearest first; PT404.';
grant execute on function api.task_chain(uuid, text, integer) to authenticated;

-- Companies of the caller's tasks, grouped case-insensitively. company_name
-- and deal_value come from the deal (first spelling, latest value given);
-- active_task is the deal's current task while it is open, else the newest
-- in-progress task, else the newest pending one. Nested tasks are Task JSON
-- objects with timestamps written as the gateway writes top-level ones
-- (UTC, milliseconds, Z), built inline: one pass, no per-row function call.
create function api.tasks_by_company()
  returns setof api.company_tasks
  language sql stable
  set search_path = pg_catalog
  as $$
    with tagged as (
      select t.id, t.company_key, t.meta ->> 'status' as status, t.inserted_at,
             btrim(t.meta -> 'deal_context' ->> 'company') as company,
             jsonb_build_object(
               'id', t.id,
               'created_by', t.created_by,
               'inserted_at', to_char(t.inserted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'updated_at', to_char(t.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'meta', t.meta) as task
        from app.tasks t
       where t.company_key is not null
    ),
    companies as (
      select g.company_key,
             count(*)::integer as task_count,
             jsonb_agg(g.task order by g.inserted_at desc, g.id desc) as all_tasks,
             coalesce(jsonb_agg(g.task order by g.inserted_at desc, g.id desc) filter (where g.status = 'completed'), '[]') as completed_tasks,
             (array_agg(g.company order by g.inserted_at, g.id))[1] as first_spelling
        from tagged g
       group by g.company_key
    )
    select coalesce(d.company, c.first_spelling),
           case when d.deal_value is not null then to_jsonb(d.deal_value) end,
           c.task_count,
           (select g.task
              from tagged g
             where g.company_key = c.company_key
               and g.status in ('pending', 'in_progress')
             order by g.id = d.current_task_id desc nulls last, g.status = 'in_progress' desc, g.inserted_at desc, g.id desc
             limit 1),
           c.all_tasks,
           c.completed_tasks
      from companies c
      left join app.deals d on lower(d.company) = c.company_key and d.created_by = (select auth.uid())
     order by c.company_key
  $$;
comment on function api.tasks_by_company() is
  'GET /api/mobile/tasks/by_company: the caller''s tasks grouped by deal_context.company (case-insensitive), with deal value and the active task.';
grant execute on function api.tasks_by_company() to authenticated;

create function api.tasks_search(company text)
  returns setof api.task
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  pattern text;
begin
  if nullif(btrim(tasks_search.company), '') is null then
    raise exception 'company is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- A partial match on the text as typed (trimmed, any case): LIKE's
  -- wildcards in it match literally.
  pattern := '%' || replace(replace(replace(lower(btrim(tasks_search.company)), '\', '\\'), '%', '\%'), '_', '\_') || '%';
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta
      from app.tasks t
     where t.company_key is not null
       and t.company_key like pattern
     order by t.inserted_at desc, t.id desc;
end;
$$;
comment on function api.tasks_search(text) is
  'GET /api/mobile/tasks/search: the caller''s tasks whose deal_context.company contains the text (case-insensitive), newest first.';
grant execute on function api.tasks_search(text) to authenticated;

--------------------------------------------------------------------------------
-- API: deals
--------------------------------------------------------------------------------

create type api.deal as (id uuid, created_by uuid, meta jsonb);

create function private.deal_json_meta(deal app.deals) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'company', (deal_json_meta.deal).company,
      'deal_value', to_jsonb((deal_json_meta.deal).deal_value),
      'current_task_id', (deal_json_meta.deal).current_task_id,
      'next_action', (deal_json_meta.deal).next_action)
  $$;
comment on function private.deal_json_meta(app.deals) is 'The meta object of a Deal: company, deal_value, current_task_id, next_action.';
grant execute on function private.deal_json_meta(app.deals) to authenticated;

create function api.deals_list()
  returns setof api.deal
  language sql stable
  set search_path = pg_catalog
  as $$
    select d.id, d.created_by, private.deal_json_meta(d) from app.deals d order by d.inserted_at desc, d.id desc
  $$;
comment on function api.deals_list() is 'GET /api/mobile/deals: the caller''s deals, newest first.';
grant execute on function api.deals_list() to authenticated;

create function api.deal_get(deal_id uuid)
  returns setof api.deal
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query select d.id, d.created_by, private.deal_json_meta(d) from app.deals d where d.id = deal_get.deal_id;
  if not found then
    raise exception 'deal not found' using errcode = 'PT404', hint = 'deal_not_found';
  end if;
end;
$$;
comment on function api.deal_get(uuid) is 'GET /api/mobile/deals/{id}: one of the caller''s deals; PT404 otherwise.';
grant execute on function api.deal_get(uuid) to authenticated;

create function private.deal_lock(deal_id uuid) returns app.deals
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  deal app.deals;
begin
  select * into deal from app.deals d where d.id = deal_lock.deal_id for update;
  if not found then
    raise exception 'deal not found' using errcode = 'PT404', hint = 'deal_not_found';
  end if;
  if deal.current_task_id is null then
    raise exception 'the deal has no current task' using errcode = 'PT422', hint = 'no_current_task';
  end if;
  return deal;
end;
$$;
comment on function private.deal_lock(uuid) is
  'Locks one of the caller''s deals: PT404 when there is none, PT422 when it has no current task.';
grant execute on function private.deal_lock(uuid) to authenticated;

create function api.deal_start_task(deal_id uuid)
  returns setof api.deal
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  deal app.deals := private.deal_lock(deal_start_task.deal_id);
begin
  perform private.task_start(deal.current_task_id);
  return query select d.id, d.created_by, private.deal_json_meta(d) from app.deals d where d.id = deal.id;
end;
$$;
comment on function api.deal_start_task(uuid) is
  'POST /api/mobile/deals/{id}/start_task: starts the deal''s current task; PT404 unknown deal, PT422 when it cannot start.';
grant execute on function api.deal_start_task(uuid) to authenticated;

-- Completes the current task; given new_next_action, creates the next task
-- with that title and the completed task's deal_context, links it and makes
-- it current, and next_action becomes new_next_action. Without it, the deal
-- keeps the completed task as current and next_action becomes null.
create function api.deal_complete_task(deal_id uuid, new_next_action text default null)
  returns setof api.deal
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  deal app.deals := private.deal_lock(deal_complete_task.deal_id);
  completed app.tasks;
  next_task app.tasks;
  action text := nullif(btrim(deal_complete_task.new_next_action), '');
begin
  completed := private.task_complete(deal.current_task_id);
  if action is null then
    update app.deals d set next_action = null where d.id = deal.id;
  else
    insert into app.tasks as t (created_by, meta)
      values (completed.created_by, jsonb_strip_nulls(jsonb_build_object(
        'title', action,
        'status', 'pending',
        'deal_context', completed.meta -> 'deal_context')))
      returning * into next_task;
    insert into app.task_transitions (created_by, origin_id, destination_id)
      values (completed.created_by, completed.id, next_task.id);
    update app.deals d set current_task_id = next_task.id, next_action = action where d.id = deal.id;
  end if;
  return query select d.id, d.created_by, private.deal_json_meta(d) from app.deals d where d.id = deal.id;
end;
$$;
comment on function api.deal_complete_task(uuid, text) is
  'POST /api/mobile/deals/{id}/complete_task: completes the current task; with new_next_action creates, links and makes current the next task.';
grant execute on function api.deal_complete_task(uuid, text) to authenticated;
