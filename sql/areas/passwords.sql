-- =============================================================================
-- Set-password links and the e-mail outbox
-- =============================================================================
-- Set-password links and the e-mail outbox that carries them. Accounts made
-- without a password (platform attendees, members an agent creates) and users
-- who forgot theirs (api.auth_recover, which does and answers the same for any
-- address: the lookup and the e-mail are the email_link job's) get a link to
-- the gateway's set-password page. Its token is random,
-- single-use, expiring and stored only as its SHA-256; at most 5 links an hour
-- per account. Setting the password (api.auth_set_password, with a hash made by
-- the process) ends every other credential of the account.
--
-- A message waits in app.email_outbox; private.email_queue adds its send_email
-- job in the same transaction, and the worker sends it over SMTP_URL
-- (private.email_outbox_begin / _sent / _failed). Without SMTP an operator reads
-- the outbox, links included, with admin.outbox().
--
-- Code: gateway/auth/api/recover.ts, gateway/auth/email-links.ts,
--   gateway/jobs/mail.ts
-- pgTAP: supabase/tests/passwords.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE identity.password_tokens (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    token_hash bytea NOT NULL,
    user_id uuid NOT NULL,
    purpose text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    CONSTRAINT password_tokens_purpose_check CHECK ((purpose = ANY (ARRAY['invite'::text, 'recover'::text]))),
    CONSTRAINT password_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT password_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT password_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.password_tokens IS 'Set-password links (hashed). A link is usable once, before expires_at; a newer link for the user voids older ones.';
ALTER TABLE identity.password_tokens ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.email_codes (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    user_id uuid NOT NULL,
    code_hash bytea NOT NULL,
    link_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    failures integer DEFAULT 0 NOT NULL,
    CONSTRAINT email_codes_pkey PRIMARY KEY (id),
    CONSTRAINT email_codes_link_hash_key UNIQUE (link_hash),
    CONSTRAINT email_codes_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.email_codes IS 'E-mailed sign-in codes and their magic links (supabase-js signInWithOtp), hashed: one message carries a 6-digit code and a link, either signs in once, within the hour; a newer one voids older ones, and 5 wrong codes void it.';
ALTER TABLE identity.email_codes ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.email_outbox (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid,
    to_email text NOT NULL,
    purpose text NOT NULL,
    subject text NOT NULL,
    body_text text NOT NULL,
    link text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    send_after timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    CONSTRAINT email_outbox_pkey PRIMARY KEY (id),
    CONSTRAINT email_outbox_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.email_outbox IS 'E-mails waiting to be sent (sent_at null) and sent. Read by operators with admin.outbox().';
ALTER TABLE app.email_outbox ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX email_codes_user_idx ON identity.email_codes USING btree (user_id);
CREATE INDEX password_tokens_user_idx ON identity.password_tokens USING btree (user_id);
CREATE INDEX email_outbox_unsent_idx ON app.email_outbox USING btree (send_after) WHERE (sent_at IS NULL);
CREATE INDEX email_outbox_user_idx ON app.email_outbox USING btree (user_id, created_at);

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- The request does the same work whether or not the account exists: the
  -- lookup and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('recover', auth_recover.email, auth_recover.public_url,
                                     auth_recover.client_ip, auth_recover.max_per_ip, auth_recover.window_seconds);
end;
$$;

COMMENT ON FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) IS 'POST /api/auth/recover and /auth/v1/recover: queues the job that e-mails a set-password link when the account exists (at most 5 an hour; private.email_link_send); does and answers the same either way. PT429 rate_limited past max_per_ip requests of the client address in window_seconds (detail: retry_after).';
GRANT EXECUTE ON FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO authenticated;

CREATE FUNCTION api.auth_set_password(token text, password_hash text) RETURNS TABLE(user_id uuid, email text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.auth_set_password(token text, password_hash text) IS 'Sets the password (a bcrypt hash the gateway made) of a set-password link''s account, uses the link up, ends every credential of the account (sessions, API tokens, OAuth grants, MCP sessions) and ends an agent''s ownership of it. PT400 invalid_link / invalid_password_hash.';
GRANT EXECUTE ON FUNCTION api.auth_set_password(token text, password_hash text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_set_password(token text, password_hash text) TO authenticated;

CREATE FUNCTION api.auth_password_link_valid(token text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (
      select 1 from identity.password_tokens t
       where t.token_hash = identity.token_hash(auth_password_link_valid.token)
         and t.used_at is null and t.expires_at > now())
  $$;

COMMENT ON FUNCTION api.auth_password_link_valid(token text) IS 'GET /auth/set-password: whether a set-password link can still be used (the page says so before the user types).';
GRANT EXECUTE ON FUNCTION api.auth_password_link_valid(token text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_password_link_valid(token text) TO authenticated;

CREATE FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- As a recovery link: the same work whether or not the account exists; the
  -- lookup, the code and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('otp', auth_otp_request.email, auth_otp_request.public_url,
                                     auth_otp_request.client_ip, auth_otp_request.max_per_ip, auth_otp_request.window_seconds);
end;
$$;

COMMENT ON FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) IS 'POST /auth/v1/otp (supabase-js signInWithOtp): queues the job that e-mails the account with this address a 6-digit code and a magic link (private.email_code_queue; at most 5 an hour per account); does and answers the same whether or not the account exists. PT429 rate_limited past max_per_ip requests of the client address in window_seconds, counted with the other e-mailed links.';
GRANT EXECUTE ON FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO authenticated;

CREATE FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) RETURNS TABLE(status text, retry_after integer, user_id uuid, user_email text, refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
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
    return query select 'invalid'::text, 0, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  update identity.email_codes c set used_at = now() where c.id = live.id;
  delete from private.auth_failures f where f.scope = 'email_client' and f.key = email_key || ' ' || coalesce(client_ip, 'unknown');
  select * into started from private.start_session(live.user_id, auth_otp_verify.user_agent, auth_otp_verify.client_ip);
  return query select 'ok'::text, 0, u.id, u.email, started.refresh_token, started.session_id
                 from identity.users u where u.id = live.user_id;
end;
$$;

COMMENT ON FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) IS 'POST /auth/v1/verify {type: email, email, token} (supabase-js verifyOtp): the newest live code e-mailed to the address signs its account in, once (status ok: a session). A wrong code, an unknown address or no live code is status invalid, counted as a failed sign-in (per address and client, per address, per client address; the same limits as passwords), and the fifth wrong code voids the code; past the limits status throttled (retry_after seconds).';
GRANT EXECUTE ON FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) TO authenticated;

CREATE FUNCTION api.auth_magic_link_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text) RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
  return query select u.id, u.email, started.refresh_token, started.session_id
                 from identity.users u where u.id = live.user_id;
end;
$$;

COMMENT ON FUNCTION api.auth_magic_link_verify(token text, user_agent text, client_ip text) IS 'GET and POST /auth/v1/verify type magiclink (or email) with the token of the link signInWithOtp e-mailed: signs its account in, once, within the hour (the code of the same message is used up with it). PT400 invalid_link for a used, replaced, voided or expired link.';
GRANT EXECUTE ON FUNCTION api.auth_magic_link_verify(token text, user_agent text, client_ip text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_magic_link_verify(token text, user_agent text, client_ip text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.email_link_send(kind text, email text, public_url text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.email_link_send(kind text, email text, public_url text) IS 'The email_link job (gateway/jobs/mail.ts), after the request answered: when an account has the address, queues its e-mail (kind recover: a set-password link, at most 5 an hour; delete_account: a deletion link, private.account_delete_link_queue; otp: a sign-in code and link, private.email_code_queue, at most 5 an hour); nothing otherwise.';


CREATE FUNCTION private.queue_password_email(user_id uuid, purpose text, public_url text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  account identity.users;
  token text := identity.new_token();
  link text;
  lifetime interval;
begin
  select * into account from identity.users u where u.id = queue_password_email.user_id;
  if account.id is null then
    raise exception 'user not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  lifetime := case queue_password_email.purpose
    when 'invite' then interval '7 days'
    when 'recover' then interval '1 hour'
  end;
  if lifetime is null then
    raise exception 'unknown e-mail purpose %', queue_password_email.purpose using errcode = '22023';
  end if;

  -- Only the newest link of a user works.
  update identity.password_tokens t set used_at = now()
   where t.user_id = account.id and t.used_at is null;
  insert into identity.password_tokens (token_hash, user_id, purpose, expires_at)
    values (identity.token_hash(token), account.id, queue_password_email.purpose, now() + lifetime);

  link := rtrim(queue_password_email.public_url, '/') || '/auth/set-password?token=' || token;
  return private.email_queue(
    account.id, account.email, queue_password_email.purpose,
    case queue_password_email.purpose
      when 'invite' then 'Set your password'
      else 'Reset your password'
    end,
    case queue_password_email.purpose
      when 'invite' then
        'An account was created for ' || account.email || E'.\n\n'
        || E'Choose your password here (the link works once, for 7 days):\n' || link || E'\n\n'
        || E'Then sign in with the app.\n'
      else
        'Someone asked to reset the password of ' || account.email || E'.\n\n'
        || E'Choose a new password here (the link works once, for 1 hour):\n' || link || E'\n\n'
        || E'If it was not you, ignore this message; your password stays as it is.\n'
    end,
    link);
end;
$$;

COMMENT ON FUNCTION private.queue_password_email(user_id uuid, purpose text, public_url text) IS 'Makes a single-use set-password link (purpose invite: 7 days, recover: 1 hour), voids older links of the user, and queues the e-mail. Returns the outbox id.';


CREATE FUNCTION private.email_queue(user_id uuid, to_email text, purpose text, subject text, body_text text, link text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  message_id uuid;
begin
  insert into app.email_outbox (user_id, to_email, purpose, subject, body_text, link)
    values (email_queue.user_id, email_queue.to_email, email_queue.purpose, email_queue.subject, email_queue.body_text,
            email_queue.link)
    returning id into message_id;
  perform private.enqueue_job('send_email', jsonb_build_object('id', message_id),
                              max_attempts => 10, job_key => 'email:' || message_id::text);
  return message_id;
end;
$$;

COMMENT ON FUNCTION private.email_queue(user_id uuid, to_email text, purpose text, subject text, body_text text, link text) IS 'Puts an e-mail in the outbox and adds its send_email job (sent over SMTP_URL by a worker; without SMTP it waits, readable with admin.outbox()). Returns the outbox id.';


CREATE FUNCTION private.email_link_enqueue(kind text, email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.email_link_enqueue(kind text, email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) IS 'The request half of a door that e-mails a link to whoever has an address (kind recover: POST /api/auth/recover, /auth/v1/recover; delete_account: POST /account/delete): counts the request per client address (PT429 rate_limited past max_per_ip in window_seconds, detail retry_after) and queues the email_link job, the same whether or not an account has the address; the job (private.email_link_send) looks it up.';


CREATE FUNCTION private.email_outbox_begin(id uuid) RETURNS TABLE(id uuid, to_email text, subject text, body_text text)
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    update app.email_outbox o set attempts = o.attempts + 1
     where o.id = email_outbox_begin.id and o.sent_at is null
    returning o.id, o.to_email, o.subject, o.body_text
  $$;

COMMENT ON FUNCTION private.email_outbox_begin(id uuid) IS 'The send_email task: the message to send and one more attempt counted; nothing when it was sent already.';


CREATE FUNCTION private.email_outbox_failed(id uuid, error text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    update app.email_outbox o set last_error = left(email_outbox_failed.error, 1000)
     where o.id = email_outbox_failed.id
  $$;

COMMENT ON FUNCTION private.email_outbox_failed(id uuid, error text) IS 'Records why a send failed (the send_email job is then retried by the worker, with back-off, 10 attempts in all).';


CREATE FUNCTION private.email_outbox_sent(id uuid) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    update app.email_outbox o
       set sent_at = now(), last_error = null, link = null,
           body_text = case when o.link is null then o.body_text else replace(o.body_text, o.link, '[link sent]') end
     where o.id = email_outbox_sent.id
  $$;

COMMENT ON FUNCTION private.email_outbox_sent(id uuid) IS 'Marks a message sent and removes its link from the stored copy.';


CREATE FUNCTION private.email_code_queue(user_id uuid, public_url text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.email_code_queue(user_id uuid, public_url text) IS 'Queues the e-mail of a sign-in code (6 random digits) and its magic link (GET /auth/v1/verify?type=magiclink) for the account, both valid once for an hour; older codes of the account stop working. Only hashes are stored (the code with the user id).';
