-- =============================================================================
-- Tasks and deals (the CRM)
-- =============================================================================
-- A task keeps its attributes in `meta` (title, description, status,
-- deal_context {company, deal_value}). Tasks, links and deals are private to
-- their creator (row-level security on created_by).
--
-- The status machine: pending -> in_progress -> completed (pending may complete
-- directly); private.task_start and private.task_complete lock the task row, and
-- a trigger refuses any other status change, whatever path the update takes.
--
-- Links (app.task_transitions, origin -> destination) may not close a cycle:
-- private.task_link_would_cycle walks forward from the destination (a recursive
-- CTE: it costs what is reachable, not the table). Link creation is serialised
-- per user by a transaction-scoped advisory lock, so of two requests linking
-- A->B and B->A at once the second waits, then sees the first and refuses.
-- Chains are a breadth-first walk that expands each task once, capped at depth
-- private.task_chain_max_depth() (1000).
--
-- A deal is the user's record of one company (case-insensitive), made by the
-- first task that carries deal_context.company and kept by a trigger; its
-- current task is moved on by deal_start_task / deal_complete_task and by
-- complete_and_link.
--
-- Code: gateway/routes/tasks.ts
-- pgTAP: supabase/tests/tasks.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.company_tasks AS (
	company_name text,
	deal_value jsonb,
	task_count integer,
	active_task jsonb,
	all_tasks jsonb,
	completed_tasks jsonb
);

CREATE TYPE api.deal AS (
	id uuid,
	created_by uuid,
	meta jsonb
);

CREATE TYPE api.task AS (
	id uuid,
	created_by uuid,
	inserted_at timestamp with time zone,
	updated_at timestamp with time zone,
	meta jsonb
);

CREATE TYPE api.task_transition AS (
	id uuid,
	type text,
	origin_id uuid,
	destination_id uuid,
	created_by uuid,
	inserted_at timestamp with time zone,
	meta jsonb
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.tasks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    created_by uuid DEFAULT auth.uid() NOT NULL,
    meta jsonb DEFAULT '{"status": "pending"}'::jsonb NOT NULL,
    inserted_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    company_key text GENERATED ALWAYS AS (NULLIF(lower(btrim(((meta -> 'deal_context'::text) ->> 'company'::text))), ''::text)) STORED,
    CONSTRAINT tasks_deal_context_is_object CHECK (((NOT (meta ? 'deal_context'::text)) OR (jsonb_typeof((meta -> 'deal_context'::text)) = 'object'::text))),
    CONSTRAINT tasks_meta_is_object CHECK ((jsonb_typeof(meta) = 'object'::text)),
    CONSTRAINT tasks_status_is_valid CHECK ((COALESCE((meta ->> 'status'::text), ''::text) = ANY (ARRAY['pending'::text, 'in_progress'::text, 'completed'::text]))),
    CONSTRAINT tasks_pkey PRIMARY KEY (id),
    CONSTRAINT tasks_created_by_fkey FOREIGN KEY (created_by) REFERENCES identity.users(id) ON DELETE CASCADE
);
ALTER TABLE app.tasks
    ADD CONSTRAINT tasks_meta_size CHECK ((octet_length((meta)::text) <= 131072)) NOT VALID;
COMMENT ON TABLE app.tasks IS 'CRM tasks. meta holds title, description, status (pending|in_progress|completed) and deal_context {company, deal_value}.';
ALTER TABLE app.tasks ENABLE ROW LEVEL SECURITY;
GRANT SELECT,DELETE ON TABLE app.tasks TO authenticated;
GRANT INSERT(created_by) ON TABLE app.tasks TO authenticated;
GRANT INSERT(meta),UPDATE(meta) ON TABLE app.tasks TO authenticated;

