--! Previous: sha1:4657c63f3203769e92fcf131e5031fc9e6811fc1
--! Hash: sha1:04e3081d49265a3777d02c0e179098f2cc0e35fc
--! Message: admin

--------------------------------------------------------------------------------
-- Operator surface
--
-- What the interface has no endpoint for. Called with psql by a database
-- owner, or through `npm run admin -- <command>`. Never granted to request
-- roles. Failures raise with SQLSTATE P0002 (no_data_found) for unknown
-- things and PT4xx for bad input, with a message an operator can act on.
--------------------------------------------------------------------------------

-- Internal lookup shared by the functions below.
create function private.user_node_by_email(email text) returns uuid
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  found_user uuid;
  found_node uuid;
begin
  select u.id, p.node_id into found_user, found_node
    from identity.users u
    left join app.profiles p on p.id = u.id
    where u.email = lower(btrim(user_node_by_email.email));
  if found_user is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  if found_node is null then
    raise exception 'user % has no node', email using errcode = 'PT400', hint = 'user_has_no_node';
  end if;
  return found_node;
end;
$$;

create function admin.create_user(email text, password text, name text default null) returns uuid
  language sql volatile
  set search_path = pg_catalog
  as $$
    select private.create_account(email, password, name)
  $$;
comment on function admin.create_user(text, text, text) is
  'Creates a user with profile and node, exactly as POST /api/auth/register does. Returns the user id.';

create function admin.create_community(
  name text,
  description text default null,
  tags text[] default '{}',
  manager_email text default null
) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  manager_node uuid;
  new_node uuid;
  new_community uuid;
begin
  if manager_email is not null then
    manager_node := private.user_node_by_email(manager_email);
  end if;
  insert into app.nodes (kind) values ('community') returning id into new_node;
  insert into app.communities (node_id, name, description, tags)
    values (new_node, btrim(name), description, coalesce(tags, '{}'))
    returning id into new_community;
  if manager_node is not null then
    insert into app.community_members (community_id, member_node_id, role)
      values (new_community, manager_node, 'manager');
  end if;
  return new_community;
end;
$$;
comment on function admin.create_community(text, text, text[], text) is
  'Creates a community (and its node); the user with manager_email, if given, becomes its manager. Returns the community id.';

create function admin.add_manager(community_id uuid, email text) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  member_node uuid := private.user_node_by_email(email);
begin
  if not exists (select from app.communities c where c.id = add_manager.community_id) then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  insert into app.community_members as m (community_id, member_node_id, role)
    values (add_manager.community_id, member_node, 'manager')
    on conflict on constraint community_members_pkey do update set role = 'manager';
end;
$$;
comment on function admin.add_manager(uuid, text) is
  'Makes the user a manager of the community, joining them first if they are not a member.';

create function admin.set_subscription(email text, subscription_type text) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  target uuid;
begin
  if not exists (select from app.subscription_plans s where s.id = set_subscription.subscription_type) then
    raise exception 'unknown subscription type % (known: %)', subscription_type,
      (select string_agg(s.id, ', ' order by s.id) from app.subscription_plans s)
      using errcode = 'PT400';
  end if;
  update app.profiles p set subscription_type = set_subscription.subscription_type
    from identity.users u
    where u.id = p.id and u.email = lower(btrim(set_subscription.email))
    returning p.id into target;
  if target is null then
    raise exception 'no user profile with email %', email using errcode = 'P0002';
  end if;
end;
$$;
comment on function admin.set_subscription(text, text) is
  'Sets a user''s subscription type (basic or premium), which sets their max_hats.';

create function admin.set_community_flags(community_id uuid, is_sandbox boolean, is_draft boolean) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  update app.communities c
    set is_sandbox = coalesce(set_community_flags.is_sandbox, c.is_sandbox),
        is_draft = coalesce(set_community_flags.is_draft, c.is_draft)
    where c.id = set_community_flags.community_id;
  if not found then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
end;
$$;
comment on function admin.set_community_flags(uuid, boolean, boolean) is
  'Sets the sandbox and draft flags of a community (null leaves a flag as it is).';

create function admin.create_venue(
  name text,
  address text default null,
  latitude double precision default null,
  longitude double precision default null
) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  new_node uuid;
begin
  insert into app.nodes (kind) values ('venue') returning id into new_node;
  insert into app.venues (node_id, name, address, latitude, longitude)
    values (new_node, btrim(name), address, latitude, longitude);
  return new_node;
end;
$$;
comment on function admin.create_venue(text, text, double precision, double precision) is
  'Creates a venue. Returns its node id (the id venue paths take).';

create function admin.create_event(
  community_id uuid,
  title text,
  starts_at timestamptz,
  ends_at timestamptz default null,
  venue_node_id uuid default null,
  description text default null
) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  new_node uuid;
  new_event uuid;
begin
  if not exists (select from app.communities c where c.id = create_event.community_id) then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  if venue_node_id is not null
     and not exists (select from app.venues v where v.node_id = create_event.venue_node_id) then
    raise exception 'no venue with node id %', venue_node_id using errcode = 'P0002';
  end if;
  if ends_at is not null and ends_at < starts_at then
    raise exception 'ends_at (%) is before starts_at (%)', ends_at, starts_at using errcode = 'PT400';
  end if;
  insert into app.nodes (kind) values ('event') returning id into new_node;
  insert into app.events (node_id, community_id, title, description, starts_at, ends_at, venue_node_id, location)
    values (new_node, create_event.community_id, btrim(title), description, starts_at, ends_at, venue_node_id,
            (select v.name from app.venues v where v.node_id = create_event.venue_node_id))
    returning id into new_event;
  return new_event;
end;
$$;
comment on function admin.create_event(uuid, text, timestamptz, timestamptz, uuid, text) is
  'Creates an event of a community (and its node), optionally at a venue. Returns the event id.';
