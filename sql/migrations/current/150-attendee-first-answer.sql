--------------------------------------------------------------------------------
-- A repeated attendee registration answers like the first
--
-- A platform that registers a new e-mail makes the account and learns its
-- user_id; sending the same registration again (a retry after a lost answer)
-- answered user_id null, as for an account the platform did not make. Each
-- registration now keeps what it did (made the account, joined it to the
-- community), so that api.platform_attendee_register can answer a repeat as
-- it answered the first, and can name an account a registration of the same
-- community made. Registrations made before this keep false: their repeats
-- answer as before.
--------------------------------------------------------------------------------
alter table app.event_attendees add column if not exists account_created boolean not null default false;
alter table app.event_attendees add column if not exists community_joined boolean not null default false;
