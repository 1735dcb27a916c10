--! Previous: sha1:338a9f5e124ab7c8798335b0a0ef0d5cace33406
--! Hash: sha1:8bfeba411ff0648157a75895bcd482d0079ef389
--! Message: idempotency

--! split: 210-idempotency.sql
--------------------------------------------------------------------------------
-- Idempotency keys (issue 24): an `Idempotency-Key` on a POST, PATCH or DELETE
-- of the mobile, platform and token interfaces makes a retry safe.
--
-- The gateway's request pipeline (gateway/http/route.ts) sends, in the
-- request's own transaction and pipelined with it:
--   api.idempotency_claim(key, request_hash)   before the route's call
--   ... the route's call ...
--   api.idempotency_store(key, status, answer) before COMMIT
-- so the record of the key and the request's effect commit together: a
-- request that fails (5xx) or is rolled back leaves no record and its retry
-- runs again. A refusal (4xx) is stored and replayed like a success.
--
-- The claim decides, per caller (auth.uid(): the user, or an API token's
-- owner) and key:
--   - another transaction holds the key now (an advisory lock per caller and
--     key, tried without waiting; any gateway replica): PT409
--     idempotency_key_in_progress;
--   - the key was answered in the last 24 hours: the same request (method,
--     path, body: request_hash, a SHA-256 the gateway computes) gets
--     PTRPL idempotent_replay, which the gateway answers with the stored
--     answer (api.idempotency_replay, in a read-only transaction); another
--     request gets PT422 idempotency_key_reused;
--   - otherwise the key is claimed (a row without its answer; a deferred
--     trigger refuses to commit it without one).
-- Neither the key nor the answer is stored readable: the row holds the
-- key's SHA-256, and the answer encrypted (AES-256) with a key derived from
-- the caller and the idempotency key, which the database never keeps (an
-- answer may carry a secret shown once: an API token, a calendar feed URL).
-- Records are deleted after 24 hours by private.idempotency_keys_prune().
--------------------------------------------------------------------------------

create table if not exists app.idempotency_keys (
  user_id uuid not null references identity.users (id) on delete cascade,
  key_hash bytea not null,
  request_hash bytea not null,
  status integer,
  answer bytea,
  created_at timestamptz not null default now(),
  primary key (user_id, key_hash),
  constraint idempotency_keys_status_check check (status is null or status between 200 and 499)
);
comment on table app.idempotency_keys is
  'Idempotency keys of the last 24 hours, per caller: the key''s SHA-256, the request''s SHA-256 (method, path, body), the status and the answer (encrypted with a key derived from the caller and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';
alter table app.idempotency_keys enable row level security;
create index if not exists idempotency_keys_created_idx on app.idempotency_keys (created_at);

create or replace function private.idempotency_key_lifetime() returns interval
  language sql immutable
  as $$ select interval '24 hours' $$;
comment on function private.idempotency_key_lifetime() is 'How long an idempotency key and its answer are kept: 24 hours.';

create or replace function private.idempotency_answer_key(user_id uuid, key text) returns bytea
  language sql immutable
  set search_path = pg_catalog
  as $$ select extensions.digest('idempotency answer ' || user_id::text || ' ' || key, 'sha256') $$;
comment on function private.idempotency_answer_key(uuid, text) is
  'The AES-256 key of a stored answer: derived from the caller and the idempotency key, never stored.';

