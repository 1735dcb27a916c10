--! Previous: sha1:dcfe19ae10cf67321dcc851d72481dda9d9d2cd5
--! Hash: sha1:b7fbd1a269b18523625ea9d947240a843fe9d73e
--! Message: comments

--! split: 120-comments.sql
--------------------------------------------------------------------------------
-- Comments that pointed outside the repository
--
-- Four comments written by earlier migrations cited "spec section …", a
-- document a clone of this repository does not have. They now say where the
-- shape or the limit is described here: the Resources table of docs/api.md
-- (the object shapes, also components.schemas of the OpenAPI document) and
-- docs/agents.md (the per-agent limits on write tools).
--------------------------------------------------------------------------------

comment on function private.api_token_json(app.api_tokens) is
  'The ApiToken object (docs/api.md, Resources; components.schemas.ApiToken of the OpenAPI document), with community_id; never the secret or its hash.';

comment on function private.event_json(app.events, text) is
  'The Event object (docs/api.md, Resources; components.schemas.Event of the OpenAPI document) as the signed-in caller may see it; public_url is PUBLIC_URL.';

comment on function private.event_object(app.events, uuid, boolean, text) is
  'The Event object (docs/api.md, Resources; components.schemas.Event of the OpenAPI document) from the event, its community''s node id, whether the caller manages that community, and PUBLIC_URL.';

comment on table private.agent_tool_limits is
  'How many successful calls of a write tool one agent may make per hour (docs/agents.md). Tools not listed are unlimited.';
