--! Previous: sha1:f0b1b4e9be518c984c3524c5282aaa37571380ce
--! Hash: sha1:cf4a9a37aa372a1583bf0d2e7984a6f1e6233b8f
--! Message: deal-continuation

--! split: 400-deal-continuation.sql
--------------------------------------------------------------------------------
-- A task that continues a deal's task continues the deal.
--
-- complete_and_link made the next task without the completed task's
-- deal_context: the deal kept pointing at the completed task with its stale
-- next_action, and the deal's start_task / complete_task then answered 422.
-- Now the next task carries the company (and the deal's present deal_value,
-- so that continuing an older task never brings back an older value), and the
-- deal trigger (private.tg_tasks__sync_deal) does the rest by its usual rule:
-- when the deal has no open current task (the completed one was it), the next
-- task becomes current and its title the next_action, as complete_task with
-- new_next_action does. A task of the company that was not the deal's current
-- task leaves an open current task where it is.
--
-- The deal is locked before the task, in the order the deal functions use
-- (private.deal_lock, then the task), so that complete_and_link and the deal's
-- complete_task on the same deal wait for each other instead of deadlocking.
--------------------------------------------------------------------------------

create or replace function api.task_complete_and_link(task_id uuid, title text default null, description text default null,
                                                      status text default 'pending')
  returns setof api.task
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
comment on function api.task_complete_and_link(uuid, text, text, text) is
  'POST /api/mobile/tasks/{id}/complete_and_link: completes the task, creates the next one and links them, in one transaction; the next task carries the completed one''s company (with the deal''s deal_value) and becomes the deal''s current task and next action when the deal has no other open current task (as when the completed task was it). Rows: completed task, next task.';