CREATE TABLE app.task_transitions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    type text DEFAULT 'task_transition'::text NOT NULL,
    origin_id uuid NOT NULL,
    destination_id uuid NOT NULL,
    created_by uuid DEFAULT auth.uid() NOT NULL,
    inserted_at timestamp with time zone DEFAULT now() NOT NULL,
    meta jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT task_transitions_meta_check CHECK ((jsonb_typeof(meta) = 'object'::text)),
    CONSTRAINT task_transitions_not_a_self_link CHECK ((origin_id <> destination_id)),
    CONSTRAINT task_transitions_type_check CHECK ((type = 'task_transition'::text)),
    CONSTRAINT task_transitions_pkey PRIMARY KEY (id),
    CONSTRAINT task_transitions_created_by_fkey FOREIGN KEY (created_by) REFERENCES identity.users(id) ON DELETE CASCADE,
    CONSTRAINT task_transitions_destination_id_fkey FOREIGN KEY (destination_id) REFERENCES app.tasks(id) ON DELETE CASCADE,
    CONSTRAINT task_transitions_origin_id_fkey FOREIGN KEY (origin_id) REFERENCES app.tasks(id) ON DELETE CASCADE
);
ALTER TABLE app.task_transitions
    ADD CONSTRAINT task_transitions_meta_size CHECK ((octet_length((meta)::text) <= 32768)) NOT VALID;
COMMENT ON TABLE app.task_transitions IS 'Task links: a task_transition event from origin to destination; meta is the transition_meta. The links form no cycle.';
ALTER TABLE app.task_transitions ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.task_transitions TO authenticated;
GRANT INSERT(origin_id) ON TABLE app.task_transitions TO authenticated;
GRANT INSERT(destination_id) ON TABLE app.task_transitions TO authenticated;
GRANT INSERT(created_by) ON TABLE app.task_transitions TO authenticated;
GRANT INSERT(meta) ON TABLE app.task_transitions TO authenticated;

CREATE TABLE app.deals (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    created_by uuid DEFAULT auth.uid() NOT NULL,
    company text NOT NULL,
    deal_value numeric,
    current_task_id uuid,
    next_action text,
    inserted_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT deals_company_check CHECK (((length(btrim(company)) >= 1) AND (length(btrim(company)) <= 200))),
    CONSTRAINT deals_pkey PRIMARY KEY (id),
    CONSTRAINT deals_created_by_fkey FOREIGN KEY (created_by) REFERENCES identity.users(id) ON DELETE CASCADE,
    CONSTRAINT deals_current_task_id_fkey FOREIGN KEY (current_task_id) REFERENCES app.tasks(id) ON DELETE SET NULL
);
COMMENT ON TABLE app.deals IS 'A user''s deal with one company (case-insensitive): the latest deal_value given, the current task and the next action.';
ALTER TABLE app.deals ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.deals TO authenticated;
GRANT INSERT(created_by) ON TABLE app.deals TO authenticated;
GRANT INSERT(company) ON TABLE app.deals TO authenticated;
GRANT INSERT(deal_value),UPDATE(deal_value) ON TABLE app.deals TO authenticated;
GRANT INSERT(current_task_id),UPDATE(current_task_id) ON TABLE app.deals TO authenticated;
GRANT INSERT(next_action),UPDATE(next_action) ON TABLE app.deals TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX tasks_company_idx ON app.tasks USING btree (created_by, company_key, inserted_at DESC, id DESC) WHERE (company_key IS NOT NULL);
CREATE INDEX tasks_created_by_idx ON app.tasks USING btree (created_by, inserted_at DESC, id DESC);
CREATE INDEX tasks_created_by_status_idx ON app.tasks USING btree (created_by, ((meta ->> 'status'::text)), inserted_at DESC, id DESC);
CREATE INDEX task_transitions_created_by_idx ON app.task_transitions USING btree (created_by);
CREATE INDEX task_transitions_destination_idx ON app.task_transitions USING btree (destination_id, inserted_at DESC, id DESC);
CREATE INDEX task_transitions_origin_idx ON app.task_transitions USING btree (origin_id, inserted_at DESC, id DESC);
CREATE UNIQUE INDEX deals_company_per_user ON app.deals USING btree (created_by, lower(company));
CREATE INDEX deals_created_by_idx ON app.deals USING btree (created_by, inserted_at DESC, id DESC);
CREATE INDEX deals_current_task_idx ON app.deals USING btree (current_task_id);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.tasks FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _200_guard_status BEFORE UPDATE ON app.tasks FOR EACH ROW WHEN (((old.meta ->> 'status'::text) IS DISTINCT FROM (new.meta ->> 'status'::text))) EXECUTE FUNCTION private.tg_tasks__guard_status();
CREATE TRIGGER _500_sync_deal AFTER INSERT ON app.tasks FOR EACH ROW WHEN ((((new.meta -> 'deal_context'::text) ->> 'company'::text) IS NOT NULL)) EXECUTE FUNCTION private.tg_tasks__sync_deal();
CREATE TRIGGER _500_sync_deal_on_update AFTER UPDATE ON app.tasks FOR EACH ROW WHEN (((((new.meta -> 'deal_context'::text) ->> 'company'::text) IS NOT NULL) AND ((old.meta -> 'deal_context'::text) IS DISTINCT FROM (new.meta -> 'deal_context'::text)))) EXECUTE FUNCTION private.tg_tasks__sync_deal();
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.deals FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Users can change their own tasks" ON app.tasks FOR UPDATE TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid))) WITH CHECK ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can create their own tasks" ON app.tasks FOR INSERT TO authenticated WITH CHECK ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can delete their own tasks" ON app.tasks FOR DELETE TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own tasks" ON app.tasks FOR SELECT TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can link their own tasks" ON app.task_transitions FOR INSERT TO authenticated WITH CHECK (((created_by = ( SELECT auth.uid() AS uid)) AND (EXISTS ( SELECT
   FROM app.tasks o
  WHERE (o.id = task_transitions.origin_id))) AND (EXISTS ( SELECT
   FROM app.tasks d
  WHERE (d.id = task_transitions.destination_id)))));

