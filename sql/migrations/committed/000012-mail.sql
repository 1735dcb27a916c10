--! Previous: sha1:47df0dca9220abbbaef74fcd8a93008956eebe25
--! Hash: sha1:3ac6d9d6ffc6a23b96ed2bcc9a7499e73100e298
--! Message: mail

--! split: 050-mail.sql
--------------------------------------------------------------------------------
-- Password e-mails: set-password links and the outbox that carries them
--
-- Accounts made without a password (platform attendees, members an agent
-- creates) and users who forgot theirs get a link to the gateway's
-- set-password page. The link's token is random, single-use, expiring and
-- stored only as its SHA-256. Messages wait in app.email_outbox; a worker in
-- each gateway sends them over SMTP when SMTP_URL is set (several workers
-- share the queue with `for update skip locked`); without SMTP an operator
-- reads them, links included, with admin.outbox().
--------------------------------------------------------------------------------

create table identity.password_tokens (
  id         bigint generated always as identity primary key,
  token_hash bytea not null unique,
  user_id    uuid not null references identity.users (id) on delete cascade,
  purpose    text not null check (purpose in ('invite', 'recover')),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at    timestamptz
);
comment on table identity.password_tokens is
  'Set-password links (hashed). A link is usable once, before expires_at; a newer link for the user voids older ones.';
create index password_tokens_user_idx on identity.password_tokens (user_id);
alter table identity.password_tokens enable row level security;

create table app.email_outbox (
  id         uuid primary key default gen_random_uuid(),
  user_id    uuid references identity.users (id) on delete cascade,
  to_email   text not null,
  purpose    text not null,
  subject    text not null,
  body_text  text not null,
  -- The set-password link while the message is unsent; cleared once sent.
  link       text,
  created_at timestamptz not null default now(),
  send_after timestamptz not null default now(),
  sent_at    timestamptz,
  attempts   integer not null default 0,
  last_error text
);
comment on table app.email_outbox is
  'E-mails waiting to be sent (sent_at null) and sent. Read by operators with admin.outbox().';
create index email_outbox_unsent_idx on app.email_outbox (send_after) where sent_at is null;
create index email_outbox_user_idx on app.email_outbox (user_id, created_at);
-- No policy: request roles never see the outbox.
alter table app.email_outbox enable row level security;

--------------------------------------------------------------------------------
-- Queueing a link
--------------------------------------------------------------------------------

create function private.queue_password_email(user_id uuid, purpose text, public_url text)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  account identity.users;
  token text := identity.new_token();
  link text;
  lifetime interval;
  message_id uuid;
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
  insert into app.email_outbox (user_id, to_email, purpose, subject, body_text, link)
    values (
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
      link)
    returning id into message_id;
  perform pg_notify('email_outbox', message_id::text);
  return message_id;
end;
$$;
comment on function private.queue_password_email(uuid, text, text) is
  'Makes a single-use set-password link (purpose invite: 7 days, recover: 1 hour), voids older links of the user, and queues the e-mail. Returns the outbox id.';

--------------------------------------------------------------------------------
-- API: recover and set a password
--------------------------------------------------------------------------------

create function api.auth_recover(email text, public_url text) returns void
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(auth_recover.email));
  -- The same answer whether or not the account exists. At most 5 links an
  -- hour per account, so the address cannot be flooded through this endpoint.
  if account_id is not null
     and (select count(*) from app.email_outbox o
           where o.user_id = account_id and o.purpose = 'recover'
             and o.created_at > now() - interval '1 hour') < 5 then
    perform private.queue_password_email(account_id, 'recover', auth_recover.public_url);
  end if;
end;
$$;
comment on function api.auth_recover(text, text) is
  'POST /api/auth/recover: e-mails a set-password link when the account exists (at most 5 an hour); answers the same either way.';
grant execute on function api.auth_recover(text, text) to anon, authenticated;

create function api.auth_set_password(token text, password text)
  returns table (user_id uuid, email text)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  link identity.password_tokens;
