-- =============================================================================
-- An account its owner controls: delete, export, e-mail and password changes, sessions
-- =============================================================================
-- What a signed-in person does with their own account, and what an operator
-- does for them. Every function of this area that acts for the caller reads
-- who it is from the request's claims (private.account_caller: a session of
-- a sign-in; an API token or an agent's credential is refused), so the same
-- functions serve any door that signs people in.
--
--   re-authentication   a destructive change needs the password again: the
--                       process asks private.reauthenticate_start (the
--                       login throttle's door `reauthenticate`: a wrong
--                       password is a failed sign-in), compares the password,
--                       and private.reauthenticate_finish turns a right one
--                       into a single-use proof (60 s) that the api function
--                       consumes (private.reauthenticated)
--   delete              private.account_delete: everything of the person
--                       goes, in one transaction (see its comment); the
--                       last manager of a community is refused. Through
--                       api.account_delete (proof), an e-mailed link
--                       (api.account_delete_request / _link_send, then
--                       api.account_delete_confirm), or admin.delete_user
--   export              api.account_export: one JSON document, at most 5 an
--                       hour per user
--   e-mail change       api.account_email_change (proof) e-mails a link to
--                       the new address and a notice to the old one; the
--                       link's token_hash confirms it
--                       (api.account_email_change_confirm). The old address
--                       signs in until then
--   password change     api.account_password_change (proof, and a hash the
--                       process made) ends every other session and OAuth
--                       grant of the account
--   sessions            api.account_sessions, api.account_session_end,
--                       api.account_sessions_end_others
--
-- E-mailed links (identity.account_links) are random, single-use, stored as
-- SHA-256, 1 hour (delete) or 24 hours (e-mail change); a newer link of a
-- purpose voids older ones; at most 5 e-mails of a purpose an hour per
-- account.
--
-- Code: gateway/routes/account.ts, gateway/routes/account-pages.ts,
--   gateway/auth/reauthenticate.ts, gateway/tooling/admin.ts
-- pgTAP: supabase/tests/account.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE identity.reauthentications (
    proof_hash bytea NOT NULL,
    user_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT reauthentications_proof_hash_check CHECK ((octet_length(proof_hash) = 32)),
    CONSTRAINT reauthentications_pkey PRIMARY KEY (proof_hash),
    CONSTRAINT reauthentications_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.reauthentications IS 'Proofs of a signed-in user''s password check (hashed): single-use, 60 seconds, consumed by the account functions (private.reauthenticated).';
ALTER TABLE identity.reauthentications ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.account_links (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    token_hash bytea NOT NULL,
    user_id uuid NOT NULL,
    purpose text NOT NULL,
    new_email text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    CONSTRAINT account_links_email_change_has_email CHECK (((purpose = 'email_change'::text) = (new_email IS NOT NULL))),
    CONSTRAINT account_links_new_email_check CHECK (((new_email = lower(btrim(new_email))) AND (length(new_email) <= 320))),
    CONSTRAINT account_links_purpose_check CHECK ((purpose = ANY (ARRAY['delete_account'::text, 'email_change'::text]))),
    CONSTRAINT account_links_pkey PRIMARY KEY (id),
    CONSTRAINT account_links_token_hash_key UNIQUE (token_hash),
    CONSTRAINT account_links_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.account_links IS 'E-mailed account links (hashed): delete the account (1 hour), confirm a new e-mail address (24 hours). Single-use; a newer link of a purpose voids the user''s older ones.';
ALTER TABLE identity.account_links ENABLE ROW LEVEL SECURITY;

CREATE TABLE private.account_exports (
    user_id uuid NOT NULL,
    exported_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_exports_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE private.account_exports IS 'Exports of a user''s data in the last hour, for the limit of 5 an hour.';
ALTER TABLE private.account_exports ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX reauthentications_user_idx ON identity.reauthentications USING btree (user_id);
CREATE INDEX account_links_user_idx ON identity.account_links USING btree (user_id, purpose, created_at);
CREATE INDEX account_exports_user_idx ON private.account_exports USING btree (user_id, exported_at);

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.account_delete_link_send(public_url text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  wait integer;
begin
  if exists (select from identity.users u where u.id = me and u.password_hash is not null) then
    raise exception 'this account has a password: confirm the deletion with it' using errcode = 'PT401', hint = 'invalid_credentials';
  end if;
  wait := private.account_links_wait(me, 'delete_account');
  if wait > 0 then
    raise exception 'too many deletion links asked for in the last hour, try again later'
      using errcode = 'PT429', hint = 'rate_limited', detail = jsonb_build_object('retry_after', wait)::text;
  end if;
  perform private.account_delete_link_queue(me, account_delete_link_send.public_url);
  return jsonb_build_object('link_sent', true);
end;
$$;

COMMENT ON FUNCTION api.account_delete_link_send(public_url text) IS 'DELETE /api/mobile/account for an account without a password: e-mails its owner a single-use deletion link (1 hour). PT429 rate_limited past 5 an hour (detail: retry_after); PT401 invalid_credentials for an account with a password (it confirms with it); PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_delete_link_send(public_url text) TO authenticated;

CREATE FUNCTION api.account_delete(reauthentication text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
begin
  perform private.reauthenticated(me, account_delete.reauthentication);
  return private.account_delete(me);
end;
$$;

COMMENT ON FUNCTION api.account_delete(reauthentication text) IS 'DELETE /api/mobile/account: deletes the caller''s account (private.account_delete) once the password was checked again (reauthentication: the proof of private.reauthenticate_finish). PT401 invalid_credentials without a valid proof; PT403 forbidden for an API token or an agent; PT409 last_manager_of_communities.';
GRANT EXECUTE ON FUNCTION api.account_delete(reauthentication text) TO authenticated;

CREATE FUNCTION api.account_export() RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  node uuid;
  doc jsonb;
begin
  perform private.account_export_take(me);
  select p.node_id into node from app.profiles p where p.id = me;
  select jsonb_build_object(
    'exported_at', app.iso(now()),
    'account', (
      select jsonb_build_object(
               'user_id', u.id, 'email', u.email, 'has_password', u.password_hash is not null,
               'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at),
               'pending_email_change', (
                 select jsonb_build_object('email', l.new_email, 'expires_at', app.iso(l.expires_at))
                   from identity.account_links l
                  where l.user_id = u.id and l.purpose = 'email_change' and l.used_at is null and l.expires_at > now()
                  order by l.created_at desc limit 1))
        from identity.users u where u.id = me),
    'profile', (
      select jsonb_build_object(
               'name', p.name, 'name_source', p.name_source, 'subscription_type', p.subscription_type,
               'node_id', p.node_id, 'created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at))
        from app.profiles p where p.id = me),
    'hats', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', h.id, 'name', h.name, 'hat_type', h.hat_type, 'description', h.description,
               'is_primary', h.is_primary, 'created_at', app.iso(h.created_at), 'updated_at', app.iso(h.updated_at))
             order by h.created_at, h.id)
        from app.hats h where h.user_id = me), '[]'),
    'memberships', coalesce((
      select jsonb_agg(jsonb_build_object(
               'community_id', c.id, 'community_name', c.name, 'role', m.role, 'joined_at', app.iso(m.joined_at))
             order by m.joined_at, c.id)
        from app.community_members m join app.communities c on c.id = m.community_id
       where m.member_node_id = node), '[]'),
    'checkins', coalesce((
      select jsonb_agg(private.checkin_json(c) || jsonb_build_object('event_title', e.title) order by c.checked_in_at, c.id)
        from app.checkins c left join app.events e on e.id = c.event_id
       where c.user_id = me), '[]'),
    'event_registrations', coalesce((
      select jsonb_agg(jsonb_build_object(
               'event_id', e.id, 'event_title', e.title, 'external_platform', a.external_platform,
               'registered_at', app.iso(a.registered_at))
             order by a.registered_at, e.id)
        from app.event_attendees a join app.events e on e.id = a.event_id
       where a.user_id = me), '[]'),
    'connections', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', c.id, 'target_node_id', c.target_node_id,
               'target_name', (select n.name from app.node_display_names(array[c.target_node_id]) n),
               'connection_type', c.connection_type, 'event_id', c.event_id, 'my_hat_id', c.my_hat_id,
               'their_hat_id', c.their_hat_id, 'notes', c.notes, 'strength', c.strength, 'tags', to_jsonb(c.tags),
               'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
             order by c.created_at, c.id)
        from app.connections c where c.owner_node_id = node), '[]'),
    'tasks', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', t.id, 'inserted_at', app.iso(t.inserted_at), 'updated_at', app.iso(t.updated_at), 'meta', t.meta)
             order by t.inserted_at, t.id)
        from app.tasks t where t.created_by = me), '[]'),
    'task_links', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', l.id, 'type', l.type, 'origin_id', l.origin_id, 'destination_id', l.destination_id,
               'inserted_at', app.iso(l.inserted_at), 'meta', l.meta)
             order by l.inserted_at, l.id)
        from app.task_transitions l where l.created_by = me), '[]'),
    'deals', coalesce((
      select jsonb_agg(jsonb_build_object('id', d.id, 'meta', private.deal_json_meta(d),
                                          'inserted_at', app.iso(d.inserted_at), 'updated_at', app.iso(d.updated_at))
             order by d.inserted_at, d.id)
        from app.deals d where d.created_by = me), '[]'),
    'sessions', private.account_sessions_of(me),
    'api_tokens', coalesce((
      select jsonb_agg(private.api_token_json(t) order by t.created_at, t.id) from app.api_tokens t where t.user_id = me), '[]'),
    'oauth_grants', coalesce((
      select jsonb_agg(g.grant_json order by g.created_at) from (
        select jsonb_build_object(
                 'client_id', o.client_id,
                 'client_name', min(c.metadata ->> 'client_name'),
                 'scopes', to_jsonb(min(o.scopes)),
                 'created_at', app.iso(min(o.created_at)),
                 'expires_at', app.iso(max(o.expires_at)),
                 'active', bool_or(o.revoked_at is null and o.expires_at > now())) as grant_json,
               min(o.created_at) as created_at
          from identity.oauth_tokens o left join identity.oauth_clients c on c.client_id = o.client_id
         where o.user_id = me
         group by o.family_id, o.client_id) g), '[]'),
    'calendar_feed', jsonb_build_object(
      'exists', exists (select from app.calendar_feeds f where f.user_id = me),
      'created_at', (select app.iso(f.created_at) from app.calendar_feeds f where f.user_id = me)),
    'stored_files', private.account_files(me),
    'webhook_endpoints', coalesce((
      select jsonb_agg(private.webhook_endpoint_json(w) order by w.created_at, w.id)
        from app.webhook_endpoints w
       where w.community_id in (select m.community_id from app.community_members m
                                 where m.member_node_id = node and m.role = 'manager')), '[]'),
    'agent', (
      select jsonb_build_object('created_at', app.iso(a.created_at), 'attributes', a.attributes)
        from app.agent_members a where a.member_id = me),
    'agent_calls', coalesce((
      select jsonb_agg(jsonb_build_object(
               'tool', c.tool, 'outcome', c.outcome, 'called_at', app.iso(c.called_at),
               'credential_kind', c.credential_kind, 'arguments', c.arguments)
             order by c.called_at desc, c.id desc)
        from (select * from app.mcp_tool_calls x where x.user_id = me order by x.called_at desc, x.id desc limit 1000) c), '[]'),
    'api_test_results', coalesce((
      select jsonb_agg(jsonb_build_object(
               'request_method', r.request_method, 'request_path', r.request_path,
               'response_status', r.response_status, 'success', r.success, 'executed_at', app.iso(r.executed_at))
             order by r.executed_at desc, r.id)
        from (select * from app.api_test_results x where x.user_id = me order by x.executed_at desc limit 1000) r), '[]')
  ) into doc;
  return doc;
