--! Previous: sha1:8da541995b5177801df5c6958ad125fbb039bd90
--! Hash: sha1:f0b1b4e9be518c984c3524c5282aaa37571380ce
--! Message: node-data-private

--! split: 1-current.sql
-- Enter migration here

--! split: 031-node-data-private.sql
--------------------------------------------------------------------------------
-- The signup data an agent collected for a member (app.nodes.data) is read by
-- the agent that created the member only, through the api.mcp_member_*
-- functions (security definer, scoped to the caller's own members).
--
-- Signed-in users could read it directly: SELECT on the whole of app.nodes
-- with a policy `using (true)`, and EXECUTE on private.mcp_member_json, which
-- returns any member's e-mail, name, data and attributes without checking
-- who asks. Nodes stay visible (connections name them), without their data;
-- the member object is built only inside the definer functions.
--------------------------------------------------------------------------------

revoke select on table app.nodes from authenticated;
grant select (id, kind, created_at) on table app.nodes to authenticated;

revoke execute on function private.mcp_member_json(uuid) from authenticated;