CREATE POLICY "Users can read their own task links" ON app.task_transitions FOR SELECT TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can change their own deals" ON app.deals FOR UPDATE TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid))) WITH CHECK ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can create their own deals" ON app.deals FOR INSERT TO authenticated WITH CHECK ((created_by = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own deals" ON app.deals FOR SELECT TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.tasks_by_company() RETURNS SETOF api.company_tasks
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION api.tasks_by_company() IS 'GET /api/mobile/tasks/by_company: the caller''s tasks grouped by deal_context.company (case-insensitive), with deal value and the active task.';
GRANT EXECUTE ON FUNCTION api.tasks_by_company() TO authenticated;

CREATE FUNCTION api.tasks_search(company text) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.tasks_search(company text) IS 'GET /api/mobile/tasks/search: the caller''s tasks whose deal_context.company contains the text (case-insensitive), newest first.';
GRANT EXECUTE ON FUNCTION api.tasks_search(company text) TO authenticated;

CREATE FUNCTION api.tasks_list(status text DEFAULT NULL::text, page integer DEFAULT 1, page_size integer DEFAULT 20) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.tasks_list(status text, page integer, page_size integer) IS 'GET /api/mobile/tasks: the caller''s tasks, newest first, optionally of one status; page from 1, page_size 1..100 (PT422 otherwise).';
GRANT EXECUTE ON FUNCTION api.tasks_list(status text, page integer, page_size integer) TO authenticated;

CREATE FUNCTION api.task_create(title text DEFAULT NULL::text, description text DEFAULT NULL::text, status text DEFAULT 'pending'::text, deal_context jsonb DEFAULT NULL::jsonb) RETURNS SETOF api.task
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.task_create(title text, description text, status text, deal_context jsonb) IS 'POST /api/mobile/tasks: creates a task of the caller (status default pending); a deal_context.company creates or updates the deal.';
GRANT EXECUTE ON FUNCTION api.task_create(title text, description text, status text, deal_context jsonb) TO authenticated;

CREATE FUNCTION api.task_get(task_id uuid) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return query
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from app.tasks t where t.id = task_get.task_id;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.task_get(task_id uuid) IS 'GET /api/mobile/tasks/{id}: one of the caller''s tasks; PT404 otherwise.';
GRANT EXECUTE ON FUNCTION api.task_get(task_id uuid) TO authenticated;

CREATE FUNCTION api.task_update(task_id uuid, changes jsonb, if_match text[] DEFAULT NULL::text[]) RETURNS SETOF api.task
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.task_update(task_id uuid, changes jsonb, if_match text[]) IS 'PATCH /api/mobile/tasks/{id}: merges title, description and deal_context into meta (null removes); PT422 for status or other keys; PT404; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';
GRANT EXECUTE ON FUNCTION api.task_update(task_id uuid, changes jsonb, if_match text[]) TO authenticated;

CREATE FUNCTION api.task_delete(task_id uuid, if_match text[] DEFAULT NULL::text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.task_delete(task_id uuid, if_match text[]) IS 'DELETE /api/mobile/tasks/{id}: deletes one of the caller''s tasks and its links; PT403 for another user''s task, PT404 for none; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';
GRANT EXECUTE ON FUNCTION api.task_delete(task_id uuid, if_match text[]) TO authenticated;

CREATE FUNCTION api.task_start(task_id uuid) RETURNS SETOF api.task
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from private.task_start(task_start.task_id) t
  $$;

COMMENT ON FUNCTION api.task_start(task_id uuid) IS 'POST /api/mobile/tasks/{id}/start: pending → in_progress; PT422 "task must be pending to start"; PT404.';
GRANT EXECUTE ON FUNCTION api.task_start(task_id uuid) TO authenticated;

CREATE FUNCTION api.task_complete(task_id uuid) RETURNS SETOF api.task
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select t.id, t.created_by, t.inserted_at, t.updated_at, t.meta from private.task_complete(task_complete.task_id) t
  $$;

COMMENT ON FUNCTION api.task_complete(task_id uuid) IS 'POST /api/mobile/tasks/{id}/complete: pending or in_progress → completed; PT422 "invalid status transition"; PT404.';
GRANT EXECUTE ON FUNCTION api.task_complete(task_id uuid) TO authenticated;

CREATE FUNCTION api.task_complete_and_link(task_id uuid, title text DEFAULT NULL::text, description text DEFAULT NULL::text, status text DEFAULT 'pending'::text) RETURNS SETOF api.task
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  deal_company text := (select nullif(btrim(t.meta -> 'deal_context' ->> 'company'), '')
                          from app.tasks t where t.id = task_complete_and_link.task_id);
  deal app.deals;
  completed app.tasks;
  context jsonb;
  next_task app.tasks;
begin
  if coalesce(task_complete_and_link.status, 'pending') not in ('pending', 'in_progress') then
    raise exception 'next_task.status must be pending or in_progress' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if deal_company is not null then
    select * into deal from app.deals d
     where d.created_by = auth.uid() and lower(d.company) = lower(deal_company)
       for update;
  end if;
  completed := private.task_complete(task_complete_and_link.task_id);
  context := completed.meta -> 'deal_context';
  if nullif(btrim(context ->> 'company'), '') is null then
    context := null;
  elsif deal.id is not null and lower(deal.company) = lower(btrim(context ->> 'company')) and deal.deal_value is not null then
    context := context || jsonb_build_object('deal_value', deal.deal_value);
  end if;
  insert into app.tasks as t (created_by, meta)
    values (completed.created_by, jsonb_strip_nulls(jsonb_build_object(
      'title', task_complete_and_link.title,
      'description', task_complete_and_link.description,
      'status', coalesce(task_complete_and_link.status, 'pending'),
      'deal_context', context)))
    returning * into next_task;
  -- A brand-new task has no outgoing link, so this link cannot close a cycle.
  insert into app.task_transitions (created_by, origin_id, destination_id)
    values (completed.created_by, completed.id, next_task.id);
  return query values
    (completed.id, completed.created_by, completed.inserted_at, completed.updated_at, completed.meta),
    (next_task.id, next_task.created_by, next_task.inserted_at, next_task.updated_at, next_task.meta);
end;
$$;

COMMENT ON FUNCTION api.task_complete_and_link(task_id uuid, title text, description text, status text) IS 'POST /api/mobile/tasks/{id}/complete_and_link: completes the task, creates the next one and links them, in one transaction; the next task carries the completed one''s company (with the deal''s deal_value) and becomes the deal''s current task and next action when the deal has no other open current task (as when the completed task was it). Rows: completed task, next task.';
GRANT EXECUTE ON FUNCTION api.task_complete_and_link(task_id uuid, title text, description text, status text) TO authenticated;

CREATE FUNCTION api.task_link(task_id uuid, destination_task_id uuid, transition_meta jsonb DEFAULT '{}'::jsonb) RETURNS SETOF api.task_transition
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select l.id, l.type, l.origin_id, l.destination_id, l.created_by, l.inserted_at, l.meta
      from private.task_link(task_link.task_id, task_link.destination_task_id, task_link.transition_meta) l
  $$;

COMMENT ON FUNCTION api.task_link(task_id uuid, destination_task_id uuid, transition_meta jsonb) IS 'POST /api/mobile/tasks/{id}/link: a task_transition from the task to the destination; PT404 unknown task, PT422 self-link or cycle.';
GRANT EXECUTE ON FUNCTION api.task_link(task_id uuid, destination_task_id uuid, transition_meta jsonb) TO authenticated;

CREATE FUNCTION api.task_next(task_id uuid) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.task_next(task_id uuid) IS 'GET /api/mobile/tasks/{id}/next: the destination of the most recent link out of the task (no row if none); PT404.';
GRANT EXECUTE ON FUNCTION api.task_next(task_id uuid) TO authenticated;

CREATE FUNCTION api.task_previous(task_id uuid) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.task_previous(task_id uuid) IS 'GET /api/mobile/tasks/{id}/previous: the origin of the most recent link into the task (no row if none); PT404.';
GRANT EXECUTE ON FUNCTION api.task_previous(task_id uuid) TO authenticated;

CREATE FUNCTION api.task_chain(task_id uuid, direction text DEFAULT 'forward'::text, depth integer DEFAULT 50) RETURNS SETOF api.task
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.task_chain(task_id uuid, direction text, depth integer) IS 'GET /api/mobile/tasks/{id}/chain: the task, then the tasks within `depth` (1..1000) links forward or backward, each once, nearest first; each task is visited once. PT404, PT422.';
GRANT EXECUTE ON FUNCTION api.task_chain(task_id uuid, direction text, depth integer) TO authenticated;

CREATE FUNCTION api.deals_list() RETURNS SETOF api.deal
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select d.id, d.created_by, private.deal_json_meta(d) from app.deals d order by d.inserted_at desc, d.id desc
  $$;
COMMENT ON FUNCTION api.deals_list() IS 'GET /api/mobile/deals: the caller''s deals, newest first.';
GRANT EXECUTE ON FUNCTION api.deals_list() TO authenticated;

CREATE FUNCTION api.deal_get(deal_id uuid) RETURNS SETOF api.deal
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return query select d.id, d.created_by, private.deal_json_meta(d) from app.deals d where d.id = deal_get.deal_id;
  if not found then
    raise exception 'deal not found' using errcode = 'PT404', hint = 'deal_not_found';
  end if;
end;
$$;

COMMENT ON FUNCTION api.deal_get(deal_id uuid) IS 'GET /api/mobile/deals/{id}: one of the caller''s deals; PT404 otherwise.';
GRANT EXECUTE ON FUNCTION api.deal_get(deal_id uuid) TO authenticated;

CREATE FUNCTION api.deal_start_task(deal_id uuid) RETURNS SETOF api.deal
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  deal app.deals := private.deal_lock(deal_start_task.deal_id);
begin
  perform private.task_start(deal.current_task_id);
  return query select d.id, d.created_by, private.deal_json_meta(d) from app.deals d where d.id = deal.id;
end;
$$;

COMMENT ON FUNCTION api.deal_start_task(deal_id uuid) IS 'POST /api/mobile/deals/{id}/start_task: starts the deal''s current task; PT404 unknown deal, PT422 when it cannot start.';
GRANT EXECUTE ON FUNCTION api.deal_start_task(deal_id uuid) TO authenticated;

CREATE FUNCTION api.deal_complete_task(deal_id uuid, new_next_action text DEFAULT NULL::text) RETURNS SETOF api.deal
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.deal_complete_task(deal_id uuid, new_next_action text) IS 'POST /api/mobile/deals/{id}/complete_task: completes the current task; with new_next_action creates, links and makes current the next task.';
GRANT EXECUTE ON FUNCTION api.deal_complete_task(deal_id uuid, new_next_action text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.task_exists(task_id uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (select from app.tasks t where t.id = task_exists.task_id)
  $$;

COMMENT ON FUNCTION private.task_exists(task_id uuid) IS 'Whether a task with this id exists, whoever created it (security definer; answers only yes or no).';
GRANT EXECUTE ON FUNCTION private.task_exists(task_id uuid) TO authenticated;

CREATE FUNCTION private.task_json(task app.tasks) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object('id', task.id, 'created_by', task.created_by, 'inserted_at', app.iso(task.inserted_at),
                              'updated_at', app.iso(task.updated_at), 'meta', task.meta)
  $$;

COMMENT ON FUNCTION private.task_json(task app.tasks) IS 'A task as the REST interface answers it (the Task object), for the current object of a PT412.';
GRANT EXECUTE ON FUNCTION private.task_json(task app.tasks) TO authenticated;

CREATE FUNCTION private.task_start(task_id uuid) RETURNS app.tasks
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.task_start(task_id uuid) IS 'Starts a pending task (row locked): PT404 when the caller has no such task, PT422 when it is not pending.';
GRANT EXECUTE ON FUNCTION private.task_start(task_id uuid) TO authenticated;

CREATE FUNCTION private.task_complete(task_id uuid) RETURNS app.tasks
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.task_complete(task_id uuid) IS 'Completes a pending or in-progress task (row locked): PT404 when the caller has no such task, PT422 when already completed.';
GRANT EXECUTE ON FUNCTION private.task_complete(task_id uuid) TO authenticated;

CREATE FUNCTION private.task_link(origin_id uuid, destination_id uuid, transition_meta jsonb DEFAULT '{}'::jsonb) RETURNS app.task_transitions
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.task_link(origin_id uuid, destination_id uuid, transition_meta jsonb) IS 'Links origin → destination (both the caller''s tasks): PT404 for an unknown task, PT422 for a self-link or a cycle. Serialised per user.';
GRANT EXECUTE ON FUNCTION private.task_link(origin_id uuid, destination_id uuid, transition_meta jsonb) TO authenticated;

CREATE FUNCTION private.lock_task_links(user_id uuid) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('app.task_transitions:' || lock_task_links.user_id::text, 0))
  $$;

COMMENT ON FUNCTION private.lock_task_links(user_id uuid) IS 'Takes the transaction-scoped advisory lock that serialises a user''s link creation.';
GRANT EXECUTE ON FUNCTION private.lock_task_links(user_id uuid) TO authenticated;

CREATE FUNCTION private.task_link_would_cycle(origin_id uuid, destination_id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.task_link_would_cycle(origin_id uuid, destination_id uuid) IS 'Whether linking origin → destination would close a cycle (walks forward from destination over the caller''s links).';
GRANT EXECUTE ON FUNCTION private.task_link_would_cycle(origin_id uuid, destination_id uuid) TO authenticated;

CREATE FUNCTION private.task_chain_max_depth() RETURNS integer
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$ select 1000 $$;
COMMENT ON FUNCTION private.task_chain_max_depth() IS 'The largest depth GET /api/mobile/tasks/{id}/chain accepts (a larger one is PT422).';
GRANT EXECUTE ON FUNCTION private.task_chain_max_depth() TO authenticated;

CREATE FUNCTION private.task_chain_walk(start_id uuid, forward boolean, max_steps integer) RETURNS TABLE(id uuid, steps integer, via_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    AS $$
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

COMMENT ON FUNCTION private.task_chain_walk(start_id uuid, forward boolean, max_steps integer) IS 'Breadth-first walk of the caller''s task links from start_id (their own task; else nothing), forward or backward, at most max_steps links: each reached task once with its distance and the earliest link time at that distance.';
GRANT EXECUTE ON FUNCTION private.task_chain_walk(start_id uuid, forward boolean, max_steps integer) TO authenticated;

CREATE FUNCTION private.deal_json_meta(deal app.deals) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
      'company', (deal_json_meta.deal).company,
      'deal_value', to_jsonb((deal_json_meta.deal).deal_value),
      'current_task_id', (deal_json_meta.deal).current_task_id,
      'next_action', (deal_json_meta.deal).next_action)
  $$;

COMMENT ON FUNCTION private.deal_json_meta(deal app.deals) IS 'The meta object of a Deal: company, deal_value, current_task_id, next_action.';
GRANT EXECUTE ON FUNCTION private.deal_json_meta(deal app.deals) TO authenticated;

CREATE FUNCTION private.deal_lock(deal_id uuid) RETURNS app.deals
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.deal_lock(deal_id uuid) IS 'Locks one of the caller''s deals: PT404 when there is none, PT422 when it has no current task.';
GRANT EXECUTE ON FUNCTION private.deal_lock(deal_id uuid) TO authenticated;

CREATE FUNCTION private.tg_tasks__guard_status() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.tg_tasks__guard_status() IS 'Trigger: refuses a status change that the task status table does not allow (PT422).';


CREATE FUNCTION private.tg_tasks__sync_deal() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.tg_tasks__sync_deal() IS 'Trigger: creates or updates the deal of the task''s deal_context.company (latest deal_value, current task when open).';