end;
$$;
COMMENT ON FUNCTION api.account_export() IS 'GET /api/mobile/account/export: everything the service holds about the caller in one JSON document: account, profile, hats, memberships with roles, check-ins, event registrations, connections (the other person as the caller sees them), tasks, task links and deals, sessions, API tokens and OAuth grants (never a secret or a hash), the calendar feed (whether one exists), stored files, webhook endpoints of the communities the caller manages (never their secrets), what an agent recorded about them, their agents'' calls and live test results (the newest 1,000 of each). At most 5 an hour: PT429 rate_limited (detail: retry_after). PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_export() TO authenticated;

CREATE FUNCTION api.account_email_change(reauthentication text, new_email text, public_url text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
declare
  me uuid := private.account_caller();
  account identity.users;
  address text := lower(btrim(account_email_change.new_email));
  token text;
  link text;
  wait integer;
begin
  if address is null or address !~ '^[^@\s]+@[^@\s]+$' or length(address) > 320 then
    raise exception 'invalid email address' using errcode = 'PT422', hint = 'invalid_email';
  end if;
  perform private.reauthenticated(me, account_email_change.reauthentication);
  select * into strict account from identity.users u where u.id = me for update;
  wait := private.account_links_wait(me, 'email_change');
  if wait > 0 then
    raise exception 'too many e-mail changes asked for in the last hour, try again later'
      using errcode = 'PT429', hint = 'rate_limited', detail = jsonb_build_object('retry_after', wait)::text;
  end if;
  -- A taken address (this account's own included) gets its link all the
  -- same: the answer does not tell, and the link's page says it cannot be used.
  token := private.account_link_create(me, 'email_change', address);
  link := rtrim(account_email_change.public_url, '/') || '/account/email/confirm?type=email_change&token_hash=' || token;
  perform private.email_queue(
    me, address, 'email_change', 'Confirm your new e-mail address',
    'Someone asked to use ' || address || E' as the e-mail address of an account.\n\n'
    || E'To confirm it, open this link (it works once, for 24 hours):\n' || link || E'\n\n'
    || E'If it was not you, ignore this message; nothing changes.\n',
    link);
  perform private.email_queue(
    me, account.email, 'email_change_notice', 'A change of your e-mail address was asked for',
    'Someone signed in to your account (' || account.email || ') asked to change its e-mail address to '
    || address || E'.\n\n'
    || E'Nothing changes until it is confirmed from the new address; until then you sign in with this one.\n'
    || E'If it was not you, change your password now: that ends every other session of the account.\n');
end;
$_$;

COMMENT ON FUNCTION api.account_email_change(reauthentication text, new_email text, public_url text) IS 'POST /api/mobile/account/email: once the password was checked again (reauthentication), e-mails a confirmation link (24 hours, single use; its token_hash confirms) to the new address and a notice to the current one; the account keeps its address until the link is confirmed. A taken address is handled the same (its link page says it cannot be used). PT422 invalid_email; PT401 invalid_credentials without a valid proof; PT429 rate_limited past 5 an hour (detail: retry_after); PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_email_change(reauthentication text, new_email text, public_url text) TO authenticated;

CREATE FUNCTION api.account_password_change(reauthentication text, password_hash text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
  ended integer;
begin
  if not private.password_hash_valid(account_password_change.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  perform private.reauthenticated(me, account_password_change.reauthentication);
  update identity.users u set password_hash = account_password_change.password_hash where u.id = me;
  -- Every other session: its refresh tokens, access tokens and streams.
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null and r.session_id <> current_session
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  -- OAuth grants: access and refresh tokens, and codes not exchanged yet.
  update identity.oauth_tokens o set revoked_at = now() where o.user_id = me and o.revoked_at is null;
  delete from identity.oauth_codes c where c.user_id = me and c.used_at is null;
  -- Proofs and e-mailed links made with the old password.
  delete from identity.reauthentications r where r.user_id = me;
  -- Signed storage URLs the account made (whoever holds one keeps no access).
  perform private.storage_signed_urls_end(me);
  return jsonb_build_object(
    'sessions_ended', ended,
    'api_tokens', (select count(*) from app.api_tokens t where t.user_id = me and t.active
                     and (t.expires_at is null or t.expires_at > now())));
end;
$$;

COMMENT ON FUNCTION api.account_password_change(reauthentication text, password_hash text) IS 'POST /api/mobile/account/password: once the current password was checked again (reauthentication), sets the new one (a bcrypt hash the process made) and ends every other session of the account, every OAuth grant (tokens and pending codes) and every signed storage URL it made; the calling session, the API tokens and the calendar feed stay. Returns sessions_ended and how many active API tokens the account has. PT400 invalid_password_hash; PT401 invalid_credentials without a valid proof; PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_password_change(reauthentication text, password_hash text) TO authenticated;

CREATE FUNCTION api.account_sessions() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return private.account_sessions_of(private.account_caller());
end;
$$;
COMMENT ON FUNCTION api.account_sessions() IS 'GET /api/mobile/account/sessions: the caller''s sessions that can still be refreshed, most recently used first: id, created_at (the sign-in), last_used_at (the sign-in or the latest refresh), user_agent and ip of that sign-in or refresh, current. PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_sessions() TO authenticated;

CREATE FUNCTION api.account_session_end(id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
begin
  if not exists (select from identity.refresh_tokens r
                  where r.session_id = account_session_end.id and r.user_id = me
                    and r.revoked_at is null and r.expires_at > now()) then
    raise exception 'session not found' using errcode = 'PT404', hint = 'session_not_found';
  end if;
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.session_id = account_session_end.id and r.user_id = me and r.revoked_at is null;
  return jsonb_build_object('id', account_session_end.id, 'current', account_session_end.id = private.account_session());
end;
$$;

COMMENT ON FUNCTION api.account_session_end(id uuid) IS 'DELETE /api/mobile/account/sessions/{id}: ends one of the caller''s sessions (its refresh token, its access tokens and its streams at once; the calling session too, as a logout). PT404 session_not_found for an unknown, ended or another user''s session; PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_session_end(id uuid) TO authenticated;

CREATE FUNCTION api.account_sessions_end_others() RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
  ended integer;
begin
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null and r.session_id <> current_session
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  return jsonb_build_object('sessions_ended', ended);
end;
$$;
COMMENT ON FUNCTION api.account_sessions_end_others() IS 'DELETE /api/mobile/account/sessions: ends every session of the caller but the calling one (their refresh tokens, access tokens and streams at once); returns how many. PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_sessions_end_others() TO authenticated;

CREATE FUNCTION api.account_delete_confirm(token text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  link identity.account_links := private.account_link(account_delete_confirm.token, 'delete_account', true);
begin
  update identity.account_links l set used_at = now() where l.id = link.id;
  return private.account_delete(link.user_id);
end;
$$;

COMMENT ON FUNCTION api.account_delete_confirm(token text) IS 'POST /account/delete/confirm (the page an e-mailed deletion link opens): deletes the account of a valid link (private.account_delete). PT400 invalid_link for a used, replaced or expired link; PT409 last_manager_of_communities.';
GRANT EXECUTE ON FUNCTION api.account_delete_confirm(token text) TO anon;
GRANT EXECUTE ON FUNCTION api.account_delete_confirm(token text) TO authenticated;

CREATE FUNCTION api.account_email_change_confirm(token_hash text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  link identity.account_links := private.account_link(account_email_change_confirm.token_hash, 'email_change', true);
  old_email text;
begin
  if exists (select from identity.users u where u.email = link.new_email) then
    raise exception 'this address cannot be used: another account has it' using errcode = 'PT409', hint = 'email_taken';
  end if;
  select u.email into old_email from identity.users u where u.id = link.user_id for update;
  update identity.account_links l set used_at = now() where l.id = link.id;
  -- A unique violation here (a registration in between) is a 409 too.
  update identity.users u set email = link.new_email where u.id = link.user_id;
  return jsonb_build_object('user_id', link.user_id, 'email', link.new_email, 'previous_email', old_email);
end;
$$;

COMMENT ON FUNCTION api.account_email_change_confirm(token_hash text) IS 'POST /account/email/confirm (and the e-mail change verification of any door): the e-mail address of an e-mail change link''s account becomes the new one; token_hash is the value of the link''s token_hash parameter (only its SHA-256 is stored). PT400 invalid_link for a used, replaced or expired link; PT409 email_taken when another account has the address.';
GRANT EXECUTE ON FUNCTION api.account_email_change_confirm(token_hash text) TO anon;
GRANT EXECUTE ON FUNCTION api.account_email_change_confirm(token_hash text) TO authenticated;

CREATE FUNCTION api.account_delete_link(token text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object('email', u.email, 'expires_at', app.iso(l.expires_at))
      from identity.account_links l
      join identity.users u on u.id = l.user_id
     where l.token_hash = identity.token_hash(account_delete_link.token)
       and l.purpose = 'delete_account' and l.used_at is null and l.expires_at > now()
  $$;

COMMENT ON FUNCTION api.account_delete_link(token text) IS 'GET /account/delete/confirm: the account (its e-mail) an e-mailed deletion link would delete, while the link is usable; null otherwise.';
GRANT EXECUTE ON FUNCTION api.account_delete_link(token text) TO anon;
GRANT EXECUTE ON FUNCTION api.account_delete_link(token text) TO authenticated;

CREATE FUNCTION api.account_email_change_link(token_hash text) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
             'email', l.new_email,
             'available', not exists (select from identity.users o where o.email = l.new_email),
             'expires_at', app.iso(l.expires_at))
      from identity.account_links l
     where l.token_hash = identity.token_hash(account_email_change_link.token_hash)
       and l.purpose = 'email_change' and l.used_at is null and l.expires_at > now()
  $$;

COMMENT ON FUNCTION api.account_email_change_link(token_hash text) IS 'GET /account/email/confirm: the new address of a usable e-mail change link and whether it can be used (no other account has it); null for a used, replaced or expired link.';
GRANT EXECUTE ON FUNCTION api.account_email_change_link(token_hash text) TO anon;
GRANT EXECUTE ON FUNCTION api.account_email_change_link(token_hash text) TO authenticated;

CREATE FUNCTION api.account_delete_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- The same work whether or not the account exists: the lookup and the e-mail are a job's.
  perform private.email_link_enqueue('delete_account', account_delete_request.email, account_delete_request.public_url,
                                     account_delete_request.client_ip, account_delete_request.max_per_ip, account_delete_request.window_seconds);
end;
$$;

COMMENT ON FUNCTION api.account_delete_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) IS 'POST /account/delete (the web page): queues the job that e-mails the account with this address a single-use deletion link (1 hour; at most 5 an hour per account; private.email_link_send); does and answers the same whether or not the account exists. PT429 rate_limited past max_per_ip requests of the client address in window_seconds.';
GRANT EXECUTE ON FUNCTION api.account_delete_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO anon;
GRANT EXECUTE ON FUNCTION api.account_delete_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer) TO authenticated;

CREATE FUNCTION api.account_sign_out(scope text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
  ended integer;
begin
  if account_sign_out.scope not in ('global', 'local', 'others') then
    raise exception 'scope must be global, local or others' using errcode = 'PT422', hint = 'validation_error';
  end if;
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null
       and case account_sign_out.scope when 'global' then true
                                       when 'local' then r.session_id = current_session
                                       else r.session_id <> current_session end
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  -- Signing out everywhere ends the signed storage URLs the account made too.
  if account_sign_out.scope = 'global' then
    perform private.storage_signed_urls_end(me);
  end if;
  return jsonb_build_object('sessions_ended', ended);
end;
$$;

COMMENT ON FUNCTION api.account_sign_out(scope text) IS 'POST /auth/v1/logout?scope=: ends the calling session (local), every session of the caller (global, which also ends every signed storage URL the caller made) or all but the calling one (others): their refresh tokens, access tokens and streams at once; returns how many. PT422 validation_error for another scope; PT403 forbidden for an API token or an agent.';
GRANT EXECUTE ON FUNCTION api.account_sign_out(scope text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.account_caller() RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := auth.uid();
begin
  if me is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if private.account_session() is null
     or nullif(auth.jwt() ->> 'token_id', '') is not null
     or nullif(auth.jwt() ->> 'oauth_client_id', '') is not null then
    raise exception 'an account is managed with the access token of a sign-in, not with an API token or an agent''s credential'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
  if not exists (select from identity.users u where u.id = me) then
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  return me;
end;
$$;
COMMENT ON FUNCTION private.account_caller() IS 'The signed-in user the account functions act for: the claims of a sign-in''s access token (a session_id). PT401 unauthorized without a user, invalid_token for a user that no longer exists; PT403 forbidden for an API token (token_id) or an agent''s OAuth credential (oauth_client_id), which cannot manage the account.';


CREATE FUNCTION private.account_session() RETURNS uuid
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $_$
    select case when auth.jwt() ->> 'session_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                then (auth.jwt() ->> 'session_id')::uuid end
  $_$;
COMMENT ON FUNCTION private.account_session() IS 'The session of the request''s access token (its session_id claim), or null.';


CREATE FUNCTION private.account_links_wait(user_id uuid, purpose text) RETURNS integer
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case when count(*) < 5 then 0
                else greatest(1, ceil(extract(epoch from min(l.created_at) + interval '1 hour' - now())))::integer end
      from identity.account_links l
     where l.user_id = account_links_wait.user_id and l.purpose = account_links_wait.purpose
       and l.created_at > now() - interval '1 hour'
  $$;

COMMENT ON FUNCTION private.account_links_wait(user_id uuid, purpose text) IS 'Seconds until the user may be sent another link of the purpose (0: now): at most 5 an hour.';


CREATE FUNCTION private.account_delete_link_queue(user_id uuid, public_url text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  account identity.users;
  token text;
  link text;
begin
  select * into account from identity.users u where u.id = account_delete_link_queue.user_id for update;
  if account.id is null or private.account_links_wait(account.id, 'delete_account') > 0 then
    return false;
  end if;
  token := private.account_link_create(account.id, 'delete_account', null);
  link := rtrim(account_delete_link_queue.public_url, '/') || '/account/delete/confirm?token=' || token;
  perform private.email_queue(
    account.id, account.email, 'delete_account', 'Delete your account',
    'Someone asked to delete the account of ' || account.email || E'.\n\n'
    || E'To delete it and everything in it for good, open this link (it works once, for 1 hour) and confirm:\n'
    || link || E'\n\n'
    || E'If it was not you, ignore this message; nothing is deleted.\n',
    link);
  return true;
end;
$$;

COMMENT ON FUNCTION private.account_delete_link_queue(user_id uuid, public_url text) IS 'Makes a single-use deletion link (1 hour; older ones of the account void) and queues its e-mail to the account''s address; false (nothing sent) past 5 an hour or for an unknown account.';


CREATE FUNCTION private.account_link_create(user_id uuid, purpose text, new_email text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  token text := identity.new_token();
begin
  -- Only the newest link of a purpose works.
  update identity.account_links l set used_at = now()
   where l.user_id = account_link_create.user_id and l.purpose = account_link_create.purpose and l.used_at is null;
  insert into identity.account_links (token_hash, user_id, purpose, new_email, expires_at)
    values (identity.token_hash(token), account_link_create.user_id, account_link_create.purpose, account_link_create.new_email,
            now() + case account_link_create.purpose when 'delete_account' then interval '1 hour' else interval '24 hours' end);
  return token;
end;
$$;

COMMENT ON FUNCTION private.account_link_create(user_id uuid, purpose text, new_email text) IS 'A new single-use account link (delete_account: 1 hour; email_change: 24 hours, with the new address), voiding the user''s older links of that purpose; returns its token (only its SHA-256 is stored).';


CREATE FUNCTION private.reauthenticated(user_id uuid, reauthentication text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- One change of an account at a time (its deletion takes the proofs with it).
  perform from identity.users u where u.id = reauthenticated.user_id for update;
  delete from identity.reauthentications r
   where r.proof_hash = identity.token_hash(coalesce(reauthenticated.reauthentication, ''))
     and r.user_id = reauthenticated.user_id and r.expires_at > now();
  if not found then
    -- A deletion of the account that committed meanwhile took the proof with it.
    if not exists (select from identity.users u where u.id = reauthenticated.user_id) then
      raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
    end if;
    raise exception 'the password check is missing or has expired: send the password again'
      using errcode = 'PT401', hint = 'invalid_credentials';
  end if;
end;
$$;

COMMENT ON FUNCTION private.reauthenticated(user_id uuid, reauthentication text) IS 'Locks the user''s account and consumes their single-use proof of a password check (private.reauthenticate_finish); PT401 invalid_credentials when it is missing, used, another user''s or older than 60 seconds, invalid_token when the account was deleted meanwhile.';


CREATE FUNCTION private.account_delete(user_id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  account identity.users;
  node uuid;
  sole jsonb;
  member_of uuid[];
  sole_count integer;
begin
  -- One deletion of an account at a time; a second one finds nothing.
  select * into account from identity.users u where u.id = account_delete.user_id for update;
  if account.id is null then
    raise exception 'no such account' using errcode = 'P0002';
  end if;
  select p.node_id into node from app.profiles p where p.id = account.id;

  if node is not null then
    -- The node first: a membership being added (it holds a key-share lock on
    -- the node) commits before this goes on, or waits for it and then fails.
    perform from app.nodes n where n.id = node for update;
    -- The communities it manages, locked in id order (their membership
    -- changes take the same lock, private.tg_community_members__keep_a_manager),
    -- then each counted afresh: a community keeps a manager.
    perform from app.communities c
      where c.id in (select m.community_id from app.community_members m
                      where m.member_node_id = node and m.role = 'manager')
      order by c.id
      for update;
    select jsonb_agg(jsonb_build_object('id', c.id, 'name', c.name) order by c.name, c.id), count(*)
      into sole, sole_count
      from app.communities c
      join app.community_members m on m.community_id = c.id and m.member_node_id = node and m.role = 'manager'
     where not exists (select from app.community_members o
                        where o.community_id = c.id and o.role = 'manager' and o.member_node_id <> node);
    if sole_count > 0 then
      raise exception 'the account is the only manager of % %: make another member a manager first',
                      sole_count, case when sole_count = 1 then 'community' else 'communities' end
        using errcode = 'PT409', hint = 'last_manager_of_communities',
              detail = jsonb_build_object('communities', sole)::text;
    end if;
    member_of := array(select m.community_id from app.community_members m where m.member_node_id = node order by m.community_id);
    -- Integrators: member.deleted, ids only (member.left is not sent for these).
    perform private.webhook_member_deleted(account.id, node, account.email);
  end if;

  -- Every credential ends first, so that open streams and channels close at
  -- once (NOTIFY session_ended). The refresh tokens outlive the account
  -- without it (user_id set null by the delete below), so the sessions' access
  -- tokens stay refused until they expire.
  perform private.end_credentials(account.id);
  update identity.refresh_tokens r set user_agent = null, ip = null where r.user_id = account.id;
  -- What no foreign key ties to the account.
  delete from private.agent_tool_usage a where a.agent_id = account.id;
  -- What agents were answered about the address (placeholders) and the communities they handed it to.
  delete from app.agent_member_joins j
   where j.member_id = account.id
      or j.member_id in (select x.id from app.agent_member_placeholders x where x.email = account.email);
  delete from app.agent_member_placeholders x where x.email = account.email;
  delete from private.password_attempts a where a.email_key = account.email;
  delete from private.auth_failures f
   where (f.scope = 'email' and f.key = account.email)
      or (f.scope = 'email_client' and left(f.key, length(account.email) + 1) = account.email || ' ');
  -- Stored files: a job deletes them (and their bytes).
  perform private.account_files_delete(account.id);
  -- The node: memberships (member counts fall now, in this transaction),
  -- connections on both sides, what agents recorded on it.
  delete from app.nodes n where n.id = node;
  -- The account: identity, profile, hats, check-ins, event registrations,
  -- tasks, links and deals, API tokens and their test results, OAuth grants,
  -- set-password and account links, the calendar feed, MCP sessions and tool
  -- calls, agent ownership both ways, idempotency records, mail not sent.
  delete from identity.users u where u.id = account.id;
  return jsonb_build_object('user_id', account.id, 'node_id', node, 'communities_left', coalesce(cardinality(member_of), 0));
end;
$$;

COMMENT ON FUNCTION private.account_delete(user_id uuid) IS 'Deletes an account and everything of the person, in one transaction: its memberships (member counts fall), connections on both sides, hats, check-ins, event registrations, tasks, links and deals, API tokens, OAuth grants, sessions (ended first: their access tokens, streams and channels stop at once; the revoked refresh tokens stay, without the account, until pruned), calendar feed, MCP sessions and calls, agent ownership both ways, its profile, node and identity (the e-mail can register again); its stored files by a job (private.account_files_delete). Sends member.deleted (ids only) to the webhooks of its communities. PT409 last_manager_of_communities (detail: {communities: [{id, name}]}) while it is the only manager of a community; P0002 for an unknown account. Returns user_id, node_id, communities_left.';


CREATE FUNCTION private.account_files_delete(user_id uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- The job that deletes the objects of the user's folders and then their
  -- bytes; file storage runs it (a job nobody runs yet waits in the queue).
  perform private.enqueue_job('storage_purge',
    jsonb_build_object('folder_owner', 'user', 'id', account_files_delete.user_id),
    job_key => 'storage_purge:user:' || account_files_delete.user_id::text);
end;
$$;

COMMENT ON FUNCTION private.account_files_delete(user_id uuid) IS 'Queues the storage_purge job of a deleted user''s files (payload {folder_owner: user, id}; job key storage_purge:user:<id>), in the deleting transaction. The hook of file storage, whose worker task deletes the objects and their bytes.';


CREATE FUNCTION private.account_export_take(user_id uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  recent integer;
  oldest timestamptz;
begin
  -- One user's exports take turns, so a burst cannot slip past the count.
  perform pg_advisory_xact_lock(hashtextextended('account_export:' || account_export_take.user_id::text, 0));
  select count(*), min(x.exported_at) into recent, oldest
    from private.account_exports x
   where x.user_id = account_export_take.user_id and x.exported_at > now() - interval '1 hour';
  if recent >= 5 then
    raise exception 'at most 5 exports an hour, try again later'
      using errcode = 'PT429', hint = 'rate_limited',
            detail = jsonb_build_object('retry_after',
                       greatest(1, ceil(extract(epoch from oldest + interval '1 hour' - now())))::integer)::text;
  end if;
  delete from private.account_exports x
   where x.user_id = account_export_take.user_id and x.exported_at <= now() - interval '1 hour';
  insert into private.account_exports (user_id) values (account_export_take.user_id);
end;
$$;

COMMENT ON FUNCTION private.account_export_take(user_id uuid) IS 'Counts an export of the user''s data: at most 5 an hour, else PT429 rate_limited with detail {retry_after} (seconds).';


CREATE FUNCTION private.account_sessions_of(user_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(jsonb_agg(jsonb_build_object(
             'id', s.session_id, 'created_at', app.iso(s.created_at), 'last_used_at', app.iso(s.last_used_at),
             'user_agent', s.user_agent, 'ip', s.ip, 'current', s.session_id is not distinct from private.account_session())
           order by s.last_used_at desc, s.session_id), '[]'::jsonb)
      from (select r.session_id, min(r.created_at) as created_at, max(r.created_at) as last_used_at,
                   (array_agg(r.user_agent order by r.created_at desc, r.id desc))[1] as user_agent,
                   (array_agg(r.ip order by r.created_at desc, r.id desc))[1] as ip
              from identity.refresh_tokens r
             where r.user_id = account_sessions_of.user_id
             group by r.session_id
            having bool_or(r.revoked_at is null and r.expires_at > now())) s
  $$;

COMMENT ON FUNCTION private.account_sessions_of(user_id uuid) IS 'The user''s sessions that can still be refreshed, most recently used first, as [{id, created_at, last_used_at, user_agent, ip, current}] (current: the request''s own session).';


CREATE FUNCTION private.account_files(user_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    -- The objects the user uploaded (owner_id), in every bucket.
    select coalesce(jsonb_agg(jsonb_build_object(
             'bucket', o.bucket_id, 'path', o.name, 'size', o.size,
             'content_type', o.content_type, 'created_at', app.iso(o.created_at))
             order by o.bucket_id, o.name), '[]'::jsonb)
      from app.storage_objects o
     where o.owner_id = account_files.user_id
  $$;

COMMENT ON FUNCTION private.account_files(user_id uuid) IS 'The stored files of a user for the export of their data: [{bucket, path, size, content_type, created_at}], every object they uploaded (app.storage_objects.owner_id).';


CREATE FUNCTION private.account_link(token text, purpose text, for_update boolean DEFAULT false) RETURNS identity.account_links
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  link identity.account_links;
begin
  if for_update then
    select * into link from identity.account_links l
     where l.token_hash = identity.token_hash(account_link.token) and l.purpose = account_link.purpose for update;
  else
    select * into link from identity.account_links l
     where l.token_hash = identity.token_hash(account_link.token) and l.purpose = account_link.purpose;
  end if;
  if link.id is null or link.used_at is not null or link.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  return link;
end;
$$;

COMMENT ON FUNCTION private.account_link(token text, purpose text, for_update boolean) IS 'The account link of a token for a purpose while it is usable (not used, replaced or expired), locked when for_update; PT400 invalid_link otherwise.';


CREATE FUNCTION private.reauthenticate_finish(user_id uuid, attempt text, matched boolean, new_hash text) RETURNS TABLE(status text, reauthentication text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  checked record;
  proof text := identity.new_token();
begin
  select * into strict checked from private.password_attempt_finish('reauthenticate', attempt, matched, new_hash);
  if checked.status = 'expired' and not exists (select from identity.users u where u.id = reauthenticate_finish.user_id) then
    -- The account was deleted meanwhile (its attempts with it).
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  if checked.status <> 'ok' then
    -- Not raised: a failure must be counted, so this transaction commits.
    return query select checked.status, null::text;
    return;
  end if;
  delete from identity.reauthentications r where r.user_id = checked.user_id and r.expires_at <= now();
  insert into identity.reauthentications (proof_hash, user_id, expires_at)
    values (identity.token_hash(proof), checked.user_id, now() + interval '60 seconds');
  return query select 'ok'::text, proof;
end;
$$;

COMMENT ON FUNCTION private.reauthenticate_finish(user_id uuid, attempt text, matched boolean, new_hash text) IS 'Second half of a signed-in user''s password check, run by the processes'' own role after comparing the password with the hash of private.reauthenticate_start: status ok (reauthentication: a single-use proof, valid 60 seconds, that the account''s functions consume), invalid (counted as a failed sign-in) or expired; PT401 invalid_token when the account was deleted meanwhile.';


CREATE FUNCTION private.reauthenticate_start(user_id uuid, session_id uuid, client_ip text, bcrypt_cost integer, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer, password_given boolean DEFAULT true) RETURNS TABLE(status text, retry_after integer, attempt text, password_hash text, rehash boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  account identity.users;
begin
  -- Only the access token of a sign-in manages an account (private.account_caller).
  if reauthenticate_start.session_id is null then
    raise exception 'an account is managed with the access token of a sign-in, not with an API token or an agent''s credential'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
  perform private.check_session(reauthenticate_start.session_id);
  select * into account from identity.users u where u.id = reauthenticate_start.user_id;
  if account.id is null then
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  if account.password_hash is null then
    return query select 'no_password'::text, 0, null::text, null::text, false;
    return;
  end if;
  if not password_given then
    return query select 'password_required'::text, 0, null::text, null::text, false;
    return;
  end if;
  -- A sign-in attempt of the account's own e-mail: the login throttle counts it.
  return query select * from private.password_attempt_start('reauthenticate', account.email, client_ip, bcrypt_cost,
                                                            max_failures_per_email_client, max_failures_per_email,
                                                            max_failures_per_ip, window_seconds);
end;
$$;

COMMENT ON FUNCTION private.reauthenticate_start(user_id uuid, session_id uuid, client_ip text, bcrypt_cost integer, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer, password_given boolean) IS 'First half of a signed-in user''s password check (deleting the account, changing its e-mail or password), run by the processes'' own role for the user and session of a verified access token (PT403 forbidden without a session: an API token; PT401 session_ended): a sign-in attempt of the account''s e-mail at door reauthenticate (private.password_attempt_start: throttled, or check with the hash to compare), or status no_password (the account has none: it confirms by e-mail) or password_required (password_given false for an account that has one).';
