-- Made by `npm run db -- areas --diff` from sql/areas/passwords.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.auth_recover(text,text);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- The request does the same work whether or not the account exists: the
  -- lookup and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('recover', auth_recover.email, auth_recover.public_url,
                                     auth_recover.client_ip, auth_recover.max_per_ip, auth_recover.window_seconds);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_set_password(token text, password_hash text)
 RETURNS TABLE(user_id uuid, email text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  link identity.password_tokens := private.password_link(auth_set_password.token, true);
begin
  if not private.password_hash_valid(auth_set_password.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;

  update identity.password_tokens t set used_at = now()
   where t.user_id = link.user_id and t.used_at is null;
  update identity.users u set password_hash = auth_set_password.password_hash
   where u.id = link.user_id;
  -- Whoever held the account before holds nothing of it now.
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  return query select u.id, u.email from identity.users u where u.id = link.user_id;
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
  if email_link_enqueue.kind not in ('recover', 'delete_account') then
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
  else
    raise exception 'unknown link kind %', email_link_send.kind using errcode = '22023';
  end if;
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.auth_recover(text,text,text,integer,integer) to anon, authenticated;

comment on function api.auth_recover(text,text,text,integer,integer) is 'POST /api/auth/recover and /auth/v1/recover: queues the job that e-mails a set-password link when the account exists (at most 5 an hour; private.email_link_send); does and answers the same either way. PT429 rate_limited past max_per_ip requests of the client address in window_seconds (detail: retry_after).';

comment on function private.email_link_enqueue(text,text,text,text,integer,integer) is 'The request half of a door that e-mails a link to whoever has an address (kind recover: POST /api/auth/recover, /auth/v1/recover; delete_account: POST /account/delete): counts the request per client address (PT429 rate_limited past max_per_ip in window_seconds, detail retry_after) and queues the email_link job, the same whether or not an account has the address; the job (private.email_link_send) looks it up.';

comment on function private.email_link_send(text,text,text) is 'The email_link job (gateway/jobs/mail.ts), after the request answered: when an account has the address, queues its e-mail (kind recover: a set-password link, at most 5 an hour; delete_account: a deletion link, private.account_delete_link_queue); nothing otherwise.';
