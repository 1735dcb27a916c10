--------------------------------------------------------------------------------
-- STUB (helper 10, MCP branch) — DELETE THIS FILE AT MERGE.
--
-- The integrator's current/050-mail.sql provides the real versions of both
-- functions below (contract section 2). They exist here only so that the MCP
-- branch can create password-less members and call the e-mail queue before
-- that work is merged.
--------------------------------------------------------------------------------

-- Contract: private.create_account(email, null, name) makes a user, profile
-- and node with no password.
create or replace function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account.email));
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account.password is not null and length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  insert into identity.users (email, password_hash)
    values (normalised_email, case when create_account.password is null then null
                                   else identity.hash_password(create_account.password) end)
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;
  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, node_id)
    values (new_user_id, coalesce(nullif(btrim(create_account.name), ''), split_part(normalised_email, '@', 1)), new_node_id);
  return new_user_id;
end;
$$;

-- Contract: queues the set-password e-mail; returns the message id.
create or replace function private.queue_password_email(user_id uuid, purpose text, public_url text)
  returns uuid
  language sql volatile
  set search_path = pg_catalog
  as $$
    select gen_random_uuid()
  $$;
