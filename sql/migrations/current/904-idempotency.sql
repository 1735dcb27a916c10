-- Made by `npm run db -- areas --diff` from sql/areas/idempotency.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.idempotency_store(key text, status integer, answer jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
    -- The request deleted the caller's account (its claim went with it): its
    -- credentials have ended, so no retry can reach a record; none is kept.
    if not exists (select from identity.users u where u.id = me) then
      return;
    end if;
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
$function$;

set local check_function_bodies to default;

comment on function api.idempotency_store(text,integer,jsonb) is 'Stores the answer (a success: status 200-399, and {headers, body}) of the request that claimed the Idempotency-Key in this transaction, right before COMMIT; the answer is encrypted with a key derived from the user, the credential and the idempotency key. A refusal is not stored: the gateway rolls its transaction back, the claim with it. Counts the caller''s answers; past private.idempotency_keys_per_caller() deletes the caller''s oldest 100. Nothing is kept when the request deleted the caller''s account.';