-- Security definer: a deferred trigger runs at COMMIT as the role current
-- then (the request's role, on PostgreSQL before 18), not as the claim did.
create or replace function private.tg_idempotency_keys__answered() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog
  as $$
begin
  if exists (select from app.idempotency_keys k
              where k.user_id = new.user_id and k.key_hash = new.key_hash and k.status is null) then
    raise exception 'an idempotency key would be kept without its answer';
  end if;
  return null;
end;
$$;
comment on function private.tg_idempotency_keys__answered() is
  'Deferred constraint trigger: a transaction that claimed an idempotency key cannot commit without storing its answer.';

drop trigger if exists _900_answered on app.idempotency_keys;
create constraint trigger _900_answered after insert on app.idempotency_keys
  deferrable initially deferred
  for each row execute function private.tg_idempotency_keys__answered();

create or replace function api.idempotency_claim(key text, request_hash text) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  me uuid := auth.uid();
  key_digest bytea;
  request_digest bytea;
  existing app.idempotency_keys;
begin
  if me is null then
    raise exception 'sign in first' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if key is null or key !~ '^[ -~]{1,255}$' then
    raise exception 'Idempotency-Key must be 1 to 255 printable ASCII characters' using errcode = 'PT400', hint = 'bad_request';
  end if;
  if request_hash is null or request_hash !~ '^[0-9a-f]{64}$' then
    raise exception 'request_hash must be a SHA-256 in hex' using errcode = 'PT400', hint = 'bad_request';
  end if;
  key_digest := extensions.digest(key, 'sha256');
  request_digest := decode(request_hash, 'hex');
  -- Held until this transaction ends; another request with the key, on any
  -- replica, is answered 409 at once instead of waiting.
  if not pg_try_advisory_xact_lock(hashtextextended('idempotency ' || me::text || ' ' || encode(key_digest, 'hex'), 0)) then
    raise exception 'a request with this Idempotency-Key is still being processed'
      using errcode = 'PT409', hint = 'idempotency_key_in_progress';
  end if;
  -- A new statement, a new snapshot: whoever held the lock before has committed or rolled back.
  select k.* into existing from app.idempotency_keys k where k.user_id = me and k.key_hash = key_digest;
  if existing.user_id is not null then
    if existing.created_at > now() - private.idempotency_key_lifetime() then
      if existing.request_hash = request_digest then
        raise exception 'this request was answered before' using errcode = 'PTRPL', hint = 'idempotent_replay';
      end if;
      raise exception 'this Idempotency-Key was used for another request (method, path or body)'
        using errcode = 'PT422', hint = 'idempotency_key_reused';
    end if;
    delete from app.idempotency_keys k where k.user_id = me and k.key_hash = key_digest;
  end if;
  insert into app.idempotency_keys (user_id, key_hash, request_hash) values (me, key_digest, request_digest);
end;
$$;
comment on function api.idempotency_claim(text, text) is
  'Claims an Idempotency-Key for the caller in the request''s transaction, before the route''s call: PT409 idempotency_key_in_progress while another transaction holds it; PTRPL idempotent_replay when the same request (request_hash: SHA-256 of method, path and body, hex) was answered in the last 24 hours; PT422 idempotency_key_reused for another request.';
grant execute on function api.idempotency_claim(text, text) to authenticated;

create or replace function api.idempotency_store(key text, status integer, answer jsonb) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  me uuid := auth.uid();
  iv bytea := extensions.gen_random_bytes(16);
begin
  update app.idempotency_keys k
     set status = idempotency_store.status,
         answer = iv || extensions.encrypt_iv(convert_to(idempotency_store.answer::text, 'UTF8'),
                                              private.idempotency_answer_key(me, idempotency_store.key), iv, 'aes-cbc/pad:pkcs')
   where k.user_id = me and k.key_hash = extensions.digest(idempotency_store.key, 'sha256') and k.status is null;
  if not found then
    raise exception 'no idempotency key was claimed for this answer';
  end if;
end;
$$;
comment on function api.idempotency_store(text, integer, jsonb) is
  'Stores the answer (status and {headers, body}) of the request that claimed the Idempotency-Key in this transaction, right before COMMIT; the answer is encrypted with a key derived from the caller and the idempotency key.';
grant execute on function api.idempotency_store(text, integer, jsonb) to authenticated;

create or replace function api.idempotency_replay(key text, request_hash text) returns table (status integer, answer jsonb)
  language sql stable security definer
  set search_path = pg_catalog
  as $$
    select k.status,
           convert_from(extensions.decrypt_iv(substring(k.answer from 17), private.idempotency_answer_key(k.user_id, idempotency_replay.key),
                                              substring(k.answer for 16), 'aes-cbc/pad:pkcs'), 'UTF8')::jsonb
      from app.idempotency_keys k
     where k.user_id = auth.uid()
       and k.key_hash = extensions.digest(idempotency_replay.key, 'sha256')
       and k.request_hash = decode(idempotency_replay.request_hash, 'hex')
       and k.status is not null
       and k.created_at > now() - private.idempotency_key_lifetime()
  $$;
comment on function api.idempotency_replay(text, text) is
  'The stored answer (status, {headers, body}) of the caller''s Idempotency-Key for this request (request_hash), when the claim said idempotent_replay; no row when it is gone.';
grant execute on function api.idempotency_replay(text, text) to authenticated;

create or replace function private.idempotency_keys_prune(max_rows integer default 10000) returns integer
  language sql volatile security definer
  set search_path = pg_catalog
  as $$
    with gone as (
      delete from app.idempotency_keys k
       where (k.user_id, k.key_hash) in (
               select o.user_id, o.key_hash from app.idempotency_keys o
                where o.created_at < now() - private.idempotency_key_lifetime()
                order by o.created_at
                limit max_rows)
      returning 1)
    select count(*)::integer from gone
  $$;
comment on function private.idempotency_keys_prune(integer) is
  'Deletes idempotency keys older than 24 hours, at most max_rows (oldest first); returns how many. The gateway runs it with the change-log prune; a background worker may call it instead.';
