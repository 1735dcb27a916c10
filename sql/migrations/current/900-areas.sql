-- Made by `npm run db -- areas --diff` from sql/areas: the statements that make the
-- migrated database what the area files state, planned by pg-delta. Each run
-- writes it again: edit the area files, not this one. Data changes go in a
-- file of this folder numbered below 900 (docs/dba.md, "Changing a rule").

set local check_function_bodies = off;

ALTER TABLE "private"."auth_failures" DROP CONSTRAINT "auth_failures_scope_check";

DROP FUNCTION "api"."auth_recovery_verify"(text, text, text);

DROP FUNCTION "api"."auth_refresh_throttled"(text, text, integer, integer, text);

DROP FUNCTION "private"."auth_login_finish"(text, boolean, text, text, text);

CREATE TABLE "identity"."email_codes" ("id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL, "user_id" uuid NOT NULL, "code_hash" bytea NOT NULL, "link_hash" bytea NOT NULL, "created_at" timestamp with time zone NOT NULL DEFAULT now(), "expires_at" timestamp with time zone NOT NULL, "used_at" timestamp with time zone, "failures" integer NOT NULL DEFAULT 0, CONSTRAINT "email_codes_link_hash_key" UNIQUE (link_hash), CONSTRAINT "email_codes_pkey" PRIMARY KEY (id));

ALTER TABLE "identity"."email_codes" ENABLE ROW LEVEL SECURITY;

ALTER TABLE "identity"."users" ADD COLUMN "is_anonymous" boolean NOT NULL DEFAULT false;

ALTER TABLE "identity"."users" ALTER COLUMN "email" DROP NOT NULL;

ALTER TYPE "api"."auth_refresh_result" ADD ATTRIBUTE "claims" jsonb CASCADE;

CREATE OR REPLACE FUNCTION api.api_token_create(name text, permissions text[], expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, community_id uuid DEFAULT NULL::uuid)
 RETURNS SETOF api.api_token_created
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  secret text := private.new_api_token_secret();
  created app.api_tokens;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  perform private.require_full_account();
  if auth.jwt() ->> 'token_id' is not null then
    raise exception 'API tokens are created with an access token, not with another API token'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
  if name is null or length(btrim(name)) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if permissions is null or cardinality(permissions) not between 1 and 50 or array_position(permissions, null) is not null then
    raise exception 'permissions must list 1 to 50 path patterns' using errcode = 'PT422', hint = 'invalid_permissions';
  end if;
  if expires_at is not null and expires_at <= now() then
    raise exception 'expires_at must be in the future' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if community_id is not null and not private.is_community_manager(community_id, caller) then
    raise exception 'only a manager of the community can create a token for it'
      using errcode = 'PT403', hint = 'not_community_manager';
  end if;

  insert into app.api_tokens as t (user_id, community_id, name, permissions, token_hash, expires_at)
    values (caller, api_token_create.community_id, btrim(api_token_create.name), api_token_create.permissions,
            extensions.digest(secret, 'sha256'), api_token_create.expires_at)
    returning t.* into created;
  return query select private.api_token_json(created), secret;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_guest_convert(email text, password_hash text, data jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  normalised text;
begin
  perform from identity.users u where u.id = me and u.is_anonymous for update;
  if not found then
    raise exception 'only a guest account is converted' using errcode = 'PT403', hint = 'forbidden';
  end if;
  if not private.password_hash_valid(auth_guest_convert.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  normalised := private.account_email_check(auth_guest_convert.email);
  begin
    update identity.users u
       set email = normalised, password_hash = auth_guest_convert.password_hash, is_anonymous = false, updated_at = now()
     where u.id = me;
  exception when unique_violation then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end;
  update app.profiles p set name = split_part(normalised, '@', 1) where p.id = me and p.name_source = 'email';
  if auth_guest_convert.data is not null then
    perform private.user_metadata_merge(me, auth_guest_convert.data);
  end if;
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer;
  guest uuid;
  new_node uuid;
  started record;
begin
  if client_ip is not null then
    -- Sign-ins of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:guest:' || client_ip, 0));
    wait := private.auth_throttle_wait('guest', client_ip, max_per_ip, window_seconds);
    if wait > 0 then
      return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid, null::jsonb;
      return;
    end if;
    perform private.auth_throttle_record('guest', client_ip);
  end if;
  insert into identity.users (email, password_hash, is_anonymous) values (null, null, true) returning id into guest;
  insert into app.nodes (kind) values ('user') returning id into new_node;
  -- A derived (private) name until the guest chooses one.
  insert into app.profiles (id, name, name_source, node_id) values (guest, 'guest', 'email', new_node);
  if auth_guest_sign_in.data is not null then
    perform private.user_metadata_merge(guest, auth_guest_sign_in.data);
  end if;
  select * into started from private.start_session(guest, auth_guest_sign_in.user_agent, auth_guest_sign_in.client_ip);
  return query select 'ok'::text, 0, guest, null::text, started.refresh_token, started.session_id, private.session_claims(guest);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_magic_link_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  live identity.email_codes;
  started record;
begin
  select c.* into live from identity.email_codes c
   where c.link_hash = identity.token_hash(auth_magic_link_verify.token) for update;
  if live.id is null or live.used_at is not null or live.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  update identity.email_codes c set used_at = now() where c.id = live.id;
  select * into started from private.start_session(live.user_id, auth_magic_link_verify.user_agent, auth_magic_link_verify.client_ip);
  return query select u.id, u.email, started.refresh_token, started.session_id, private.session_claims(u.id)
                 from identity.users u where u.id = live.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- As a recovery link: the same work whether or not the account exists; the
  -- lookup, the code and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('otp', auth_otp_request.email, auth_otp_request.public_url,
                                     auth_otp_request.client_ip, auth_otp_request.max_per_ip, auth_otp_request.window_seconds);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, user_email text, refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  email_key text := lower(btrim(coalesce(auth_otp_verify.email, '')));
  wait integer;
  live identity.email_codes;
  started record;
begin
  -- Tries for one address take turns, and count with its failed sign-ins (private.sign_in_wait).
  perform pg_advisory_xact_lock(hashtextextended('auth_failures:email:' || email_key, 0));
  wait := private.sign_in_wait(email_key, client_ip, max_failures_per_email_client, max_failures_per_email,
                               max_failures_per_ip, window_seconds);
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;
  select c.* into live
    from identity.email_codes c join identity.users u on u.id = c.user_id
   where u.email = email_key and c.used_at is null and c.expires_at > now()
   order by c.created_at desc limit 1
   for update of c;
  if live.id is null or coalesce(auth_otp_verify.code, '') !~ '^[0-9]{6}$'
     or live.code_hash <> identity.token_hash(live.user_id::text || ':' || auth_otp_verify.code) then
    -- Counted as a failed sign-in, the same whether or not the address has an account or a code.
    perform private.auth_throttle_record('email_client', email_key || ' ' || coalesce(client_ip, 'unknown'));
    perform private.auth_throttle_record('email', email_key);
    if client_ip is not null then
      perform private.auth_throttle_record('ip', client_ip);
    end if;
    if live.id is not null then
      update identity.email_codes c set failures = c.failures + 1,
                                        used_at = case when c.failures + 1 >= 5 then now() end
       where c.id = live.id;
    end if;
    return query select 'invalid'::text, 0, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;
  update identity.email_codes c set used_at = now() where c.id = live.id;
  delete from private.auth_failures f where f.scope = 'email_client' and f.key = email_key || ' ' || coalesce(client_ip, 'unknown');
  select * into started from private.start_session(live.user_id, auth_otp_verify.user_agent, auth_otp_verify.client_ip);
  return query select 'ok'::text, 0, u.id, u.email, started.refresh_token, started.session_id, private.session_claims(u.id)
                 from identity.users u where u.id = live.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_recovery_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  link identity.password_tokens := private.password_link(auth_recovery_verify.token, true);
  started record;
begin
  update identity.password_tokens t set used_at = now() where t.user_id = link.user_id and t.used_at is null;
  -- Whoever held the account before holds nothing of it now (as a set-password link does).
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  select * into started from private.start_session(link.user_id, auth_recovery_verify.user_agent, auth_recovery_verify.client_ip);
  delete from identity.recovery_sessions s where s.user_id = link.user_id;
  insert into identity.recovery_sessions (session_id, user_id, expires_at) values (started.session_id, link.user_id, now() + interval '1 hour');
  return query select u.id, u.email, started.refresh_token, started.session_id, private.session_claims(u.id) from identity.users u where u.id = link.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_refresh(refresh_token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS SETOF api.auth_refresh_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  presented identity.refresh_tokens;
  next_token text := identity.new_token();
begin
  select * into presented
    from identity.refresh_tokens t
    where t.token_hash = identity.token_hash(auth_refresh.refresh_token)
    for update;

  if presented.id is null then
    return query select 'invalid'::text, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;

  if presented.revoked_at is not null then
    if presented.revoked_reason = 'rotated' then
      update identity.refresh_tokens t
        set revoked_at = now(), revoked_reason = 'reused'
        where t.session_id = presented.session_id and t.revoked_at is null;
      return query select 'reused'::text, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    else
      return query select 'revoked'::text, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    end if;
    return;
  end if;

  if presented.expires_at <= now() then
    return query select 'expired'::text, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;

  update identity.refresh_tokens t
    set revoked_at = now(), revoked_reason = 'rotated'
    where t.id = presented.id;
  insert into identity.refresh_tokens (token_hash, user_id, session_id, parent_id, expires_at, user_agent, ip)
    values (identity.token_hash(next_token), presented.user_id, presented.session_id, presented.id,
            now() + interval '30 days', left(auth_refresh.user_agent, 512), left(auth_refresh.client_ip, 100));

  return query
    select 'ok'::text, u.id, u.email, next_token, presented.session_id, private.session_claims(u.id)
      from identity.users u where u.id = presented.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, new_refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer := case when client_ip is null then 0
                       else private.auth_throttle_wait('refresh', client_ip, max_failures_per_ip, window_seconds) end;
  result api.auth_refresh_result;
begin
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;
  select * into strict result from api.auth_refresh(auth_refresh_throttled.refresh_token, auth_refresh_throttled.user_agent, auth_refresh_throttled.client_ip);
  if result.status <> 'ok' and client_ip is not null then
    perform private.auth_throttle_record('refresh', client_ip);
  end if;
  return query select result.status, 0, result.user_id, result.email, result.refresh_token, result.session_id, result.claims;
end;
$function$;

CREATE OR REPLACE FUNCTION api.webhook_create(community_id uuid, url text, events text[], description text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  created app.webhook_endpoints;
begin
  perform private.platform_authorize(webhook_create.community_id);
  perform private.require_full_account();
  perform private.webhook_check(url, events, description);
  if url is null or events is null then
    raise exception 'url and events are required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- At most 20 endpoints a community (serialised per community).
  perform pg_advisory_xact_lock(hashtextextended('app.webhook_endpoints:' || webhook_create.community_id::text, 0));
  if (select count(*) from app.webhook_endpoints e where e.community_id = webhook_create.community_id) >= 20 then
    raise exception 'a community has at most 20 webhook endpoints' using errcode = 'PT422', hint = 'too_many_webhooks';
  end if;
  insert into app.webhook_endpoints (community_id, url, events, description, secret, created_by)
    values (webhook_create.community_id, url,
            array(select distinct t from unnest(events) t order by t),
            nullif(btrim(description), ''), private.webhook_new_secret(), auth.uid())
    returning * into created;
  return private.webhook_endpoint_json(created) || jsonb_build_object('secret', created.secret);
end;
$function$;

CREATE OR REPLACE FUNCTION private.auth_login_finish(attempt text, matched boolean, new_hash text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(status text, user_id uuid, user_email text, refresh_token text, session_id uuid, claims jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  checked record;
begin
  select * into strict checked from private.password_attempt_finish('login', attempt, matched, new_hash);
  if checked.status <> 'ok' then
    -- Not raised: a failure must be counted, so this transaction commits.
    return query select checked.status, null::uuid, null::text, null::text, null::uuid, null::jsonb;
    return;
  end if;
  return query
    select 'ok'::text, u.id, u.email, s.refresh_token, s.session_id, private.session_claims(u.id)
      from identity.users u
     cross join lateral private.start_session(u.id, auth_login_finish.user_agent, auth_login_finish.client_ip) s
     where u.id = checked.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.auth_user_object(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select case when u.is_anonymous then
             -- A guest as Supabase Auth answers one: no address, no identity, no provider.
             jsonb_build_object(
               'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', '', 'phone', '',
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'app_metadata', '{}'::jsonb,
               'user_metadata', u.user_metadata, 'identities', '[]'::jsonb,
               'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', true)
           else
           jsonb_build_object(
             'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', u.email, 'phone', '',
             'email_confirmed_at', app.iso(u.created_at), 'confirmed_at', app.iso(u.created_at),
             'last_sign_in_at', app.iso(s.last_sign_in_at),
             'app_metadata', jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')),
             'user_metadata', u.user_metadata,
             'identities', jsonb_build_array(jsonb_build_object(
               'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', 'email', 'email', u.email,
               'identity_data', jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', true, 'phone_verified', false),
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at))),
             'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', false)
        || coalesce((select jsonb_build_object('new_email', l.new_email, 'email_change_sent_at', app.iso(l.created_at))
                       from identity.account_links l
                      where l.user_id = u.id and l.purpose = 'email_change' and l.used_at is null and l.expires_at > now()
                      order by l.created_at desc limit 1), '{}'::jsonb)
           end
      from identity.users u
      cross join lateral (select max(r.created_at) as last_sign_in_at from identity.refresh_tokens r
                           where r.user_id = u.id and r.parent_id is null) s
     where u.id = auth_user_object.user_id
  $function$;

CREATE OR REPLACE FUNCTION private.email_code_queue(user_id uuid, public_url text)
 RETURNS uuid
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account identity.users;
  code text := lpad(((('x' || encode(extensions.gen_random_bytes(4), 'hex'))::bit(32)::bigint % 1000000))::text, 6, '0');
  token text := identity.new_token();
  link text;
begin
  select * into account from identity.users u where u.id = email_code_queue.user_id;
  if account.id is null or account.email is null then
    raise exception 'user not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  -- Only the newest code (and link) of a user works.
  update identity.email_codes c set used_at = now() where c.user_id = account.id and c.used_at is null;
  insert into identity.email_codes (user_id, code_hash, link_hash, expires_at)
    values (account.id, identity.token_hash(account.id::text || ':' || code), identity.token_hash(token), now() + interval '1 hour');
  link := rtrim(email_code_queue.public_url, '/') || '/auth/v1/verify?type=magiclink&token=' || token;
  return private.email_queue(
    account.id, account.email, 'otp', 'Your sign-in code',
    'Someone asked to sign in to the account of ' || account.email || E'.\n\n'
    || 'Your code: ' || code || E'\n\n'
    || E'Or open this link (it works once, for an hour, as the code does):\n' || link || E'\n\n'
    || E'If it was not you, ignore this e-mail.\n',
    link);
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_enqueue(kind text, email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer;
  address text := lower(btrim(email_link_enqueue.email));
begin
  if email_link_enqueue.kind not in ('recover', 'delete_account', 'otp') then
    raise exception 'unknown link kind %', email_link_enqueue.kind using errcode = '22023';
  end if;
  if email_link_enqueue.client_ip is not null then
    -- Requests of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:email_link:' || email_link_enqueue.client_ip, 0));
    wait := private.auth_throttle_wait('email_link', email_link_enqueue.client_ip, email_link_enqueue.max_per_ip, email_link_enqueue.window_seconds);
    if wait > 0 then
      raise exception 'too many e-mailed links asked for from this address, try again later'
        using errcode = 'PT429', hint = 'rate_limited', detail = jsonb_build_object('retry_after', wait)::text;
    end if;
    perform private.auth_throttle_record('email_link', email_link_enqueue.client_ip);
  end if;
  -- Nothing here reads whether the address has an account. One job per
  -- address and kind waits at a time (a repeat replaces it).
  perform private.enqueue_job('email_link',
    jsonb_build_object('kind', email_link_enqueue.kind, 'email', address, 'public_url', email_link_enqueue.public_url),
    max_attempts => 5, job_key => 'email_link:' || email_link_enqueue.kind || ':' || address);
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_send(kind text, email text, public_url text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(email_link_send.email));
  if account_id is null then
    return;
  end if;
  if email_link_send.kind = 'recover' then
    -- At most 5 links an hour per account, so the address cannot be flooded through this door.
    if (select count(*) from app.email_outbox o
         where o.user_id = account_id and o.purpose = 'recover'
           and o.created_at > now() - interval '1 hour') < 5 then
      perform private.queue_password_email(account_id, 'recover', email_link_send.public_url);
    end if;
  elsif email_link_send.kind = 'delete_account' then
    perform private.account_delete_link_queue(account_id, email_link_send.public_url);
  elsif email_link_send.kind = 'otp' then
    -- At most 5 codes an hour per account, as recovery links.
    if (select count(*) from app.email_outbox o
         where o.user_id = account_id and o.purpose = 'otp'
           and o.created_at > now() - interval '1 hour') < 5 then
      perform private.email_code_queue(account_id, email_link_send.public_url);
    end if;
  else
    raise exception 'unknown link kind %', email_link_send.kind using errcode = '22023';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.guests_prune(older_than interval, batch integer DEFAULT 100)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  guest uuid;
  gone integer := 0;
begin
  for guest in
    select u.id from identity.users u
     where u.is_anonymous and u.created_at < now() - guests_prune.older_than
     order by u.created_at
     limit guests_prune.batch
     for update skip locked
  loop
    begin
      perform private.account_delete(guest);
      gone := gone + 1;
    exception when sqlstate 'PT409' then
      -- The only manager of a community (made one by a manager): kept until it is not.
      null;
    end;
  end loop;
  return gone;
end;
$function$;

CREATE OR REPLACE FUNCTION private.require_full_account()
 RETURNS void
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if exists (select from identity.users u where u.id = auth.uid() and u.is_anonymous) then
    raise exception 'a guest cannot do this: sign up with an e-mail address and a password first'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.session_claims(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('is_anonymous', u.is_anonymous)
      from identity.users u where u.id = session_claims.user_id
  $function$;

ALTER TABLE "identity"."email_codes" ADD CONSTRAINT "email_codes_user_id_fkey" FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE;

ALTER TABLE "identity"."users" ADD CONSTRAINT "users_guest_has_no_email" CHECK ((is_anonymous = (email IS NULL)));

ALTER TABLE "private"."auth_failures" ADD CONSTRAINT "auth_failures_scope_check" CHECK ((scope = ANY (ARRAY['email'::text, 'email_client'::text, 'ip'::text, 'refresh'::text, 'verify'::text, 'password_set'::text, 'email_link'::text, 'guest'::text])));

CREATE INDEX email_codes_user_idx ON identity.email_codes USING btree (user_id);

COMMENT ON COLUMN "identity"."users"."email" IS 'Lower-case e-mail address; unique. Null for a guest (is_anonymous).';

COMMENT ON COLUMN "identity"."users"."is_anonymous" IS 'A guest (POST /auth/v1/signup without e-mail: supabase-js signInAnonymously): no e-mail, no password; private.require_full_account refuses it what only a full account may do; it becomes a full account, same id, when it sets an e-mail and a password (api.auth_guest_convert); unconverted, it is deleted after a while (private.guests_prune).';

COMMENT ON FUNCTION "api"."api_token_create"(text, text[], timestamp with time zone, uuid) IS 'POST /api/docs/tokens: creates a token for the caller (community-scoped with community_id, managers only: PT403) and returns it with its secret, the only time the secret is shown. PT422 for invalid input; PT403 when called with an API token or by a guest (private.require_full_account).';

COMMENT ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) IS 'PUT /auth/v1/user {email, password} of a guest (supabase-js updateUser): the guest becomes a full account with this e-mail and the bcrypt hash the gateway made of the password, keeping its id and everything it made (its derived name follows the address; data merged into user_metadata); answers the User object. PT403 forbidden for a caller that is not a guest (or an API token); PT400 invalid_email, invalid_password_hash; PT409 email_taken.';

COMMENT ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) IS 'POST /auth/v1/signup without e-mail (supabase-js signInAnonymously): a new guest (identity.users.is_anonymous: no e-mail, no password; a profile with a private derived name; data merged into user_metadata) and its session. Counted per client address: status throttled (retry_after seconds) past max_per_ip sign-ins in window_seconds, else ok.';

COMMENT ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) IS 'GET and POST /auth/v1/verify type magiclink (or email) with the token of the link signInWithOtp e-mailed: signs its account in, once, within the hour (the code of the same message is used up with it). PT400 invalid_link for a used, replaced, voided or expired link.';

COMMENT ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) IS 'POST /auth/v1/otp (supabase-js signInWithOtp): queues the job that e-mails the account with this address a 6-digit code and a magic link (private.email_code_queue; at most 5 an hour per account); does and answers the same whether or not the account exists. PT429 rate_limited past max_per_ip requests of the client address in window_seconds, counted with the other e-mailed links.';

COMMENT ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) IS 'POST /auth/v1/verify {type: email, email, token} (supabase-js verifyOtp): the newest live code e-mailed to the address signs its account in, once (status ok: a session). A wrong code, an unknown address or no live code is status invalid, counted as a failed sign-in (per address and client, per address, per client address; the same limits as passwords), and the fifth wrong code voids the code; past the limits status throttled (retry_after seconds).';

COMMENT ON FUNCTION "api"."auth_recovery_verify"(text, text, text) IS 'POST /auth/v1/verify type=recovery: the token of a set-password link (POST /api/auth/recover, /auth/v1/recover) signs its account in: the link is used up, every credential of the account ends (as a set-password link does), and a new session may set the password without the current one within the hour (api.auth_recovery_password_set). PT400 invalid_link.';

COMMENT ON FUNCTION "api"."auth_refresh_throttled"(text, text, integer, integer, text) IS 'POST /api/auth/refresh with throttling: api.auth_refresh, but a client IP with too many failed refreshes gets status throttled (retry_after seconds).';

COMMENT ON FUNCTION "api"."webhook_create"(uuid, text, text[], text) IS 'POST /api/v1/platform/webhooks: registers an endpoint of the community (at most 20) and returns it with its secret (shown only here and on rotation). PT403 as the platform endpoints, and for a guest (private.require_full_account); PT422 invalid_url, unknown_event_type, too_many_webhooks.';

COMMENT ON FUNCTION "private"."auth_login_finish"(text, boolean, text, text, text) IS 'POST /api/auth/login, after the gateway compared the password with the hash of private.password_attempt_start: status ok (a session: refresh_token, session_id; user_agent and client_ip are recorded with it), invalid (counted) or expired.';

COMMENT ON FUNCTION "private"."auth_user_object"(uuid) IS 'A user as Supabase Auth''s User object: id, aud, role, email, email_confirmed_at (the account''s creation: sign-up needs no confirmation here), last_sign_in_at (its latest sign-in), app_metadata.provider email, user_metadata, one email identity, created_at, updated_at; new_email and email_change_sent_at while an e-mail change waits for its link. A guest (is_anonymous) as Supabase Auth answers one: email empty, no confirmation times, app_metadata and identities empty, is_anonymous true.';

COMMENT ON FUNCTION "private"."email_code_queue"(uuid, text) IS 'Queues the e-mail of a sign-in code (6 random digits) and its magic link (GET /auth/v1/verify?type=magiclink) for the account, both valid once for an hour; older codes of the account stop working. Only hashes are stored (the code with the user id).';

COMMENT ON FUNCTION "private"."email_link_send"(text, text, text) IS 'The email_link job (gateway/jobs/mail.ts), after the request answered: when an account has the address, queues its e-mail (kind recover: a set-password link, at most 5 an hour; delete_account: a deletion link, private.account_delete_link_queue; otp: a sign-in code and link, private.email_code_queue, at most 5 an hour); nothing otherwise.';

COMMENT ON FUNCTION "private"."guests_prune"(interval, integer) IS 'Deletes guests (identity.users.is_anonymous) made more than older_than ago and never converted, as an account deletion does (private.account_delete: memberships, check-ins, sessions, everything of theirs), at most `batch` a call; returns how many. A guest that is the only manager of a community stays. The worker runs it hourly (GUEST_RETENTION_DAYS).';

COMMENT ON FUNCTION "private"."require_full_account"() IS 'The one check of what a guest (identity.users.is_anonymous) may not do: PT403 forbidden when the caller is a guest; nothing otherwise (anon callers are refused by the rules themselves). Called by api.api_token_create and api.webhook_create (the OAuth consent form needs a password, which a guest has not). Read from the table, so a guest converted a moment ago is a full account at once, whatever its access token says.';

COMMENT ON FUNCTION "private"."session_claims"(uuid) IS 'The claims a session''s access tokens carry besides who and which session (the gateway signs them as given): is_anonymous, true for a guest. Every function that starts or refreshes a session answers them.';

COMMENT ON TABLE "identity"."email_codes" IS 'E-mailed sign-in codes and their magic links (supabase-js signInWithOtp), hashed: one message carries a 6-digit code and a link, either signs in once, within the hour; a newer one voids older ones, and 5 wrong codes void it.';

COMMENT ON TABLE "private"."auth_failures" IS 'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP), requests at the doors that set a password (password_set, per client IP) at the doors that e-mail a link (email_link, per client IP) and guest sign-ins (guest, per client IP), for throttling.';

REVOKE ALL ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_recovery_verify"(text, text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_recovery_verify"(text, text, text) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_refresh_throttled"(text, text, integer, integer, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_refresh_throttled"(text, text, integer, integer, text) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "private"."auth_login_finish"(text, boolean, text, text, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."email_code_queue"(uuid, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."guests_prune"(interval, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."require_full_account"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."require_full_account"() TO "authenticated";

REVOKE ALL ON FUNCTION "private"."session_claims"(uuid) FROM PUBLIC;
