-- Supabase Auth's user_metadata (PUT /auth/v1/user {data}, POST /auth/v1/signup
-- {data}): a column of the one user table, not a second store of users.
alter table identity.users add column if not exists user_metadata jsonb not null default '{}'::jsonb;
