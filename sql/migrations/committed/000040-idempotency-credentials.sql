--! Previous: sha1:b7fbd1a269b18523625ea9d947240a843fe9d73e
--! Hash: sha1:4ccf917dc945c96d91dcd43e80a716481e37a1b3
--! Message: idempotency-credentials

--! split: 500-idempotency-credentials.sql
--------------------------------------------------------------------------------
-- Idempotency keys belong to the credential that used them, answer only after
-- the route's authorization, keep successes only, and are capped per caller.
--
-- Before, a key was scoped by auth.uid() alone, and a claim that found the
-- key answered raised PTRPL before the route ran: the stored answer went to
-- any credential of the user (an API token replayed the `token_value` of
-- POST /api/docs/tokens, which API tokens may not call; a token scoped to
-- community Alpha replayed a webhook secret rotated in community Zulu), and a
-- refusal stored for a narrow token was replayed to the owner. 200 keyed
-- refusals kept 200 rows for 24 hours.
--
-- Now:
--   - A key is scoped to the credential that sends it (private.idempotency_credential:
--     an API token's id and community scope; an access token's session, which
--     its refreshed access tokens share; a sessionless access token's user):
--     records are per (user, credential, key). Another credential of the user
--     never sees the record: its request runs as its own, so the route refuses
--     it (403) if it may not do this, and a refusal made for one credential is
--     nothing to another. The answer is encrypted with a key derived from the
--     user, the credential and the idempotency key.
--   - api.idempotency_claim no longer raises for a replay: it returns the
--     stored answer (null when it claimed the key). The gateway still runs the
--     route in the same transaction, and replays the stored answer only when
--     the route does not refuse the caller now (401/403: say the owner no
--     longer manages the community); the route's work is then rolled back
--     (http/idempotency.ts, http/route.ts).
--   - Only successes (status 200-399) are stored: a refusal changed nothing
--     (its transaction, the claim included, is rolled back), so its retry
--     simply runs again. api.idempotency_store refuses anything else.
--   - A caller (a user, all credentials together) keeps at most
--     private.idempotency_keys_per_caller() = 1,000 answered keys. The store
--     counts them (app.idempotency_callers, one row a user, locked only
--     between the store and COMMIT); the store that would pass the cap first
--     deletes the caller's oldest 100 and counts again. Scanning a caller's
--     records on every claim cost up to 1 ms of Postgres CPU at the cap; the
--     count costs one upsert, and the scan runs once every 100 answers.
-- Records written before this migration cannot say which credential made
-- them (credential '\x', empty): they are replayed to nobody, and the key
-- answers 422 idempotency_key_reused to the user until they expire (24 h);
-- the refusals among them are deleted now (a refusal's retry runs again).
--------------------------------------------------------------------------------

alter table app.idempotency_keys add column if not exists credential bytea;
delete from app.idempotency_keys k where k.status >= 400;
update app.idempotency_keys k set credential = '\x'::bytea where k.credential is null;
-- The table holds at most 24 hours of keyed requests, 1,000 a user: the scan
-- and the index build below are short, under locks that keyed requests wait
-- out (no other request touches the table).
-- squawk-ignore adding-not-nullable-field
alter table app.idempotency_keys alter column credential set not null;
alter table app.idempotency_keys drop constraint if exists idempotency_keys_pkey;
-- squawk-ignore adding-serial-primary-key-field, constraint-missing-not-valid
alter table app.idempotency_keys add constraint idempotency_keys_pkey primary key (user_id, credential, key_hash);
comment on column app.idempotency_keys.credential is
  'SHA-256 of the credential the key belongs to (private.idempotency_credential); empty for records made before credentials were recorded (replayed to nobody).';
comment on table app.idempotency_keys is
  'Idempotency keys of the last 24 hours, per user and credential (at most 1,000 a user): the key''s SHA-256, the request''s SHA-256 (method, path, body), the status of a success and the answer (encrypted with a key derived from the user, the credential and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';

-- The per-caller cap reads a caller's records newest first (the table is small, see above).
-- squawk-ignore require-concurrent-index-creation
create index if not exists idempotency_keys_user_created_idx on app.idempotency_keys (user_id, created_at);

create table if not exists app.idempotency_callers (
  user_id uuid primary key references identity.users (id) on delete cascade,
  records integer not null
);
comment on table app.idempotency_callers is
  'How many answered idempotency keys each user has (app.idempotency_keys), kept by api.idempotency_store and the prune for the per-caller cap; counted again whenever the store trims. Not granted to request roles.';
alter table app.idempotency_callers enable row level security;
insert into app.idempotency_callers as c (user_id, records)
  select k.user_id, count(*) from app.idempotency_keys k group by k.user_id
  on conflict (user_id) do update set records = excluded.records;

create or replace function private.idempotency_keys_per_caller() returns integer
  language sql immutable
  as $$ select 1000 $$;
comment on function private.idempotency_keys_per_caller() is
  'How many answered idempotency keys a caller (a user, all their credentials together) keeps: 1,000; the answer that would pass it first deletes the caller''s oldest 100.';

create or replace function private.idempotency_credential() returns bytea
  language sql stable
  set search_path = pg_catalog
  as $$
    select extensions.digest(
             case
               when nullif(c ->> 'token_id', '') is not null
                 then 'api token ' || (c ->> 'token_id') || ' community ' || coalesce(nullif(c ->> 'token_community_id', ''), 'none')
               when nullif(c ->> 'session_id', '') is not null
                 then 'session ' || (c ->> 'session_id')
               else 'access token of ' || coalesce(c ->> 'sub', '')
             end, 'sha256')
      from (select auth.jwt() as c) claims
  $$;
comment on function private.idempotency_credential() is
  'The credential of the request (request.jwt.claims), as an idempotency record holds it: an API token''s id and community scope, else an access token''s session, else (an access token without a session) its user; SHA-256.';

drop function if exists private.idempotency_answer_key(uuid, text);
create or replace function private.idempotency_answer_key(user_id uuid, credential bytea, key text) returns bytea
  language sql immutable
  set search_path = pg_catalog
  as $$ select extensions.digest('idempotency answer ' || user_id::text || ' ' || encode(credential, 'hex') || ' ' || key, 'sha256') $$;
comment on function private.idempotency_answer_key(uuid, bytea, text) is
  'The AES-256 key of a stored answer: derived from the user, the credential and the idempotency key, never stored.';

-- Security definer: a deferred trigger runs at COMMIT as the role current
-- then (the request's role, on PostgreSQL before 18), not as the claim did.
create or replace function private.tg_idempotency_keys__answered() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog
  as $$
begin
  if exists (select from app.idempotency_keys k
              where k.user_id = new.user_id and k.credential = new.credential and k.key_hash = new.key_hash
                and k.status is null) then
    raise exception 'an idempotency key would be kept without its answer';
  end if;
  return null;
end;
$$;

drop function if exists api.idempotency_replay(text, text);
drop function if exists api.idempotency_claim(text, text);
create function api.idempotency_claim(key text, request_hash text) returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  me uuid := auth.uid();
  caller_credential bytea := private.idempotency_credential();
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
  -- Held until this transaction ends; another request of the credential with
  -- the key, on any replica, is answered 409 at once instead of waiting.
  if not pg_try_advisory_xact_lock(hashtextextended(
           'idempotency ' || me::text || ' ' || encode(caller_credential, 'hex') || ' ' || encode(key_digest, 'hex'), 0)) then
    raise exception 'a request with this Idempotency-Key is still being processed'
      using errcode = 'PT409', hint = 'idempotency_key_in_progress';
  end if;
  -- A new statement, a new snapshot: whoever held the lock before has committed or rolled back.
  -- The credential's own record, or one made before credentials were recorded (empty).
  select k.* into existing from app.idempotency_keys k
   where k.user_id = me and k.credential in (caller_credential, '\x'::bytea) and k.key_hash = key_digest
   order by k.credential desc
   limit 1;
  if existing.user_id is not null then
    if existing.created_at > now() - private.idempotency_key_lifetime() then
      if existing.credential = '\x'::bytea then
        raise exception 'this Idempotency-Key was used before keys were held per credential: use a new key'
          using errcode = 'PT422', hint = 'idempotency_key_reused';
      end if;
      if existing.request_hash <> request_digest then
        raise exception 'this Idempotency-Key was used for another request (method, path or body)'
          using errcode = 'PT422', hint = 'idempotency_key_reused';
      end if;
      return jsonb_build_object(
        'status', existing.status,
        'answer', convert_from(extensions.decrypt_iv(substring(existing.answer from 17),
                                                     private.idempotency_answer_key(me, caller_credential, key),
                                                     substring(existing.answer for 16), 'aes-cbc/pad:pkcs'), 'UTF8')::jsonb);
    end if;
    delete from app.idempotency_keys k
     where k.user_id = me and k.credential = existing.credential and k.key_hash = key_digest;
  end if;
  insert into app.idempotency_keys (user_id, credential, key_hash, request_hash)
    values (me, caller_credential, key_digest, request_digest);
  return null;
end;
$$;
comment on function api.idempotency_claim(text, text) is
  'Claims an Idempotency-Key for the caller''s credential (private.idempotency_credential) in the request''s transaction, before the route''s call, and returns null; or, when the credential sent the same request (request_hash: SHA-256 of method, path and body, hex) in the last 24 hours, returns its stored answer {status, answer: {headers, body}}, which the gateway sends only if the route does not refuse the caller now. PT409 idempotency_key_in_progress while another transaction holds the key; PT422 idempotency_key_reused for another request.';
grant execute on function api.idempotency_claim(text, text) to authenticated;

create or replace function api.idempotency_store(key text, status integer, answer jsonb) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  me uuid := auth.uid();
  caller_credential bytea := private.idempotency_credential();
  iv bytea := extensions.gen_random_bytes(16);
  kept integer;
begin
  if status is null or status not between 200 and 399 then
    raise exception 'only a success is stored for an idempotency key (a refusal changed nothing: its retry runs again)';
  end if;
  update app.idempotency_keys k
     set status = idempotency_store.status,
         answer = iv || extensions.encrypt_iv(convert_to(idempotency_store.answer::text, 'UTF8'),
                                              private.idempotency_answer_key(me, caller_credential, idempotency_store.key), iv, 'aes-cbc/pad:pkcs')
   where k.user_id = me and k.credential = caller_credential
     and k.key_hash = extensions.digest(idempotency_store.key, 'sha256') and k.status is null;
  if not found then
    raise exception 'no idempotency key was claimed for this answer';
  end if;
  -- The cap. The counter's row is locked from here to COMMIT, which goes out
  -- with this statement: the caller's answers are counted one at a time.
  insert into app.idempotency_callers as c (user_id, records) values (me, 1)
    on conflict (user_id) do update set records = c.records + 1
    returning c.records into kept;
  if kept > private.idempotency_keys_per_caller() then
    delete from app.idempotency_keys k
     where k.user_id = me
       and (k.credential, k.key_hash) in (select o.credential, o.key_hash from app.idempotency_keys o
                                           where o.user_id = me
                                           order by o.created_at desc
                                           offset private.idempotency_keys_per_caller() - 100);
    update app.idempotency_callers c
       set records = (select count(*) from app.idempotency_keys k where k.user_id = me)
     where c.user_id = me;
  end if;
end;
$$;
comment on function api.idempotency_store(text, integer, jsonb) is
  'Stores the answer (a success: status 200-399, and {headers, body}) of the request that claimed the Idempotency-Key in this transaction, right before COMMIT; the answer is encrypted with a key derived from the user, the credential and the idempotency key. A refusal is not stored: the gateway rolls its transaction back, the claim with it. Counts the caller''s answers; past private.idempotency_keys_per_caller() deletes the caller''s oldest 100.';

create or replace function private.idempotency_keys_prune(max_rows integer default 10000) returns integer
  language sql volatile security definer
  set search_path = pg_catalog
  as $$
    with gone as (
      delete from app.idempotency_keys k
       where (k.user_id, k.credential, k.key_hash) in (
               select o.user_id, o.credential, o.key_hash from app.idempotency_keys o
                where o.created_at < now() - private.idempotency_key_lifetime()
                order by o.created_at
                limit max_rows)
      returning k.user_id),
    per_user as (select g.user_id, count(*)::integer as n from gone g group by g.user_id),
    counted as (
      update app.idempotency_callers c set records = greatest(c.records - p.n, 0)
        from per_user p where c.user_id = p.user_id
      returning 1)
    select coalesce(sum(p.n), 0)::integer from per_user p
  $$;
comment on function private.idempotency_keys_prune(integer) is
  'Deletes idempotency keys older than 24 hours, at most max_rows (oldest first), and counts them off their callers; returns how many. The background worker''s crontab runs it.';