begin
  select * into link from identity.password_tokens t
   where t.token_hash = identity.token_hash(auth_set_password.token)
   for update;
  if link.id is null or link.used_at is not null or link.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  if auth_set_password.password is null or length(auth_set_password.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;

  update identity.password_tokens t set used_at = now()
   where t.user_id = link.user_id and t.used_at is null;
  update identity.users u set password_hash = identity.hash_password(auth_set_password.password)
   where u.id = link.user_id;
  -- A new password ends every session of the account.
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = link.user_id and r.revoked_at is null;
  return query select u.id, u.email from identity.users u where u.id = link.user_id;
end;
$$;
comment on function api.auth_set_password(text, text) is
  'Sets the password of a set-password link''s account, uses the link up and ends the account''s sessions. PT400 invalid_link / weak_password.';
grant execute on function api.auth_set_password(text, text) to anon, authenticated;

--------------------------------------------------------------------------------
-- The sending worker's queue operations (called by the gateway's own
-- connection, never by a request role)
--------------------------------------------------------------------------------

create function private.email_outbox_claim(batch_size integer, lease interval default '1 minute')
  returns setof app.email_outbox
  language sql volatile
  set search_path = pg_catalog
  as $$
    update app.email_outbox o
       set attempts = o.attempts + 1, send_after = now() + email_outbox_claim.lease
     where o.id in (
       select id from app.email_outbox
        where sent_at is null and send_after <= now() and attempts < 10
        order by send_after
        limit email_outbox_claim.batch_size
        for update skip locked)
    returning o.*
  $$;
comment on function private.email_outbox_claim(integer, interval) is
  'Leases up to batch_size due messages to one sender (others skip them); an unconfirmed lease expires and the message is retried.';

create function private.email_outbox_sent(id uuid) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    update app.email_outbox o
       set sent_at = now(), last_error = null, link = null,
           body_text = case when o.link is null then o.body_text else replace(o.body_text, o.link, '[link sent]') end
     where o.id = email_outbox_sent.id
  $$;
comment on function private.email_outbox_sent(uuid) is 'Marks a message sent and removes its link from the stored copy.';

create function private.email_outbox_failed(id uuid, error text) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    -- Exponential back-off: 30 s, 1 min, 2 min, ... (at most 10 attempts).
    update app.email_outbox o
       set last_error = left(email_outbox_failed.error, 1000),
           send_after = now() + interval '30 seconds' * power(2, greatest(o.attempts - 1, 0))
     where o.id = email_outbox_failed.id
  $$;
comment on function private.email_outbox_failed(uuid, text) is 'Records a failed send and schedules a retry with back-off.';

--------------------------------------------------------------------------------
-- Operators
--------------------------------------------------------------------------------

create function admin.outbox(max_rows integer default 50, unsent_only boolean default false)
  returns table (id uuid, to_email text, purpose text, subject text, link text, created_at timestamptz,
                 sent_at timestamptz, attempts integer, last_error text)
  language sql stable
  set search_path = pg_catalog
  as $$
    select o.id, o.to_email, o.purpose, o.subject, o.link, o.created_at, o.sent_at, o.attempts, o.last_error
      from app.email_outbox o
     where not outbox.unsent_only or o.sent_at is null
     order by o.created_at desc
     limit greatest(outbox.max_rows, 0)
  $$;
comment on function admin.outbox(integer, boolean) is
  'The newest e-mails (links of unsent ones included), for operators without SMTP or checking delivery.';

create function api.auth_password_link_valid(token text) returns boolean
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select exists (
      select 1 from identity.password_tokens t
       where t.token_hash = identity.token_hash(auth_password_link_valid.token)
         and t.used_at is null and t.expires_at > now())
  $$;
comment on function api.auth_password_link_valid(text) is
  'GET /auth/set-password: whether a set-password link can still be used (the page says so before the user types).';
grant execute on function api.auth_password_link_valid(text) to anon, authenticated;
