-- Offline check-ins: the phone's time beside the server's (app.checkins,
-- sql/areas/events.sql). The bound is added NOT VALID and validated after, so
-- the table is not locked against writes while existing rows are checked
-- (all null: they pass).
ALTER TABLE app.checkins ADD COLUMN IF NOT EXISTS device_checked_in_at timestamp with time zone;

ALTER TABLE app.checkins ADD CONSTRAINT checkins_device_time_bounded CHECK (((device_checked_in_at IS NULL) OR ((device_checked_in_at >= (checked_in_at - '24:00:00'::interval)) AND (device_checked_in_at <= (checked_in_at + '00:05:00'::interval))))) NOT VALID;

ALTER TABLE app.checkins VALIDATE CONSTRAINT checkins_device_time_bounded;
