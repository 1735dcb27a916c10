--------------------------------------------------------------------------------
-- Nothing an agent is told says whether an e-mail has an account (security
-- review round 5): create_member for an address that has one (and is not the
-- agent's own member) gives the agent a placeholder member, which the member
-- tools answer as they answer a member it created; it reaches no account.
-- An agent's member joins a community only when the person claims the
-- account (sets a password): until then the join waits here, for a member
-- and a placeholder alike, so no community changes before then.
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.agent_member_placeholders (
  -- The ids the agent was given (they name no account and no node).
  id          uuid primary key default gen_random_uuid(),
  node_id     uuid not null default gen_random_uuid(),
  agent_id    uuid not null references identity.users (id) on delete cascade,
  -- The address the agent gave (lower case), which has an account.
  email       text not null,
  name        text not null,
  data        jsonb not null default '{}',
  attributes  jsonb not null default '{}' constraint agent_member_placeholders_attributes_check check (jsonb_typeof(attributes) = 'object'),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  constraint agent_member_placeholders_agent_email_key unique (agent_id, email)
);
comment on table app.agent_member_placeholders is
  'What create_member answered an agent for an address that already had an account: a member object answered as a created member is (get_member, set_member_attributes, add_member_to_community), which reaches no account.';
create index if not exists agent_member_placeholders_email_idx on app.agent_member_placeholders (email);
alter table app.agent_member_placeholders enable row level security;

create table if not exists app.agent_member_joins (
  -- An agent member's user id (app.agent_members), or a placeholder's id.
  member_id     uuid not null,
  community_id  uuid not null references app.communities (id) on delete cascade,
  agent_id      uuid not null references identity.users (id) on delete cascade,
  created_at    timestamptz not null default now(),
  constraint agent_member_joins_pkey primary key (member_id, community_id)
);
comment on table app.agent_member_joins is
  'Communities an agent handed its member to (add_member_to_community): the member joins them when the person claims the account.';
create index if not exists agent_member_joins_agent_idx on app.agent_member_joins (agent_id);
alter table app.agent_member_joins enable row level security;
