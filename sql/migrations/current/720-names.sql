--------------------------------------------------------------------------------
-- Privacy of names (issue 14)
--
-- A profile's name is either chosen by the user ('chosen': given at register
-- or signup, set with PATCH /api/mobile/profile, or given by an operator) or
-- derived from the e-mail address ('email': the part before the @, the
-- default when no name is given). private.create_account is the one place a
-- name is derived. A derived name is shown only to the user and to managers
-- of a community the user belongs to; everyone else gets null from
-- app.node_display_name, the one function through which member lists,
-- community managers and every other listing read another user's name.
--------------------------------------------------------------------------------

alter table app.profiles add column if not exists name_source text;
-- Existing rows: a name equal to the e-mail's local part was derived.
update app.profiles p
   set name_source = case when p.name = split_part(u.email, '@', 1) then 'email' else 'chosen' end
  from identity.users u
 where u.id = p.id and p.name_source is null;
alter table app.profiles alter column name_source set default 'chosen';
-- Safe: every row was given a value by the update just above, in the same transaction.
-- squawk-ignore adding-not-nullable-field
alter table app.profiles alter column name_source set not null;
alter table app.profiles drop constraint if exists profiles_name_source_valid;
-- Safe: the columns it checks are new in this migration (all null), so the validating scan finds nothing to refuse; graphile-migrate runs a migration in one transaction, where NOT VALID + VALIDATE would hold the same lock.
-- squawk-ignore constraint-missing-not-valid
alter table app.profiles add constraint profiles_name_source_valid check (name_source in ('chosen', 'email'));
comment on column app.profiles.name_source is
  'Where name came from: chosen (by the user or an operator) or email (derived from the e-mail address; shown only to the user and to managers of their communities).';

-- A password-less account (password null) can be created by the platform
-- flows (invitations, attendees); nobody can log in to it until a password is
-- set. api.auth_register always passes a password.
create or replace function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account.email));
  chosen_name text := nullif(btrim(create_account.name), '');
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account.password is not null and length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  if chosen_name is not null and length(chosen_name) > 200 then
    raise exception 'name must be at most 200 characters' using errcode = 'PT400', hint = 'invalid_name';
  end if;

  insert into identity.users (email, password_hash)
    values (normalised_email,
            case when create_account.password is not null then identity.hash_password(create_account.password) end)
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;

  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, name_source, node_id)
    values (new_user_id,
            coalesce(chosen_name, split_part(normalised_email, '@', 1)),
            case when chosen_name is null then 'email' else 'chosen' end,
            new_node_id);
  return new_user_id;
end;
$$;
comment on function private.create_account(text, text, text) is
  'Creates a user (hashed password, or none when password is null), their node and profile. Without a name the name is derived from the e-mail (name_source email, private). PT409 when the e-mail is taken.';

drop function if exists api.auth_register(text, text);
create or replace function api.auth_register(email text, password text, name text default null)
  returns setof api.auth_user
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  new_user uuid;
begin
  if auth_register.password is null then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  new_user := private.create_account(auth_register.email, auth_register.password, auth_register.name);
  return query select u.id, u.email from identity.users u where u.id = new_user;
end;
$$;
comment on function api.auth_register(text, text, text) is
  'POST /api/auth/register and /signup: creates user, profile and node (name optional; without one it is derived and private). PT409 (hint email_taken) for a duplicate e-mail.';
grant execute on function api.auth_register(text, text, text) to anon, authenticated;

-- Other users' profiles stay private (RLS: own row only); listings show a
-- user's name through this one function: a chosen name to every signed-in
-- user, a derived one only to the user and to managers of a community the
-- user belongs to (null to everyone else).
create or replace function app.node_display_name(node_id uuid) returns text
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select p.name
      from app.profiles p
     where p.node_id = node_display_name.node_id
       and (p.name_source = 'chosen'
            or p.id = auth.uid()
            or exists (
              select
                from app.community_members theirs
                join app.community_members mine on mine.community_id = theirs.community_id
                join app.profiles me on me.node_id = mine.member_node_id
               where theirs.member_node_id = node_display_name.node_id
                 and mine.role = 'manager'
                 and me.id = auth.uid()))
  $$;
comment on function app.node_display_name(uuid) is
  'The display name of a user node (profile name), and nothing else: null when the name was derived from the e-mail, unless the caller is that user or manages one of their communities.';

create or replace function api.profile_update(name text)
  returns setof api.user_profile
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  new_name text := btrim(profile_update.name);
begin
  if new_name is null or length(new_name) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update app.profiles p
     set name = new_name, name_source = 'chosen'
   where p.id = auth.uid();
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = auth.uid();
end;
$$;
comment on function api.profile_update(text) is
  'PATCH /api/mobile/profile: sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';
grant execute on function api.profile_update(text) to authenticated;
