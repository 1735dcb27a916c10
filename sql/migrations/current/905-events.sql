-- Made by `npm run db -- areas --diff` from sql/areas/events.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.event_attendees.account_created is 'Whether this registration made the account (api.platform_attendee_register answers its repeats, and other registrations of the community, with the user_id).';

comment on column app.event_attendees.community_joined is 'Whether this registration joined the account to the event''s community (a repeat answers it again).';
