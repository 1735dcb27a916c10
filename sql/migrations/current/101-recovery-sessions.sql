-- A session started by a password recovery link (POST /auth/v1/verify
-- type=recovery): within its hour, the password may be set once without the
-- current one (PUT /auth/v1/user), as in Supabase Auth's recovery session.
create table if not exists identity.recovery_sessions (
  session_id uuid primary key,
  user_id uuid not null references identity.users (id) on delete cascade,
  expires_at timestamptz not null
);
create index if not exists recovery_sessions_user_id_idx on identity.recovery_sessions (user_id);
