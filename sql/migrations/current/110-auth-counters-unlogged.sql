-- The sign-in counters written on every attempt (private.password_attempts:
-- one row per sign-in while its password is checked; private.auth_failures:
-- one row per failure, and per request at the doors that set a password or
-- e-mail a link) are UNLOGGED: their rows write no WAL and a transaction that
-- writes only them (private.password_attempt_start) commits without waiting
-- for a WAL flush. A crash of the primary or a failover empties them, which
-- forgets the failures of the last window and ends the sign-ins being checked
-- at that moment (they answer expired and are tried again).
alter table private.password_attempts set unlogged;
alter table private.auth_failures set unlogged;
