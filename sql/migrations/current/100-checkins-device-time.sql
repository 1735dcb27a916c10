-- Offline check-ins: the phone's time beside the server's (app.checkins,
-- sql/areas/events.sql).
ALTER TABLE app.checkins ADD COLUMN IF NOT EXISTS device_checked_in_at timestamp with time zone;

ALTER TABLE app.checkins DROP CONSTRAINT IF EXISTS checkins_device_time_bounded;
-- Safe: the column is new, null in every row, so the validating scan refuses
-- nothing; it reads app.checkins once under the lock (one row per check-in).
-- squawk-ignore constraint-missing-not-valid
ALTER TABLE app.checkins ADD CONSTRAINT checkins_device_time_bounded CHECK (((device_checked_in_at IS NULL) OR ((device_checked_in_at >= (checked_in_at - '24:00:00'::interval)) AND (device_checked_in_at <= (checked_in_at + '00:05:00'::interval)))));
