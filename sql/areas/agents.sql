-- =============================================================================
-- The agent interface (MCP): tools, agent members, sessions, limits, audit, OAuth
-- =============================================================================
-- The MCP tool server's rules. The agent is the user who owns the credential
-- (a personal API token, or an OAuth access token); every tool is one
-- api.mcp_* function called as that user:
--
--   - a tool reaches only communities the caller manages; any other id, and
--     an unknown one, is the same PT404 not_found;
--   - a member another agent created is invisible (the same PT404);
--   - a community-scoped API token is refused (PT403).
--
-- Members an agent creates are accounts without a password
-- (app.agent_members records the agent; their signup data lives on their node,
-- readable by that agent only). For an address that already has an account
-- the agent gets a placeholder (app.agent_member_placeholders) that the
-- member tools answer alike, and a member joins the communities its agent
-- handed it to only when the person claims the account
-- (app.agent_member_joins, private.agent_member_claim): nothing an agent is
-- told says whether an address has an account. Write tools are limited per agent per hour
-- (private.agent_tool_limits; a sliding window serialised per agent and tool),
-- requests per client address per minute (private.mcp_admit), and every call is
-- recorded with secrets redacted (app.mcp_tool_calls). The OAuth 2.0 storage
-- (identity.oauth_*: clients, requests, codes, tokens; hashed) is here too.
--
-- Code: mcp-server/tools.ts, mcp-server/oauth.ts, gateway/routes/agent-calls.ts
-- pgTAP: supabase/tests/agents.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.agent_members (
    member_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_members_attributes_check CHECK ((jsonb_typeof(attributes) = 'object'::text)),
    CONSTRAINT agent_members_pkey PRIMARY KEY (member_id),
    CONSTRAINT agent_members_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES identity.users(id) ON DELETE CASCADE,
    CONSTRAINT agent_members_member_id_fkey FOREIGN KEY (member_id) REFERENCES app.profiles(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.agent_members IS 'Members created through the agent interface: which agent (user) created them, and the attributes it merged.';
ALTER TABLE app.agent_members ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.agent_members TO authenticated;

CREATE TABLE app.mcp_tool_calls (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    user_id uuid NOT NULL,
    credential_kind text NOT NULL,
    credential_id uuid,
    client_id text,
    session_id uuid,
    tool text NOT NULL,
    arguments jsonb,
    outcome text NOT NULL,
    error_message text,
    duration_ms numeric(12,3) NOT NULL,
    called_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT mcp_tool_calls_credential_kind_check CHECK ((credential_kind = ANY (ARRAY['api_token'::text, 'oauth'::text]))),
    CONSTRAINT mcp_tool_calls_duration_ms_check CHECK ((duration_ms >= (0)::numeric)),
    CONSTRAINT mcp_tool_calls_pkey PRIMARY KEY (id),
    CONSTRAINT mcp_tool_calls_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.mcp_tool_calls IS 'Every MCP tool call: who (user and credential), which tool, arguments (secrets redacted), outcome (ok or the error code), duration.';
COMMENT ON COLUMN app.mcp_tool_calls.client_id IS 'The OAuth client (for OAuth access tokens).';
ALTER TABLE app.mcp_tool_calls ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.mcp_tool_calls TO authenticated;

CREATE TABLE private.agent_tool_limits (
    tool text NOT NULL,
    per_hour integer NOT NULL,
    CONSTRAINT agent_tool_limits_per_hour_check CHECK ((per_hour >= 0)),
    CONSTRAINT agent_tool_limits_pkey PRIMARY KEY (tool)
);
COMMENT ON TABLE private.agent_tool_limits IS 'How many successful calls of a write tool one agent may make per hour (docs/agents.md). Tools not listed are unlimited.';

CREATE TABLE private.agent_tool_usage (
    agent_id uuid NOT NULL,
    tool text NOT NULL,
    called_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);
COMMENT ON TABLE private.agent_tool_usage IS 'One row per counted tool call of the last hour (older rows are pruned as calls arrive).';

CREATE TABLE private.mcp_request_counts (
    client_ip text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    requests integer NOT NULL,
    CONSTRAINT mcp_request_counts_pkey PRIMARY KEY (client_ip, window_start)
);
COMMENT ON TABLE private.mcp_request_counts IS 'Requests to /mcp (and the OAuth endpoints) per client IP per minute.';

CREATE TABLE private.mcp_sessions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    client_name text,
    client_version text,
    protocol_version text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT mcp_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT mcp_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE private.mcp_sessions IS 'MCP sessions (Mcp-Session-Id), shared by every MCP process.';

CREATE TABLE app.agent_member_joins (
    member_id uuid NOT NULL,
    community_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_member_joins_pkey PRIMARY KEY (member_id, community_id),
    CONSTRAINT agent_member_joins_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES identity.users(id) ON DELETE CASCADE,
    CONSTRAINT agent_member_joins_community_id_fkey FOREIGN KEY (community_id) REFERENCES app.communities(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.agent_member_joins IS 'Communities an agent handed its member to (add_member_to_community): the member joins them when the person claims the account.';
ALTER TABLE app.agent_member_joins ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.agent_member_placeholders (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    node_id uuid DEFAULT gen_random_uuid() NOT NULL,
    agent_id uuid NOT NULL,
    email text NOT NULL,
    name text NOT NULL,
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_member_placeholders_attributes_check CHECK ((jsonb_typeof(attributes) = 'object'::text)),
    CONSTRAINT agent_member_placeholders_agent_email_key UNIQUE (agent_id, email),
    CONSTRAINT agent_member_placeholders_pkey PRIMARY KEY (id),
    CONSTRAINT agent_member_placeholders_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.agent_member_placeholders IS 'What create_member answered an agent for an address that already had an account: a member object answered as a created member is (get_member, set_member_attributes, add_member_to_community), which reaches no account.';
ALTER TABLE app.agent_member_placeholders ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.oauth_clients (
    client_id text NOT NULL,
    client_secret_hash bytea,
    client_secret_expires_at bigint DEFAULT 0 NOT NULL,
    client_id_issued_at bigint NOT NULL,
    metadata jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT oauth_clients_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT oauth_clients_pkey PRIMARY KEY (client_id)
);
COMMENT ON TABLE identity.oauth_clients IS 'OAuth clients registered dynamically (RFC 7591). metadata holds what the client registered, never the secret.';
ALTER TABLE identity.oauth_clients ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.oauth_codes (
    code_hash bytea NOT NULL,
    client_id text NOT NULL,
    user_id uuid NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    scopes text[] NOT NULL,
    resource text,
    family_id uuid DEFAULT gen_random_uuid() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    CONSTRAINT oauth_codes_pkey PRIMARY KEY (code_hash),
    CONSTRAINT oauth_codes_client_id_fkey FOREIGN KEY (client_id) REFERENCES identity.oauth_clients(client_id) ON DELETE CASCADE,
    CONSTRAINT oauth_codes_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.oauth_codes IS 'Authorization codes (hashed), single-use.';
ALTER TABLE identity.oauth_codes ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.oauth_requests (
    request_hash bytea NOT NULL,
    client_id text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    state text,
    scopes text[] NOT NULL,
    resource text,
    failures integer DEFAULT 0 NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT oauth_requests_pkey PRIMARY KEY (request_hash),
    CONSTRAINT oauth_requests_client_id_fkey FOREIGN KEY (client_id) REFERENCES identity.oauth_clients(client_id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.oauth_requests IS 'Authorization requests waiting for the user to sign in and consent.';
ALTER TABLE identity.oauth_requests ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.oauth_tokens (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    token_hash bytea NOT NULL,
    kind text NOT NULL,
    client_id text NOT NULL,
    user_id uuid NOT NULL,
    family_id uuid NOT NULL,
    scopes text[] NOT NULL,
    resource text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT oauth_tokens_kind_check CHECK ((kind = ANY (ARRAY['access'::text, 'refresh'::text]))),
    CONSTRAINT oauth_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT oauth_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT oauth_tokens_client_id_fkey FOREIGN KEY (client_id) REFERENCES identity.oauth_clients(client_id) ON DELETE CASCADE,
    CONSTRAINT oauth_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.oauth_tokens IS 'OAuth access and refresh tokens (hashed). One family per authorization; rotation keeps the family.';
ALTER TABLE identity.oauth_tokens ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX agent_members_agent_idx ON app.agent_members USING btree (agent_id, created_at);
CREATE INDEX mcp_tool_calls_called_idx ON app.mcp_tool_calls USING btree (called_at);
CREATE INDEX mcp_tool_calls_user_idx ON app.mcp_tool_calls USING btree (user_id, id DESC);
CREATE INDEX agent_tool_usage_idx ON private.agent_tool_usage USING btree (agent_id, tool, called_at);
CREATE INDEX mcp_sessions_user_idx ON private.mcp_sessions USING btree (user_id);
CREATE INDEX agent_member_joins_agent_idx ON app.agent_member_joins USING btree (agent_id);
CREATE INDEX agent_member_placeholders_email_idx ON app.agent_member_placeholders USING btree (email);
CREATE INDEX oauth_tokens_family_idx ON identity.oauth_tokens USING btree (family_id);
CREATE INDEX oauth_tokens_user_idx ON identity.oauth_tokens USING btree (user_id);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.agent_members FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.agent_member_placeholders FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Agents see the members they created" ON app.agent_members FOR SELECT TO authenticated USING ((agent_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users read their own agent's tool calls" ON app.mcp_tool_calls FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.mcp_community_profile(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.mcp_agent();
  return private.mcp_community_json(private.mcp_managed_community(community_id));
end;
$$;

COMMENT ON FUNCTION api.mcp_community_profile(community_id uuid) IS 'MCP community_profile: profile, member count, managers, tags, sandbox/draft flags of a community the caller manages. PT404 not_found otherwise.';
GRANT EXECUTE ON FUNCTION api.mcp_community_profile(community_id uuid) TO authenticated;

CREATE FUNCTION api.mcp_community_events(community_id uuid, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  community app.communities;
begin
  perform private.mcp_agent();
  community := private.mcp_managed_community(community_id);
  return jsonb_build_object(
    'community_id', community.id,
    'upcoming', (
      select coalesce(jsonb_agg(item order by starts_at, id), '[]') from (
        select e.starts_at, e.id,
               private.event_json(e, public_url) || jsonb_build_object('status', private.event_status(e.starts_at, e.ends_at)) as item
          from app.events e
         where e.community_id = community.id
           and private.event_effective_end(e.starts_at, e.ends_at) >= now()
         order by e.starts_at, e.id
         limit 100) upcoming),
    'past', (
      select coalesce(jsonb_agg(item order by starts_at desc, id), '[]') from (
        select e.starts_at, e.id,
               private.event_json(e, public_url) || jsonb_build_object('status', 'past') as item
          from app.events e
         where e.community_id = community.id
           and private.event_effective_end(e.starts_at, e.ends_at) < now()
         order by e.starts_at desc, e.id
         limit 100) past));
end;
$$;

COMMENT ON FUNCTION api.mcp_community_events(community_id uuid, public_url text) IS 'MCP list_community_events: upcoming/ongoing (soonest first) and past (latest first) events of a managed community, 100 of each at most, with status.';
GRANT EXECUTE ON FUNCTION api.mcp_community_events(community_id uuid, public_url text) TO authenticated;

CREATE FUNCTION api.mcp_event_get(event_id uuid, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_event app.events;
begin
  perform private.mcp_agent();
  select e.* into found_event
    from app.events e
   where (e.id = event_id or e.node_id = event_id)
     and exists (select from app.community_members m
                  where m.community_id = e.community_id and m.role = 'manager'
                    and m.member_node_id = app.my_node_id())
   limit 1;
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.event_json(found_event, public_url)
         || jsonb_build_object('status', private.event_status(found_event.starts_at, found_event.ends_at),
                               'community_id', found_event.community_id);
end;
$$;

COMMENT ON FUNCTION api.mcp_event_get(event_id uuid, public_url text) IS 'MCP get_event: one event (id or node id) of a community the caller manages, with status. PT404 not_found otherwise.';
GRANT EXECUTE ON FUNCTION api.mcp_event_get(event_id uuid, public_url text) TO authenticated;

CREATE FUNCTION api.mcp_onboarding_communities() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.mcp_agent();
  return jsonb_build_object('communities', (
    select coalesce(jsonb_agg(private.mcp_community_json(c) order by lower(c.name), c.id), '[]')
      from app.communities c
      join app.community_members m on m.community_id = c.id
     where m.member_node_id = app.my_node_id() and m.role = 'manager' and c.accepts_handoffs));
end;
$$;
COMMENT ON FUNCTION api.mcp_onboarding_communities() IS 'MCP search_onboarding_communities: the communities the caller manages that accept onboarding hand-offs, by name.';
GRANT EXECUTE ON FUNCTION api.mcp_onboarding_communities() TO authenticated;

CREATE FUNCTION api.mcp_member_get(member_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.mcp_agent();
  return private.mcp_member_json(private.mcp_member_of_agent(mcp_member_get.member_id, false));
end;
$$;

COMMENT ON FUNCTION api.mcp_member_get(member_id uuid) IS 'MCP get_member: a member the caller created (user id or node id; a placeholder alike): profile, signup data, attributes, the communities it was handed to. PT404 not_found otherwise.';
GRANT EXECUTE ON FUNCTION api.mcp_member_get(member_id uuid) TO authenticated;

CREATE FUNCTION api.mcp_member_create(email text, name text, data jsonb, public_url text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  agent uuid := private.mcp_agent();
  normalised_email text := lower(btrim(mcp_member_create.email));
  chosen_name text := nullif(btrim(mcp_member_create.name), '');
  existing identity.users;
  new_member uuid;
  placeholder uuid;
  recent_links integer;
begin
  if data is not null and jsonb_typeof(data) <> 'object' then
    raise exception 'data must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  perform private.agent_quota_take('create_member');
  -- Creators of one e-mail (agents, platform registrations) take turns.
  perform pg_advisory_xact_lock(hashtextextended('identity.users:' || coalesce(normalised_email, ''), 0));
  select u.* into existing from identity.users u where u.email = normalised_email;
  if existing.id is null then
    new_member := private.create_account(mcp_member_create.email, null, mcp_member_create.name);
    update app.nodes n set data = coalesce(mcp_member_create.data, '{}')
      from app.profiles p
     where p.id = new_member and n.id = p.node_id;
    insert into app.agent_members (member_id, agent_id) values (new_member, agent);
    perform private.queue_password_email(new_member, 'invite', public_url);
    return private.mcp_member_json(new_member) || jsonb_build_object('set_password_email', 'queued');
  end if;

  -- The account exists. The same checks a new account would get.
  if chosen_name is not null and length(chosen_name) > 200 then
    raise exception 'name must be at most 200 characters' using errcode = 'PT400', hint = 'invalid_name';
  end if;
  select count(*) into recent_links
    from app.email_outbox o
   where o.user_id = existing.id and o.purpose in ('invite', 'recover')
     and o.created_at > now() - interval '1 hour';
  if recent_links < 5 then
    perform private.queue_password_email(existing.id,
                                         case when existing.password_hash is null then 'invite' else 'recover' end,
                                         public_url);
  end if;
  if exists (select from app.agent_members a where a.member_id = existing.id and a.agent_id = agent) then
    return private.mcp_member_json(existing.id) || jsonb_build_object('set_password_email', 'queued');
  end if;
  -- Anyone else's account: a placeholder, which the member tools answer as
  -- they answer a member the agent created (the same placeholder again for
  -- the same address), and which reaches no account.
  insert into app.agent_member_placeholders as p (agent_id, email, name, data)
    values (agent, normalised_email, coalesce(chosen_name, split_part(normalised_email, '@', 1)), coalesce(mcp_member_create.data, '{}'))
    on conflict on constraint agent_member_placeholders_agent_email_key do update set email = excluded.email
    returning p.id into placeholder;
  return private.mcp_member_json(placeholder) || jsonb_build_object('set_password_email', 'queued');
end;
$$;

COMMENT ON FUNCTION api.mcp_member_create(email text, name text, data jsonb, public_url text) IS 'MCP create_member: a password-less account (user, profile, node with data), owned by the calling agent; queues the set-password e-mail. An e-mail that has an account (not the agent''s own member) is answered the same way with a placeholder member (app.agent_member_placeholders: ids that name nothing, which the member tools answer as they answer a created member), and its owner gets a link. PT429 rate_limited.';
GRANT EXECUTE ON FUNCTION api.mcp_member_create(email text, name text, data jsonb, public_url text) TO authenticated;

CREATE FUNCTION api.mcp_member_set_attributes(member_id uuid, attributes jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  member uuid;
  removed text[];
begin
  perform private.mcp_agent();
  if attributes is null or jsonb_typeof(attributes) <> 'object' then
    raise exception 'attributes must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  member := private.mcp_member_of_agent(mcp_member_set_attributes.member_id);
  perform private.agent_quota_take('set_member_attributes');
  removed := array(select k.key from jsonb_each(mcp_member_set_attributes.attributes) k where k.value = 'null'::jsonb);
  update app.agent_members a
     set attributes = (a.attributes || mcp_member_set_attributes.attributes) - removed
   where a.member_id = member;
  update app.agent_member_placeholders p
     set attributes = (p.attributes || mcp_member_set_attributes.attributes) - removed
   where p.id = member;
  return private.mcp_member_json(member);
end;
$$;

COMMENT ON FUNCTION api.mcp_member_set_attributes(member_id uuid, attributes jsonb) IS 'MCP set_member_attributes: merges attributes (top-level keys; null removes a key) onto a member the caller created (or a placeholder). PT404 not_found; PT429 rate_limited.';
GRANT EXECUTE ON FUNCTION api.mcp_member_set_attributes(member_id uuid, attributes jsonb) TO authenticated;

CREATE FUNCTION api.mcp_member_add_to_community(member_id uuid, community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  member uuid;
  community app.communities;
  asked timestamptz;
  added boolean := true;
begin
  perform private.mcp_agent();
  member := private.mcp_member_of_agent(mcp_member_add_to_community.member_id);
  community := private.mcp_managed_community(mcp_member_add_to_community.community_id);
  perform private.agent_quota_take('add_member_to_community');
  if exists (select from app.agent_members a join app.profiles p on p.id = a.member_id where a.member_id = member and p.node_id is null) then
    raise exception 'the member has no node' using errcode = 'PT409', hint = 'user_has_no_node';
  end if;
  -- The member joins when the person claims the account (private.agent_member_claim):
  -- until then nothing of the community changes, for a member and a placeholder alike.
  insert into app.agent_member_joins as j (member_id, community_id, agent_id)
    values (member, community.id, auth.uid())
    on conflict on constraint agent_member_joins_pkey do nothing
    returning j.created_at into asked;
  if asked is null then
    added := false;
    select j.created_at into asked from app.agent_member_joins j where j.member_id = member and j.community_id = community.id;
  end if;
  return jsonb_build_object(
    'member_id', member,
    'community_id', community.id,
    'role', 'member',
    'joined_at', app.iso(asked),
    'added', added,
    'member_count', (select c.member_count from app.communities c where c.id = community.id));
end;
$$;

COMMENT ON FUNCTION api.mcp_member_add_to_community(member_id uuid, community_id uuid) IS 'MCP add_member_to_community: hands a member the caller created to a community the caller manages; the member joins it when the person claims the account (sets a password: private.agent_member_claim), so the community, its member count and its roster do not change before then. joined_at: when it was asked. PT404 not_found for either; PT409 user_has_no_node; PT429 rate_limited.';
GRANT EXECUTE ON FUNCTION api.mcp_member_add_to_community(member_id uuid, community_id uuid) TO authenticated;

CREATE FUNCTION api.mcp_community_set_onboarding(community_id uuid, accepts_handoffs boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  community app.communities;
begin
  perform private.mcp_agent();
  if accepts_handoffs is null then
    raise exception 'accepts_handoffs must be true or false' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  community := private.mcp_managed_community(community_id);
  update app.communities c set accepts_handoffs = mcp_community_set_onboarding.accepts_handoffs
   where c.id = community.id
   returning c.* into community;
  return private.mcp_community_json(community);
end;
$$;

COMMENT ON FUNCTION api.mcp_community_set_onboarding(community_id uuid, accepts_handoffs boolean) IS 'MCP set_onboarding_opt_in: opts a community the caller manages in or out of onboarding hand-offs. PT404 not_found otherwise.';
GRANT EXECUTE ON FUNCTION api.mcp_community_set_onboarding(community_id uuid, accepts_handoffs boolean) TO authenticated;

CREATE FUNCTION api.mcp_tool_calls_mine(page_limit integer DEFAULT 50, before_id bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  return jsonb_build_object('data', (
    select coalesce(jsonb_agg(private.mcp_call_json(c) order by c.id desc), '[]')
      from (select * from app.mcp_tool_calls t
             where t.user_id = auth.uid() and (before_id is null or t.id < before_id)
             order by t.id desc
             limit page_limit) c));
end;
$$;

COMMENT ON FUNCTION api.mcp_tool_calls_mine(page_limit integer, before_id bigint) IS 'GET /api/docs/agent-calls: the tool calls made with the caller''s credentials through the agent interface, newest first.';
GRANT EXECUTE ON FUNCTION api.mcp_tool_calls_mine(page_limit integer, before_id bigint) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.mcp_agent() RETURNS uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  agent uuid := auth.uid();
  token uuid := nullif(auth.jwt() ->> 'token_id', '')::uuid;
begin
  if agent is null then
    raise exception 'a personal credential is required' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if nullif(auth.jwt() ->> 'token_community_id', '') is not null then
    raise exception 'community-scoped tokens cannot use the agent interface; use a personal token'
      using errcode = 'PT403', hint = 'community_scope_violation';
  end if;
  if token is not null and not exists (
    select from app.api_tokens t
     where t.id = token and t.user_id = agent and t.active
       and (t.expires_at is null or t.expires_at > now())
       and private.api_token_path_allowed(t.permissions, '/mcp')
  ) then
    raise exception 'this API token''s permissions do not include /mcp' using errcode = 'PT403', hint = 'forbidden';
  end if;
  return agent;
end;
$$;
COMMENT ON FUNCTION private.mcp_agent() IS 'The calling agent (auth.uid()); PT401 when signed out, PT403 for a community-scoped token or an API token whose permissions do not match /mcp (or that has ended).';
GRANT EXECUTE ON FUNCTION private.mcp_agent() TO authenticated;

CREATE FUNCTION private.mcp_community_json(c app.communities) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select app.community_json(c) || jsonb_build_object(
      'node_id', c.node_id,
      'is_sandbox', c.is_sandbox,
      'is_draft', c.is_draft,
      'accepts_handoffs', c.accepts_handoffs,
      'managers', (
        select coalesce(jsonb_agg(jsonb_build_object('id', m.member_node_id, 'name', app.node_display_name(m.member_node_id))
                                  order by m.joined_at, m.member_node_id), '[]')
          from app.community_members m
         where m.community_id = c.id and m.role = 'manager'))
  $$;

COMMENT ON FUNCTION private.mcp_community_json(c app.communities) IS 'A community as community_profile shows it: public fields, node_id, flags (sandbox, draft, accepts_handoffs) and managers.';
GRANT EXECUTE ON FUNCTION private.mcp_community_json(c app.communities) TO authenticated;

CREATE FUNCTION private.mcp_managed_community(community_id uuid) RETURNS app.communities
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_community app.communities;
begin
  select c.* into found_community
    from app.communities c
    join app.community_members m on m.community_id = c.id
   where c.id = mcp_managed_community.community_id
     and m.member_node_id = app.my_node_id()
     and m.role = 'manager';
  if found_community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return found_community;
end;
$$;

COMMENT ON FUNCTION private.mcp_managed_community(community_id uuid) IS 'The community if the signed-in user manages it; PT404 not_found otherwise (unknown and unmanaged look the same).';
GRANT EXECUTE ON FUNCTION private.mcp_managed_community(community_id uuid) TO authenticated;

CREATE FUNCTION private.mcp_member_json(member_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    -- The communities it was handed to (and, for members added before joins
    -- waited for the claim, those its node is in), of those the caller manages.
    with handed as (
      select c.id, c.name, 'member'::text as role, j.created_at as joined_at
        from app.agent_member_joins j join app.communities c on c.id = j.community_id
       where j.member_id = mcp_member_json.member_id
      union
      select c.id, c.name, cm.role, cm.joined_at
        from app.profiles p
        join app.community_members cm on cm.member_node_id = p.node_id
        join app.communities c on c.id = cm.community_id
       where p.id = mcp_member_json.member_id
    ), communities as (
      select coalesce(jsonb_agg(jsonb_build_object('community_id', h.id, 'name', h.name, 'role', h.role, 'joined_at', app.iso(h.joined_at))
                                order by h.joined_at, h.id), '[]') as list
        from handed h
       where exists (select from app.community_members mine
                      where mine.community_id = h.id and mine.role = 'manager'
                        and mine.member_node_id = app.my_node_id())
    )
    select jsonb_build_object(
      'id', p.id,
      'node_id', p.node_id,
      'email', u.email,
      'name', p.name,
      'data', coalesce(n.data, '{}'),
      'attributes', a.attributes,
      'password_set', u.password_hash is not null,
      'communities', (select list from communities),
      'created_at', app.iso(a.created_at),
      'updated_at', app.iso(a.updated_at))
    from app.agent_members a
    join app.profiles p on p.id = a.member_id
    join identity.users u on u.id = a.member_id
    left join app.nodes n on n.id = p.node_id
   where a.member_id = mcp_member_json.member_id
    union all
    select jsonb_build_object(
      'id', x.id,
      'node_id', x.node_id,
      'email', x.email,
      'name', x.name,
      'data', x.data,
      'attributes', x.attributes,
      'password_set', false,
      'communities', (select list from communities),
      'created_at', app.iso(x.created_at),
      'updated_at', app.iso(x.updated_at))
    from app.agent_member_placeholders x
   where x.id = mcp_member_json.member_id
  $$;

COMMENT ON FUNCTION private.mcp_member_json(member_id uuid) IS 'The Agent-interface member object of a member an agent created, or of a placeholder in the same shape: id, node_id, email, name, data, attributes, password_set, communities (handed to, or joined; of those the caller manages), timestamps.';


CREATE FUNCTION private.mcp_member_of_agent(member_ref uuid, for_update boolean DEFAULT true) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_member uuid;
begin
  if for_update then
    select a.member_id into found_member
      from app.agent_members a
      join app.profiles p on p.id = a.member_id
     where (a.member_id = member_ref or p.node_id = member_ref) and a.agent_id = auth.uid()
     limit 1
     for update of a;
    if found_member is null then
      select x.id into found_member
        from app.agent_member_placeholders x
       where (x.id = member_ref or x.node_id = member_ref) and x.agent_id = auth.uid()
       limit 1
       for update;
    end if;
  else
    select a.member_id into found_member
      from app.agent_members a
      join app.profiles p on p.id = a.member_id
     where (a.member_id = member_ref or p.node_id = member_ref) and a.agent_id = auth.uid()
     limit 1;
    if found_member is null then
      select x.id into found_member
        from app.agent_member_placeholders x
       where (x.id = member_ref or x.node_id = member_ref) and x.agent_id = auth.uid()
       limit 1;
    end if;
  end if;
  if found_member is null then
    raise exception 'member not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return found_member;
end;
$$;

COMMENT ON FUNCTION private.mcp_member_of_agent(member_ref uuid, for_update boolean) IS 'The id of the member (by user id or node id) the signed-in agent created, or of its placeholder (by its id or node id), locked when for_update; PT404 not_found otherwise (another agent''s, a claimed account, an unknown id).';
GRANT EXECUTE ON FUNCTION private.mcp_member_of_agent(member_ref uuid, for_update boolean) TO authenticated;

CREATE FUNCTION private.agent_quota_take(tool text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  agent uuid := auth.uid();
  allowance integer;
  used integer;
  oldest timestamptz;
begin
  select l.per_hour into allowance from private.agent_tool_limits l where l.tool = agent_quota_take.tool;
  if allowance is null then
    return;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('agent_quota:' || agent::text || ':' || agent_quota_take.tool, 0));
  delete from private.agent_tool_usage u
   where u.agent_id = agent and u.tool = agent_quota_take.tool and u.called_at <= now() - interval '1 hour';
  select count(*), min(u.called_at) into used, oldest
    from private.agent_tool_usage u
   where u.agent_id = agent and u.tool = agent_quota_take.tool;
  if used >= allowance then
    raise exception '% is limited to % calls per hour; retry in % seconds', tool, allowance,
      greatest(1, ceil(extract(epoch from (oldest + interval '1 hour' - now()))))::integer
      using errcode = 'PT429', hint = 'rate_limited';
  end if;
  insert into private.agent_tool_usage (agent_id, tool) values (agent, agent_quota_take.tool);
end;
$$;

COMMENT ON FUNCTION private.agent_quota_take(tool text) IS 'Counts one call of a limited write tool for the signed-in agent; PT429 rate_limited past private.agent_tool_limits in the last hour.';
GRANT EXECUTE ON FUNCTION private.agent_quota_take(tool text) TO authenticated;

CREATE FUNCTION private.agent_member_claim(user_id uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  node uuid;
begin
  -- The communities an agent handed the member to: joined now.
  select p.node_id into node from app.profiles p where p.id = agent_member_claim.user_id;
  if node is not null then
    insert into app.community_members (community_id, member_node_id, role)
      select j.community_id, node, 'member' from app.agent_member_joins j where j.member_id = agent_member_claim.user_id
      on conflict on constraint community_members_pkey do nothing;
  end if;
  delete from app.agent_member_joins j where j.member_id = agent_member_claim.user_id;
  -- The agent that created it no longer owns it.
  delete from app.agent_members a where a.member_id = agent_member_claim.user_id;
end;
$$;

COMMENT ON FUNCTION private.agent_member_claim(user_id uuid) IS 'The person claimed the account (set a password through a set-password or recovery link): it joins the communities its agent handed it to, and the agent no longer owns it (every member tool answers not_found for it).';


CREATE FUNCTION private.mcp_call_json(c app.mcp_tool_calls) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object('id', c.id, 'tool', c.tool, 'arguments', c.arguments, 'outcome', c.outcome,
                              'error_message', c.error_message, 'duration_ms', c.duration_ms,
                              'credential_kind', c.credential_kind, 'credential_id', c.credential_id,
                              'client_id', c.client_id, 'session_id', c.session_id, 'called_at', app.iso(c.called_at))
  $$;

GRANT EXECUTE ON FUNCTION private.mcp_call_json(c app.mcp_tool_calls) TO authenticated;

CREATE FUNCTION private.mcp_admit(client_ip text, per_minute integer, session_id uuid DEFAULT NULL::uuid) RETURNS TABLE(allowed boolean, request_limit integer, remaining integer, reset_at timestamp with time zone, session_user_id uuid)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  this_window timestamptz := date_trunc('minute', now());
  counted integer;
  owner uuid;
begin
  insert into private.mcp_request_counts as r (client_ip, window_start, requests)
    values (mcp_admit.client_ip, this_window, 1)
    on conflict on constraint mcp_request_counts_pkey do update set requests = r.requests + 1
    returning r.requests into counted;
  if mcp_admit.session_id is not null then
    update private.mcp_sessions s
       set last_seen_at = case when s.last_seen_at < now() - interval '1 minute' then now() else s.last_seen_at end
     where s.id = mcp_admit.session_id
       and s.ended_at is null
       and s.last_seen_at > now() - private.mcp_session_idle_limit()
    returning s.user_id into owner;
  end if;
  return query select counted <= per_minute, per_minute, greatest(per_minute - counted, 0),
                      this_window + interval '1 minute', owner;
end;
$$;

COMMENT ON FUNCTION private.mcp_admit(client_ip text, per_minute integer, session_id uuid) IS 'Counts a request of a client IP (per-minute window) and returns whether it is within per_minute, plus the owner of the named live session.';


CREATE FUNCTION private.mcp_prune() RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    delete from private.mcp_request_counts where window_start < now() - interval '5 minutes';
    delete from private.mcp_sessions
     where coalesce(ended_at, last_seen_at + private.mcp_session_idle_limit()) < now() - interval '7 days';
    delete from private.agent_tool_usage where called_at < now() - interval '1 hour';
  $$;
COMMENT ON FUNCTION private.mcp_prune() IS 'Deletes expired request counts, long-dead sessions and stale quota rows.';


CREATE FUNCTION private.mcp_record_call(user_id uuid, credential_kind text, credential_id uuid, client_id text, session_id uuid, tool text, arguments jsonb, outcome text, error_message text, duration_ms numeric) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    insert into app.mcp_tool_calls (user_id, credential_kind, credential_id, client_id, session_id, tool, arguments,
                                    outcome, error_message, duration_ms)
      values (user_id, credential_kind, credential_id, left(client_id, 200), session_id, left(tool, 100),
              private.json_capped(private.redact_secrets(arguments)), left(outcome, 100), left(error_message, 1000),
              greatest(duration_ms, 0))
  $$;

COMMENT ON FUNCTION private.mcp_record_call(user_id uuid, credential_kind text, credential_id uuid, client_id text, session_id uuid, tool text, arguments jsonb, outcome text, error_message text, duration_ms numeric) IS 'Records one MCP tool call in the audit log (arguments redacted, then capped at 16 KB by private.json_capped).';


CREATE FUNCTION private.mcp_session_end(session_id uuid, user_id uuid) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with ended as (
      update private.mcp_sessions s set ended_at = now()
       where s.id = mcp_session_end.session_id and s.user_id = mcp_session_end.user_id and s.ended_at is null
      returning 1)
    select exists (select from ended)
  $$;

COMMENT ON FUNCTION private.mcp_session_end(session_id uuid, user_id uuid) IS 'Ends a live session of the user (DELETE /mcp); false when there is none.';


CREATE FUNCTION private.mcp_session_idle_limit() RETURNS interval
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select interval '24 hours'
  $$;


CREATE FUNCTION private.mcp_session_open(user_id uuid, client_name text, client_version text, protocol_version text) RETURNS uuid
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    insert into private.mcp_sessions (user_id, client_name, client_version, protocol_version)
      values (user_id, left(client_name, 200), left(client_version, 100), left(protocol_version, 20))
      returning id
  $$;

COMMENT ON FUNCTION private.mcp_session_open(user_id uuid, client_name text, client_version text, protocol_version text) IS 'Starts an MCP session for a user (at initialize); returns its id.';


CREATE FUNCTION private.oauth_client_get(client_id text) RETURNS TABLE(metadata jsonb, has_secret boolean, client_secret_expires_at bigint, client_id_issued_at bigint)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select c.metadata, c.client_secret_hash is not null, c.client_secret_expires_at, c.client_id_issued_at
      from identity.oauth_clients c
     where c.client_id = oauth_client_get.client_id
  $$;

COMMENT ON FUNCTION private.oauth_client_get(client_id text) IS 'A registered client''s metadata and whether it has a secret.';


CREATE FUNCTION private.oauth_client_register(client_id text, client_secret text, client_secret_expires_at bigint, client_id_issued_at bigint, metadata jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    insert into identity.oauth_clients (client_id, client_secret_hash, client_secret_expires_at, client_id_issued_at, metadata)
      values (client_id, identity.token_hash(client_secret), coalesce(client_secret_expires_at, 0), client_id_issued_at,
              metadata - 'client_secret' - 'client_id' - 'client_id_issued_at' - 'client_secret_expires_at')
  $$;

COMMENT ON FUNCTION private.oauth_client_register(client_id text, client_secret text, client_secret_expires_at bigint, client_id_issued_at bigint, metadata jsonb) IS 'Stores a dynamically registered client (secret hashed; null for public clients).';


CREATE FUNCTION private.oauth_client_secret_matches(client_id text, client_secret text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce((
      select c.client_secret_hash is null
             or (c.client_secret_hash = identity.token_hash(coalesce(client_secret, ''))
                 and (c.client_secret_expires_at = 0 or c.client_secret_expires_at > extract(epoch from now())))
        from identity.oauth_clients c
       where c.client_id = oauth_client_secret_matches.client_id), false)
  $$;

COMMENT ON FUNCTION private.oauth_client_secret_matches(client_id text, client_secret text) IS 'True for a public client, or a confidential client presenting its (unexpired) secret.';


CREATE FUNCTION private.oauth_code_challenge(client_id text, code text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  challenge text;
begin
  select c.code_challenge into challenge from identity.oauth_codes c
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_challenge.client_id
     and c.used_at is null and c.expires_at > now();
  if challenge is null then
    perform private.oauth_code_reused(code);
  end if;
  return challenge;
end;
$$;

COMMENT ON FUNCTION private.oauth_code_challenge(client_id text, code text) IS 'The PKCE challenge of a live code of the client; null when unknown, expired or used (a used code''s tokens are revoked).';


CREATE FUNCTION private.oauth_code_exchange(client_id text, code text, redirect_uri text, resource text, access_ttl integer) RETURNS TABLE(access_token text, refresh_token text, expires_in integer, scope text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  grant_row identity.oauth_codes;
begin
  update identity.oauth_codes c set used_at = now()
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_exchange.client_id
     and c.used_at is null and c.expires_at > now()
  returning c.* into grant_row;
  if grant_row.code_hash is null then
    -- No rows: invalid_grant (a reused code's tokens are revoked, and that commits).
    perform private.oauth_code_reused(code);
    return;
  end if;
  if redirect_uri is not null and redirect_uri <> grant_row.redirect_uri then
    perform private.oauth_invalid_grant('redirect_uri does not match the authorization request');
  end if;
  if resource is not null and grant_row.resource is not null and resource <> grant_row.resource then
    perform private.oauth_invalid_grant('resource does not match the authorization request');
  end if;
  return query select * from private.oauth_issue_tokens(grant_row.client_id, grant_row.user_id, grant_row.family_id,
                                                        grant_row.scopes, coalesce(grant_row.resource, resource), access_ttl);
end;
$$;

COMMENT ON FUNCTION private.oauth_code_exchange(client_id text, code text, redirect_uri text, resource text, access_ttl integer) IS 'Exchanges a code (single use; PKCE checked before) for tokens. No row when unknown, expired or reused; PT400 invalid_grant when mismatched.';


CREATE FUNCTION private.oauth_code_reused(code text) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with revoked as (
      update identity.oauth_tokens t set revoked_at = now()
        from identity.oauth_codes c
       where c.code_hash = identity.token_hash(code) and c.used_at is not null
         and t.family_id = c.family_id and t.revoked_at is null
      returning 1)
    select exists (select from revoked)
  $$;



CREATE FUNCTION private.oauth_invalid_grant(message text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  raise exception '%', message using errcode = 'PT400', hint = 'invalid_grant';
end;
$$;



CREATE FUNCTION private.oauth_issue_tokens(client_id text, user_id uuid, family_id uuid, scopes text[], resource text, access_ttl integer) RETURNS TABLE(access_token text, refresh_token text, expires_in integer, scope text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  access text := 'cboa_' || identity.new_token();
  refresh text := 'cbor_' || identity.new_token();
begin
  insert into identity.oauth_tokens (token_hash, kind, client_id, user_id, family_id, scopes, resource, expires_at) values
    (identity.token_hash(access), 'access', client_id, user_id, family_id, scopes, resource,
     now() + make_interval(secs => access_ttl)),
    (identity.token_hash(refresh), 'refresh', client_id, user_id, family_id, scopes, resource, now() + interval '30 days');
  return query select access, refresh, access_ttl, array_to_string(scopes, ' ');
end;
$$;

COMMENT ON FUNCTION private.oauth_issue_tokens(client_id text, user_id uuid, family_id uuid, scopes text[], resource text, access_ttl integer) IS 'Issues an access token and a refresh token of one family (tests use it to mint tokens directly).';


CREATE FUNCTION private.oauth_prune() RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    delete from identity.oauth_requests where expires_at < now();
    delete from identity.oauth_codes where expires_at < now() - interval '1 day';
    delete from identity.oauth_tokens where expires_at < now() - interval '1 day';
  $$;
COMMENT ON FUNCTION private.oauth_prune() IS 'Deletes expired pending requests, codes and tokens.';


CREATE FUNCTION private.oauth_request_approve(request_token text, attempt text, matched boolean, new_hash text) RETURNS TABLE(status text, redirect_uri text, code text, state text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  request identity.oauth_requests;
  checked record;
  new_code text := identity.new_token();
begin
  select * into strict checked from private.password_attempt_finish('oauth_consent', attempt, matched, new_hash);
  select r.* into request from identity.oauth_requests r
   where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
   for update;
  if request.request_hash is null then
    -- Not raised: the attempt's outcome (a failure is counted) is kept.
    return query select 'request_expired'::text, null::text, null::text, null::text;
    return;
  end if;
  if checked.status <> 'ok' then
    if checked.status = 'invalid' then
      if request.failures >= 4 then
        delete from identity.oauth_requests r where r.request_hash = request.request_hash;
      else
        update identity.oauth_requests r set failures = r.failures + 1 where r.request_hash = request.request_hash;
      end if;
    end if;
    return query select checked.status, null::text, null::text, null::text;
    return;
  end if;
  delete from identity.oauth_requests r where r.request_hash = request.request_hash;
  insert into identity.oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, scopes, resource, expires_at)
    values (identity.token_hash(new_code), request.client_id, checked.user_id, request.redirect_uri, request.code_challenge,
            request.scopes, request.resource, now() + interval '1 minute');
  return query select 'ok'::text, request.redirect_uri, new_code, request.state;
end;
$$;

COMMENT ON FUNCTION private.oauth_request_approve(request_token text, attempt text, matched boolean, new_hash text) IS 'The consent form, after the MCP process compared the password with the hash of private.password_attempt_start (door oauth_consent): finishes the attempt (the login''s throttling) and turns the pending request into a single-use code. status ok (redirect_uri, code, state), invalid (counted; the request allows 5), expired (the attempt) or request_expired.';


CREATE FUNCTION private.oauth_request_begin(client_id text, redirect_uri text, code_challenge text, state text, scopes text[], resource text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  token text := identity.new_token();
begin
  delete from identity.oauth_requests r where r.expires_at < now();
  insert into identity.oauth_requests (request_hash, client_id, redirect_uri, code_challenge, state, scopes, resource, expires_at)
    values (identity.token_hash(token), client_id, redirect_uri, code_challenge, state, scopes, resource,
            now() + interval '10 minutes');
  return token;
end;
$$;

COMMENT ON FUNCTION private.oauth_request_begin(client_id text, redirect_uri text, code_challenge text, state text, scopes text[], resource text) IS 'Keeps a validated authorization request until the user consents; returns the request''s secret id (for the consent form).';


CREATE FUNCTION private.oauth_request_deny(request_token text) RETURNS TABLE(redirect_uri text, state text)
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    delete from identity.oauth_requests r
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
    returning r.redirect_uri, r.state
  $$;

COMMENT ON FUNCTION private.oauth_request_deny(request_token text) IS 'The user declined: forgets the request and returns where to send the error.';


CREATE FUNCTION private.oauth_request_get(request_token text) RETURNS TABLE(client_id text, client_name text, client_uri text, redirect_uri text, scopes text[], state text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select r.client_id, c.metadata->>'client_name', c.metadata->>'client_uri', r.redirect_uri, r.scopes, r.state
      from identity.oauth_requests r
      join identity.oauth_clients c on c.client_id = r.client_id
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
  $$;

COMMENT ON FUNCTION private.oauth_request_get(request_token text) IS 'A pending authorization request (for the consent page); no row when unknown or expired.';


CREATE FUNCTION private.oauth_token_authenticate(access_token text) RETURNS TABLE(token_id uuid, user_id uuid, client_id text, scopes text[], resource text, expires_at timestamp with time zone)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return query
    select t.id, t.user_id, t.client_id, t.scopes, t.resource, t.expires_at
      from identity.oauth_tokens t
     where t.token_hash = identity.token_hash(access_token) and t.kind = 'access'
       and t.revoked_at is null and t.expires_at > now();
  if not found then
    raise exception 'invalid or expired access token' using errcode = 'PT401', hint = 'invalid_token';
  end if;
end;
$$;

COMMENT ON FUNCTION private.oauth_token_authenticate(access_token text) IS 'The owner, client and scopes of a live OAuth access token; PT401 invalid_token otherwise.';


CREATE FUNCTION private.oauth_token_refresh(client_id text, presented_token text, scopes text[], resource text, access_ttl integer) RETURNS TABLE(access_token text, refresh_token text, expires_in integer, scope text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
-- `resource` is part of the OAuth provider's call; a refreshed token keeps the
-- resource of its grant, so the argument is not used.
-- @plpgsql_check_options: extra_warnings = false
declare
  old identity.oauth_tokens;
begin
  select t.* into old from identity.oauth_tokens t
   where t.token_hash = identity.token_hash(presented_token) and t.kind = 'refresh'
     and t.client_id = oauth_token_refresh.client_id
   for update;
  if old.id is null or old.expires_at <= now() then
    perform private.oauth_invalid_grant('invalid refresh token');
  end if;
  if old.revoked_at is not null then
    -- Reuse of a rotated token: revoke the family and answer no row (the revocation commits).
    update identity.oauth_tokens t set revoked_at = now() where t.family_id = old.family_id and t.revoked_at is null;
    return;
  end if;
  if scopes is not null and cardinality(scopes) > 0 and not scopes <@ old.scopes then
    raise exception 'requested scopes exceed the original grant' using errcode = 'PT400', hint = 'invalid_scope';
  end if;
  update identity.oauth_tokens t set revoked_at = now() where t.id = old.id;
  return query select * from private.oauth_issue_tokens(old.client_id, old.user_id, old.family_id,
                                                        coalesce(nullif(scopes, '{}'), old.scopes), old.resource, access_ttl);
end;
$$;

COMMENT ON FUNCTION private.oauth_token_refresh(client_id text, presented_token text, scopes text[], resource text, access_ttl integer) IS 'Rotates a refresh token. No row when a rotated one is presented again (the family is revoked); PT400 invalid_grant / invalid_scope.';


CREATE FUNCTION private.oauth_token_revoke(client_id text, token text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    update identity.oauth_tokens t set revoked_at = now()
     where t.revoked_at is null
       and t.family_id in (select r.family_id from identity.oauth_tokens r
                            where r.token_hash = identity.token_hash(token) and r.client_id = oauth_token_revoke.client_id)
  $$;

COMMENT ON FUNCTION private.oauth_token_revoke(client_id text, token text) IS 'Revokes the token''s whole family (RFC 7009); unknown tokens are ignored.';


CREATE FUNCTION private.redact_secrets(value jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if value is null then
    return null;
  end if;
  case jsonb_typeof(value)
    when 'object' then
      return coalesce((
        select jsonb_object_agg(e.key,
                 case when e.key ~* '(pass(word)?|secret|token|credential|api[_-]?key|authori[sz]ation|cookie)'
                      then '"[redacted]"'::jsonb
                      else private.redact_secrets(e.value) end)
          from jsonb_each(value) e), '{}'::jsonb);
    when 'array' then
      return coalesce((select jsonb_agg(private.redact_secrets(e.value) order by e.ordinality)
                         from jsonb_array_elements(value) with ordinality e), '[]'::jsonb);
    else
      return value;
  end case;
end;
$$;

COMMENT ON FUNCTION private.redact_secrets(value jsonb) IS 'The JSON value with every value under a secret-looking key (password, token, secret, ...) replaced by "[redacted]".';


CREATE FUNCTION private.stored_records_prune(keep interval DEFAULT '30 days'::interval, batch integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  tests integer;
  calls integer;
begin
  delete from app.api_test_results r
   where r.id in (select o.id from app.api_test_results o
                   where o.executed_at < now() - stored_records_prune.keep
                   limit stored_records_prune.batch);
  get diagnostics tests = row_count;
  delete from app.mcp_tool_calls c
   where c.id in (select o.id from app.mcp_tool_calls o
                   where o.called_at < now() - stored_records_prune.keep
                   limit stored_records_prune.batch);
  get diagnostics calls = row_count;
  return tests + calls;
end;
$$;

COMMENT ON FUNCTION private.stored_records_prune(keep interval, batch integer) IS 'Deletes live test results and MCP tool-call records older than `keep` (30 days), at most `batch` rows of each table per call; returns how many. The MCP process calls it every minute.';
