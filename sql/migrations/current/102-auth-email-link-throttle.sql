--------------------------------------------------------------------------------
-- The doors that e-mail a link to whoever has an address (recover, the
-- deletion page) are counted per client address like the doors that set a
-- password (security review round 5): they now answer before anything is
-- looked up and queue a job, so a flood must not fill the job queue.
--------------------------------------------------------------------------------

alter table private.auth_failures drop constraint if exists auth_failures_scope_check;
-- Safe: private.auth_failures holds at most a day of rows (older ones are pruned every 10 minutes); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table private.auth_failures add constraint auth_failures_scope_check
  check (scope in ('email', 'email_client', 'ip', 'refresh', 'verify', 'password_set', 'email_link'));
comment on table private.auth_failures is
  'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP), '
  'requests at the doors that set a password (password_set, per client IP) and at the doors that e-mail a link (email_link, per client IP), for throttling.';
