-- Every webhook delivery gets a number from one sequence, sent as `sequence`
-- in its body (docs/webhooks.md#order): of two deliveries about the same
-- object, the later change has the higher number. The default is set apart
-- from adding the column, so no existing row is rewritten (those stay null).
create sequence if not exists app.webhook_deliveries_sequence_seq as bigint;
alter table app.webhook_deliveries add column if not exists sequence bigint;
alter sequence app.webhook_deliveries_sequence_seq owned by app.webhook_deliveries.sequence;
alter table app.webhook_deliveries alter column sequence set default nextval('app.webhook_deliveries_sequence_seq');
